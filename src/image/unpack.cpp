#include "image/unpack.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/sha256.hpp"
#include "image/apply.hpp"
#include "image/libarchive.hpp"
#include "image/oci_layout.hpp"
#include "image/safe_fs.hpp"

namespace boxlite::image {

namespace {

// Highest id a box sees (its user namespace maps 0..65535).
constexpr uint32_t kMaxBoxId = 65535;

struct ArchiveReadDeleter {
  void operator()(archive* a) const { la::archive_read_free(a); }
};

// Whether libarchive reads the layer through its gzip filter. After a failed open
// it may have dropped its filters (code -1): the magic bytes tell then.
bool is_gzip(archive* reader, int fd) {
  int code = la::archive_filter_code(reader, 0);
  if (code >= 0) return code == ARCHIVE_FILTER_GZIP;
  unsigned char magic[2];
  return ::pread(fd, magic, sizeof magic, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

// Inflates the whole file (every gzip member) to check each member's CRC-32 and
// length; throws Image for a truncated or corrupt stream or trailing garbage. A
// blob of an image is fetched again by pulling; a layer file (a box's exported upper
// layer) has no such source.
void verify_gzip(int fd, const std::string& label, bool image_blob) {
  std::string redo = image_blob ? ": re-pull the image" : "";
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw Error(ErrorKind::Internal, "zlib init failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  std::vector<unsigned char> in(1 << 16), out(1 << 16);
  off_t pos = 0;
  bool member_done = false;
  for (;;) {
    ssize_t n = ::pread(fd, in.data(), in.size(), pos);
    if (n < 0) throw_errno(ErrorKind::Image, label + ": read");
    if (n == 0) break;
    pos += n;
    z.next_in = in.data();
    z.avail_in = static_cast<uInt>(n);
    while (z.avail_in > 0) {
      if (member_done) {  // another member follows, or padding zeros some tools add
        if (*z.next_in == 0) {
          ++z.next_in;
          --z.avail_in;
          continue;
        }
        inflateReset(&z);
        member_done = false;
      }
      z.next_out = out.data();
      z.avail_out = static_cast<uInt>(out.size());
      int r = inflate(&z, Z_NO_FLUSH);
      if (r == Z_STREAM_END) {
        member_done = true;
      } else if (r != Z_OK && !(r == Z_BUF_ERROR && z.avail_in == 0)) {
        throw Error(ErrorKind::Image,
                    label + ": corrupt gzip stream (" + (z.msg ? z.msg : "inflate error") + redo + ")");
      }
    }
  }
  if (!member_done) {
    throw Error(ErrorKind::Image, label + ": truncated gzip stream (the " + (image_blob ? "layer blob" : "file") +
                                      " ends early" + redo + ")");
  }
}

// What libarchive reads the layer through: every byte it takes also goes through
// sha256 when the layer is a blob with a digest, so that what is unpacked is what
// was verified (hashing first and unpacking after would read the blob twice, and a
// blob swapped in between would be unpacked unverified).
struct HashingReader {
  int fd = -1;
  Sha256* hash = nullptr;  // null: no digest to check
  std::vector<char> buf = std::vector<char>(1 << 16);
  int err = 0;
};

la_ssize_t read_through_hash(archive*, void* data, const void** out) {
  auto* r = static_cast<HashingReader*>(data);
  for (;;) {
    ssize_t n = ::read(r->fd, r->buf.data(), r->buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r->err = errno;
      return -1;
    }
    if (r->hash && n > 0) r->hash->update({r->buf.data(), static_cast<size_t>(n)});
    *out = r->buf.data();
    return n;
  }
}

UnpackStats unpack_fd(const std::string& root_dir, int layer_fd, const std::string& layer_path,
                      std::optional<OverlayOptions> overlay, uint64_t max_bytes, const std::string& digest) {
  UniqueFd root(::open(root_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw_errno(ErrorKind::Image, "open unpack root " + root_dir);
  if (overlay && !detail::list_dir(root.get()).empty()) {
    throw Error(ErrorKind::InvalidArgument, "overlay layer directory " + root_dir + " is not empty");
  }
  Sha256 hash;
  HashingReader source{layer_fd, digest.empty() ? nullptr : &hash};
  std::unique_ptr<archive, ArchiveReadDeleter> reader(la::archive_read_new());
  if (!reader) throw Error(ErrorKind::Image, "libarchive: out of memory");
  // Only the compressions OCI/Docker layers use; filter_all would also enable
  // decoders that run external programs (lrzip, lzop, grzip) on hostile input.
  la::archive_read_support_filter_gzip(reader.get());
  la::archive_read_support_filter_zstd(reader.get());
  la::archive_read_support_filter_xz(reader.get());
  la::archive_read_support_format_tar(reader.get());
  la::archive_read_support_format_empty(reader.get());
  std::string label = "layer " + layer_path;
  // The tar reader stops at the end-of-archive blocks: the rest of the blob (a
  // compressor's trailer, padding) is part of the digest too. A blob that fails to
  // unpack is a corrupt blob first, if its digest says so. libarchive gives no
  // reason when our read fails: the errno does.
  auto check_digest = [&] {
    if (source.hash) {
      const void* ignored = nullptr;
      while (read_through_hash(nullptr, &source, &ignored) > 0) {
      }
    }
    if (source.err != 0) throw_errno(ErrorKind::Image, label + ": read", source.err);
    if (source.hash && hash.finish() != digest)
      throw Error(ErrorKind::Image, "corrupt blob " + digest + " at " + layer_path + ": digest mismatch");
  };
  UnpackStats stats;
  try {
    if (la::archive_read_open(reader.get(), &source, nullptr, read_through_hash, nullptr) != ARCHIVE_OK)
      throw Error(ErrorKind::Image, label + ": open: " + detail::archive_error_text(reader.get()));
    stats = detail::apply_archive(std::move(root), reader.get(), label,
                                  detail::ApplyMode{overlay, std::nullopt, max_bytes});
  } catch (const Error&) {
    check_digest();
    // Next, a broken gzip stream: libarchive's gzip reader fails with no message
    // when the 8-byte trailer is cut short, and any error an entry raised after
    // the break (a garbled header, a short file) is its consequence.
    if (is_gzip(reader.get(), layer_fd)) verify_gzip(layer_fd, label, !digest.empty());
    throw;
  }
  check_digest();
  // The tar reader stops at the end-of-archive blocks, before gzip's trailer
  // (which libarchive never checks anyway): a stream cut inside its trailer, or
  // corrupted but still decoding, would pass unnoticed.
  if (is_gzip(reader.get(), layer_fd)) verify_gzip(layer_fd, label, !digest.empty());
  return stats;
}

UnpackStats unpack(const std::string& root_dir, const std::string& layer_path, std::optional<OverlayOptions> overlay,
                   uint64_t max_bytes) {
  UniqueFd layer_fd(::open(layer_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!layer_fd) throw_errno(ErrorKind::Image, "open layer " + layer_path);
  return unpack_fd(root_dir, layer_fd.get(), layer_path, overlay, max_bytes, "");
}

UnpackStats unpack_blob(const std::string& root_dir, const Layer& layer, std::optional<OverlayOptions> overlay,
                        uint64_t max_bytes, struct stat* blob_st) {
  struct stat st {};
  UniqueFd fd = open_layer_blob(layer, st);
  UnpackStats stats = unpack_fd(root_dir, fd.get(), layer.blob_path, overlay, max_bytes, layer.digest);
  if (blob_st) *blob_st = st;
  return stats;
}

void check_overlay_offsets(const std::string& what, const OverlayOptions& opts) {
  if (::geteuid() != 0) {
    throw Error(ErrorKind::Unsupported, "cannot extract layer " + what + " owned by uid " +
                                            std::to_string(opts.uid_offset) +
                                            "+: the jail engine needs root to prepare shifted layers");
  }
  // uid_t -1 means "unchanged" to chown: the shifted range must stay below it.
  constexpr uint32_t kMaxOffset = std::numeric_limits<uint32_t>::max() - kMaxBoxId - 1;
  if (opts.uid_offset > kMaxOffset || opts.gid_offset > kMaxOffset) {
    throw Error(ErrorKind::InvalidArgument, "id offsets " + std::to_string(opts.uid_offset) + "/" +
                                                std::to_string(opts.gid_offset) + " leave no room for 65536 ids");
  }
}

}  // namespace

UnpackStats apply_layer(const std::string& root_dir, const std::string& layer_path, uint64_t max_bytes) {
  return unpack(root_dir, layer_path, std::nullopt, max_bytes);
}

UnpackStats apply_layer_blob(const std::string& root_dir, const Layer& layer, uint64_t max_bytes,
                             struct stat* blob_st) {
  return unpack_blob(root_dir, layer, std::nullopt, max_bytes, blob_st);
}

UnpackStats extract_layer_blob_for_overlay(const std::string& layer_dir, const Layer& layer, const OverlayOptions& opts,
                                           struct stat* blob_st) {
  check_overlay_offsets(layer.blob_path, opts);
  return unpack_blob(layer_dir, layer, opts, opts.max_bytes, blob_st);
}

uint64_t max_image_bytes() {
  const char* v = std::getenv("BOXLITE_MAX_IMAGE_BYTES");
  if (!v || !*v) return uint64_t{32} << 30;
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0' || n == 0 || v[0] == '-') {
    throw Error(ErrorKind::Config,
                std::string("BOXLITE_MAX_IMAGE_BYTES must be a positive number of bytes, got '") + v + "'");
  }
  return n;
}

UnpackStats extract_layer_for_overlay(const std::string& layer_dir, const std::string& layer_path,
                                      const OverlayOptions& opts) {
  check_overlay_offsets(layer_path, opts);
  return unpack(layer_dir, layer_path, opts, opts.max_bytes);
}

}  // namespace boxlite::image
