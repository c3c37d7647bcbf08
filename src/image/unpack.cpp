#include "image/unpack.hpp"

#include <archive.h>
#include <fcntl.h>
#include <unistd.h>

#include <limits>
#include <memory>
#include <optional>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "image/apply.hpp"
#include "image/safe_fs.hpp"

namespace boxlite::image {

namespace {

// Highest id a box sees (its user namespace maps 0..65535).
constexpr uint32_t kMaxBoxId = 65535;

struct ArchiveReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};

UnpackStats unpack(const std::string& root_dir, const std::string& layer_path, std::optional<OverlayOptions> overlay) {
  UniqueFd root(::open(root_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw_errno(ErrorCode::Image, "open unpack root " + root_dir);
  if (overlay && !detail::list_dir(root.get()).empty()) {
    throw Error(ErrorCode::InvalidArgument, "overlay layer directory " + root_dir + " is not empty");
  }
  UniqueFd layer_fd(::open(layer_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!layer_fd) throw_errno(ErrorCode::Image, "open layer " + layer_path);
  // Declared after layer_fd: freed before the fd closes.
  std::unique_ptr<archive, ArchiveReadDeleter> reader(archive_read_new());
  if (!reader) throw Error(ErrorCode::Image, "libarchive: out of memory");
  // Only the compressions OCI/Docker layers use; filter_all would also enable
  // decoders that run external programs (lrzip, lzop, grzip) on hostile input.
  archive_read_support_filter_gzip(reader.get());
  archive_read_support_filter_zstd(reader.get());
  archive_read_support_filter_xz(reader.get());
  archive_read_support_format_tar(reader.get());
  archive_read_support_format_empty(reader.get());
  std::string label = "layer " + layer_path;
  if (archive_read_open_fd(reader.get(), layer_fd.get(), 1 << 16) != ARCHIVE_OK) {
    const char* msg = archive_error_string(reader.get());
    throw Error(ErrorCode::Image, label + ": open: " + (msg ? msg : "unknown libarchive error"));
  }
  return detail::apply_archive(std::move(root), reader.get(), label, detail::ApplyMode{overlay, std::nullopt});
}

}  // namespace

UnpackStats apply_layer(const std::string& root_dir, const std::string& layer_path) {
  return unpack(root_dir, layer_path, std::nullopt);
}

UnpackStats extract_layer_for_overlay(const std::string& layer_dir, const std::string& layer_path,
                                      const OverlayOptions& opts) {
  if (::geteuid() != 0) {
    throw Error(ErrorCode::Unsupported, "cannot extract layer " + layer_path + " owned by uid " +
                                            std::to_string(opts.uid_offset) +
                                            "+: the jail engine needs root to prepare shifted layers");
  }
  // uid_t -1 means "unchanged" to chown: the shifted range must stay below it.
  constexpr uint32_t kMaxOffset = std::numeric_limits<uint32_t>::max() - kMaxBoxId - 1;
  if (opts.uid_offset > kMaxOffset || opts.gid_offset > kMaxOffset) {
    throw Error(ErrorCode::InvalidArgument, "id offsets " + std::to_string(opts.uid_offset) + "/" +
                                                std::to_string(opts.gid_offset) + " leave no room for 65536 ids");
  }
  return unpack(layer_dir, layer_path, opts);
}

}  // namespace boxlite::image
