// Runtime's storage operations: clone, export, import, and the clone
// dependencies a remove checks. docs/storage.md has the design.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/file_lock.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "core/network.hpp"
#include "core/paths.hpp"
#include "core/record_copy.hpp"
#include "core/runtime.hpp"
#include "core/snapshots.hpp"
#include "engine/jail/disk.hpp"
#include "image/libarchive.hpp"
#include "image/oci_layout.hpp"
#include "image/unpack.hpp"

namespace boxlite {
namespace {

constexpr const char* kManifestName = "boxlite-export.json";
constexpr const char* kDiskName = "disk.qcow2";
// A jail export's upper layer: an OCI layer tar (whiteouts as .wh. entries, box ids).
constexpr const char* kUpperName = "upper.tar";
constexpr int kExportFormat = 1;

// Removes a directory or file unless committed.
struct PathGuard {
  std::string path;
  bool committed = false;
  ~PathGuard() {
    if (committed || path.empty()) return;
    try {
      remove_tree(path);
    } catch (...) {
    }
  }
};

struct ArchiveWriteDeleter {
  void operator()(archive* a) const { la::archive_write_free(a); }
};
struct ArchiveReadDeleter {
  void operator()(archive* a) const { la::archive_read_free(a); }
};
using WriteArchive = std::unique_ptr<archive, ArchiveWriteDeleter>;
using ReadArchive = std::unique_ptr<archive, ArchiveReadDeleter>;

void validate_new_name(store::Store& store, const std::string& name) {
  if (name.empty()) return;
  bool ok = name.size() <= 128 && std::isalnum(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  if (!ok)
    throw Error(ErrorKind::InvalidArgument,
                "invalid box name '" + name + "': use [a-zA-Z0-9][a-zA-Z0-9_.-]* (at most 128)");
  if (store.find_exact(name)) throw Error(ErrorKind::AlreadyExists, "box name '" + name + "' is already in use");
}

std::string clone_of(const store::BoxRecord& r) {
  try {
    return nlohmann::json::parse(r.options_json).value("clone_of", std::string());
  } catch (const nlohmann::json::exception&) {
    return "";
  }
}

struct LinkResolverDeleter {
  void operator()(archive_entry_linkresolver* r) const { la::archive_entry_linkresolver_free(r); }
};
using EntryPtr = std::unique_ptr<archive_entry, void (*)(archive_entry*)>;

void write_header(archive* a, archive_entry* e, const std::string& what) {
  if (la::archive_write_header(a, e) != ARCHIVE_OK)
    throw Error(ErrorKind::Storage, "export: " + what + ": " + la::archive_error_string(a));
}

void add_empty_file(archive* a, const std::string& name) {
  EntryPtr e(la::archive_entry_new(), la::archive_entry_free);
  la::archive_entry_set_pathname(e.get(), name.c_str());
  la::archive_entry_set_filetype(e.get(), AE_IFREG);
  la::archive_entry_set_perm(e.get(), 0644);
  la::archive_entry_set_size(e.get(), 0);
  write_header(a, e.get(), name);
}

void copy_file_data(archive* a, const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) throw_errno(ErrorKind::Storage, "open " + path);
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(ErrorKind::Storage, "read " + path);
    if (n == 0) return;
    if (la::archive_write_data(a, buf.data(), static_cast<size_t>(n)) != n) {
      throw Error(ErrorKind::Storage, "export: " + path + ": " + la::archive_error_string(a));
    }
  }
}

// A file's data extents (SEEK_DATA/SEEK_HOLE), in order; one extent of the whole
// file where the file system cannot tell.
std::vector<std::pair<off_t, off_t>> data_extents(int fd, off_t size) {
  std::vector<std::pair<off_t, off_t>> out;
  off_t pos = 0;
  while (pos < size) {
    off_t data = ::lseek(fd, pos, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // only a hole from here on
      return {{0, size}};         // not supported here: all of it is data
    }
    off_t hole = ::lseek(fd, data, SEEK_HOLE);
    if (hole < 0 || hole > size) hole = size;
    if (hole > data) out.emplace_back(data, hole - data);
    pos = hole;
  }
  return out;
}

// A regular file's data into the entry just written (its header carries the
// sparse map of `extents`): holes are handed to libarchive as zeros, which its pax
// writer skips, so a box's sparse file stays small in the export.
void copy_file_extents(archive* a, int fd, const std::string& path, const std::vector<std::pair<off_t, off_t>>& extents,
                       off_t size) {
  static const std::vector<char> zeros(1 << 20, 0);
  std::vector<char> buf(1 << 20);
  auto put = [&](const char* p, size_t n) {
    if (la::archive_write_data(a, p, n) != static_cast<la_ssize_t>(n)) {
      throw Error(ErrorKind::Storage, "export: " + path + ": " + la::archive_error_string(a));
    }
  };
  auto put_zeros = [&](off_t n) {
    for (; n > 0; n -= std::min<off_t>(n, static_cast<off_t>(zeros.size()))) {
      put(zeros.data(), static_cast<size_t>(std::min<off_t>(n, static_cast<off_t>(zeros.size()))));
    }
  };
  off_t pos = 0;
  for (auto [off, len] : extents) {
    put_zeros(off - pos);
    for (off_t done = 0; done < len;) {
      size_t want = static_cast<size_t>(std::min<off_t>(len - done, static_cast<off_t>(buf.size())));
      ssize_t n = ::pread(fd, buf.data(), want, off + done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_errno(ErrorKind::Storage, "read " + path);
      if (n == 0) throw Error(ErrorKind::Storage, "export: " + path + " shrank while it was read");
      put(buf.data(), static_cast<size_t>(n));
      done += n;
    }
    pos = off + len;
  }
  put_zeros(size - pos);
}

void add_file_entry(archive* a, const std::string& name, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw_errno(ErrorKind::Storage, "stat " + path);
  EntryPtr e(la::archive_entry_new(), la::archive_entry_free);
  la::archive_entry_set_pathname(e.get(), name.c_str());
  la::archive_entry_set_filetype(e.get(), AE_IFREG);
  la::archive_entry_set_perm(e.get(), 0600);
  la::archive_entry_set_size(e.get(), st.st_size);
  write_header(a, e.get(), name);
  copy_file_data(a, path);
}

// Writes a jail's upper directory as an OCI layer tar, the form image layers take,
// so import reads it with the image code's hostile-input-safe extractor
// (image::extract_layer_for_overlay). Overlay whiteouts (char devices 0:0) become
// ".wh.NAME", opaque directories (trusted.overlay.opaque=y) ".wh..wh..opq"; owners
// are written as the box sees them (host id - uid_offset); hardlinks stay links.
// Other xattrs are not carried (the extractor never applies an archive's xattrs),
// nor fifos and sockets (it skips them too).
void write_upper_layer(const std::string& upper, const std::string& out, uint32_t uid_offset) {
  WriteArchive a(la::archive_write_new());
  la::archive_write_set_format_pax_restricted(a.get());
  if (la::archive_write_open_filename(a.get(), out.c_str()) != ARCHIVE_OK) {
    throw Error(ErrorKind::Storage, "export: open " + out + ": " + la::archive_error_string(a.get()));
  }
  std::unique_ptr<archive_entry_linkresolver, LinkResolverDeleter> links(la::archive_entry_linkresolver_new());
  la::archive_entry_linkresolver_set_strategy(links.get(), la::archive_format(a.get()));
  auto box_id = [&](uint32_t host) -> uint32_t {
    return host >= uid_offset && host - uid_offset <= 65535 ? host - uid_offset : 65534;
  };
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::recursive_directory_iterator it(upper, ec), end;  // symlinks are not followed
  if (ec) throw Error(ErrorKind::Storage, "export: read " + upper + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) throw Error(ErrorKind::Storage, "export: read " + upper + ": " + ec.message());
    std::string path = it->path().string();
    std::string rel = it->path().lexically_relative(upper).string();
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) throw_errno(ErrorKind::Storage, "export: lstat " + path);
    if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
      std::string parent = it->path().parent_path().lexically_relative(upper).string();
      add_empty_file(a.get(), (parent == "." ? "" : parent + "/") + ".wh." + it->path().filename().string());
      continue;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) continue;  // fifos, sockets
    EntryPtr e(la::archive_entry_new(), la::archive_entry_free);
    la::archive_entry_copy_stat(e.get(), &st);
    la::archive_entry_set_pathname(e.get(), rel.c_str());
    la::archive_entry_set_uid(e.get(), box_id(st.st_uid));
    la::archive_entry_set_gid(e.get(), box_id(st.st_gid));
    if (S_ISLNK(st.st_mode)) {
      std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
      ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
      if (n < 0) throw_errno(ErrorKind::Storage, "export: readlink " + path);
      target.resize(static_cast<size_t>(n));
      la::archive_entry_set_symlink(e.get(), target.c_str());
    }
    if (!S_ISREG(st.st_mode)) la::archive_entry_set_size(e.get(), 0);
    if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
      archive_entry* entry = e.release();
      archive_entry* spare = nullptr;
      la::archive_entry_linkify(links.get(), &entry, &spare);
      e.reset(entry);
      if (spare) la::archive_entry_free(spare);
    }
    if (S_ISREG(st.st_mode) && la::archive_entry_size(e.get()) > 0) {
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) throw_errno(ErrorKind::Storage, "open " + path);
      auto extents = data_extents(fd.get(), st.st_size);
      off_t data = 0;
      for (auto [off, len] : extents) data += len;
      if (data < st.st_size) {
        for (auto [off, len] : extents) la::archive_entry_sparse_add_entry(e.get(), off, len);
        if (extents.empty()) la::archive_entry_sparse_add_entry(e.get(), st.st_size, 0);  // a hole throughout
      }
      write_header(a.get(), e.get(), rel);
      copy_file_extents(a.get(), fd.get(), path, extents, st.st_size);
    } else {
      write_header(a.get(), e.get(), rel);
    }
    char opaque[2] = {};
    if (S_ISDIR(st.st_mode) && ::lgetxattr(path.c_str(), "trusted.overlay.opaque", opaque, sizeof opaque) == 1 &&
        opaque[0] == 'y') {
      add_empty_file(a.get(), rel + "/.wh..wh..opq");
    }
  }
  if (la::archive_write_close(a.get()) != ARCHIVE_OK)
    throw Error(ErrorKind::Storage, std::string("export: ") + la::archive_error_string(a.get()));
}

// An export's upper layer is only ever what write_upper_layer writes: refuse (with
// InvalidArgument naming the entry) anything else before a byte is extracted —
// absolute paths, "..", device nodes, fifos and sockets (whiteouts are .wh. files
// there), hardlinks leaving the layer, and entries below a symlink of the archive
// (writing through it). The extractor confines all of these as well; refusing
// says the archive is hostile instead of importing part of it.
void check_upper_layer(const std::string& tar_path, const std::string& archive_name) {
  ReadArchive a(la::archive_read_new());
  la::archive_read_support_format_tar(a.get());
  if (la::archive_read_open_filename(a.get(), tar_path.c_str(), 1 << 20) != ARCHIVE_OK) {
    throw Error(ErrorKind::InvalidArgument,
                "import: " + archive_name + ": unreadable upper layer: " + la::archive_error_string(a.get()));
  }
  auto bad_path = [](const std::string& p) {
    if (p.empty() || p[0] == '/') return true;
    for (const auto& c : split(p, '/')) {
      if (c == "..") return true;
    }
    return false;
  };
  auto clean = [](std::string p) {
    while (p.rfind("./", 0) == 0) p.erase(0, 2);
    while (!p.empty() && p.back() == '/') p.pop_back();
    return p;
  };
  std::vector<std::string> symlinks;
  archive_entry* e = nullptr;
  int rc;
  while ((rc = la::archive_read_next_header(a.get(), &e)) == ARCHIVE_OK) {
    std::string name = la::archive_entry_pathname(e) ? la::archive_entry_pathname(e) : "";
    auto refuse = [&](const std::string& why) {
      throw Error(ErrorKind::InvalidArgument,
                  "import: " + archive_name + ": refused upper layer entry '" + name + "': " + why);
    };
    if (bad_path(name)) refuse("absolute or with '..'");
    std::string p = clean(name);
    for (const auto& l : symlinks) {
      if (p.rfind(l + "/", 0) == 0) refuse("it is below the symlink '" + l + "'");
    }
    const char* hard = la::archive_entry_hardlink(e);
    if (hard && bad_path(hard)) refuse("a hardlink to outside the layer");
    auto type = la::archive_entry_filetype(e);
    if (!hard && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) refuse("a device node, fifo or socket");
    if (type == AE_IFLNK) symlinks.push_back(p);
  }
  if (rc != ARCHIVE_EOF)
    throw Error(ErrorKind::InvalidArgument,
                "import: " + archive_name + ": bad upper layer: " + la::archive_error_string(a.get()));
}

// The image layers a jail box stands on: their names in the layer cache without the
// uid offset ("<layer hex>"), which identify the image across homes.
nlohmann::json layer_ids(const engine::ShimSpec& spec) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : spec.jail().lower_dirs) {
    std::string name = d.substr(d.rfind('/') + 1);
    out.push_back(name.substr(0, name.rfind('-')));
  }
  return out;
}

// The record of a new box made from `source`'s: created, never started, kept
// until removed, under its own id and name.
store::BoxRecord clone_record(const store::BoxRecord& source, const std::string& id, const std::string& name,
                              bool detach) {
  store::BoxRecord r = source;
  r.id = id;
  r.name = name;
  r.state = BoxState::Configured;
  r.stop_reason.clear();
  r.created_at_ms = wall_clock_ms();
  r.started_at_ms = r.stopped_at_ms = 0;
  r.shim_pid = 0;
  r.main_exit_code.reset();
  r.auto_remove = false;
  r.detach = detach;
  r.timings_json = "{}";
  return r;
}

// The main command a record was created with ("sh" when it is unreadable).
std::vector<std::string> recorded_argv(const nlohmann::json& options) {
  if (!options.is_object() || !options.contains("argv")) return {"sh"};
  const nlohmann::json& argv = options["argv"];
  if (!argv.is_array() || !std::all_of(argv.begin(), argv.end(), [](const auto& w) { return w.is_string(); })) {
    throw Error(ErrorKind::InvalidArgument, "the box's recorded options: argv is not a list of strings");
  }
  return argv.get<std::vector<std::string>>();
}

// An export's manifest, as far as import trusts it: an object of the fields an
// export writes, each of its type, nested no deeper than an export's (a deeply
// nested document would exhaust the stack of whatever walks it recursively).
nlohmann::json parse_export_manifest(const std::string& text, const std::string& archive) {
  constexpr int kMaxDepth = 32;
  auto refuse = [&archive](const std::string& why) {
    return Error(ErrorKind::InvalidArgument, "import: " + archive + ": invalid manifest: " + why);
  };
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(text, [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > kMaxDepth) throw refuse("nested deeper than " + std::to_string(kMaxDepth) + " levels");
      return true;
    });
  } catch (const nlohmann::json::exception& ex) {
    throw refuse(ex.what());
  }
  if (!m.is_object()) throw refuse("not a JSON object");
  struct Field {
    const char* name;
    bool (nlohmann::json::*is)() const noexcept;
    const char* type;
    bool required;
  };
  static constexpr Field kFields[] = {
      {"format", &nlohmann::json::is_number_integer, "an integer", true},
      {"spec", &nlohmann::json::is_object, "an object", true},
      {"engine", &nlohmann::json::is_string, "a string", false},
      {"box_id", &nlohmann::json::is_string, "a string", false},
      {"name", &nlohmann::json::is_string, "a string", false},
      {"image", &nlohmann::json::is_string, "a string", false},
      {"options", &nlohmann::json::is_object, "an object", false},
      {"image_layers", &nlohmann::json::is_array, "a list", false},
  };
  for (const Field& f : kFields) {
    if (!m.contains(f.name)) {
      if (f.required) throw refuse(std::string("no \"") + f.name + "\"");
      continue;
    }
    if (!(m[f.name].*f.is)()) throw refuse(std::string("\"") + f.name + "\" is not " + f.type);
  }
  return m;
}

// The VM disk an archive brings: a qcow2 (version 2 or 3) that names no other file,
// neither a backing file nor an external data file (QCOW2 spec: the header's
// backing_file_offset, and incompatible feature bit 2). Read from the file itself,
// before any tool opens it.
void check_self_contained_qcow2(const std::string& disk, const std::string& archive) {
  auto refuse = [&](const std::string& why) {
    return Error(ErrorKind::InvalidArgument,
                 "import: " + archive + ": the disk is not a self-contained qcow2 image (" + why + ")");
  };
  UniqueFd fd(::open(disk.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) throw_errno(ErrorKind::Storage, "open " + disk);
  unsigned char h[80] = {};
  ssize_t n = ::pread(fd.get(), h, sizeof h, 0);
  auto be = [&h](size_t off, size_t len) {
    uint64_t v = 0;
    for (size_t i = 0; i < len; ++i) v = (v << 8) | h[off + i];
    return v;
  };
  if (n < 72 || be(0, 4) != 0x514649fbU) throw refuse("no qcow2 header");
  uint64_t version = be(4, 4);
  if (version != 2 && version != 3) throw refuse("qcow2 version " + std::to_string(version));
  if (be(8, 8) != 0 || be(16, 4) != 0) throw refuse("it names a backing file");
  if (version == 3) {
    if (n < 80) throw refuse("truncated header");
    constexpr uint64_t kExternalDataFile = 1U << 2;
    constexpr uint64_t kKnownIncompatible = (1U << 0) | (1U << 1) | kExternalDataFile | (1U << 3) | (1U << 4);
    uint64_t incompatible = be(72, 8);
    if (incompatible & kExternalDataFile) throw refuse("its data lives in an external data file");
    if (incompatible & ~kKnownIncompatible) throw refuse("unknown incompatible features");
  }
}

// What the box is comes from the export; how this machine runs it (QEMU, kernel,
// agent, boxlite-net), from here. Published ports are carried: the box is expected
// to serve where it did, and a port taken here fails its start with the usual error.
// Returns the network options the machine parts are made from.
BoxOptions copy_exported_box(engine::ShimSpec& spec, const engine::ShimSpec& exported) {
  spec.cpus = exported.cpus;
  spec.memory_mib = exported.memory_mib;
  spec.boot_timeout_secs = exported.boot_timeout_secs;
  spec.hostname = spec.box_id;
  spec.env = exported.env;
  spec.working_dir = exported.working_dir;
  spec.user = exported.user;
  spec.main_argv = exported.main_argv;
  spec.main_tty = exported.main_tty;
  spec.main_stdin = exported.main_stdin;
  spec.main_rows = exported.main_rows;
  spec.main_cols = exported.main_cols;
  BoxOptions machine;
  machine.network.mode = exported.net.enabled ? "enabled" : "disabled";
  machine.network.allow_net = exported.net.allow_net;
  spec.net = make_net_config(machine);
  spec.net.ports = exported.net.ports;
  return machine;
}

}  // namespace

// The documented clone_box names a clone when the caller does not:
// "<source name or id>-clone-<n>", the first n not taken.
static std::string clone_name_for(store::Store& store, const LocalBox& source) {
  std::string base = (source.name().empty() ? source.id() : source.name()) + "-clone-";
  if (base.size() > 120) base = source.id() + "-clone-";
  for (int n = 1;; ++n) {
    std::string candidate = base + std::to_string(n);
    if (!store.find(candidate)) return candidate;
  }
}

// The source's spec under a new id and directory, kept until removed (auto_remove off).
engine::ShimSpec LocalRuntime::clone_spec(const LocalBox& source) {
  engine::ShimSpec spec = source.spec();
  spec.ephemeral = false;
  spec.box_id = make_box_id();
  spec.box_dir = layout_.box_dir(spec.box_id);
  spec.hostname = spec.box_id;
  return spec;
}

std::shared_ptr<LocalBox> LocalRuntime::clone_box(LocalBox& source, const std::string& requested_name, bool detach) {
  std::string name = requested_name.empty() ? clone_name_for(*store(), source) : requested_name;
  validate_new_name(*store(), name);
  FileLock lock = core::lock_box_directory(source.dir());
  if (source.spec().engine() == EngineKind::Jail) return clone_jail(source, name, detach);
  auto rec = store()->find(source.id());
  if (!rec) throw Error(ErrorKind::NotFound, "No such box: " + source.id());

  engine::ShimSpec spec = clone_spec(source);
  spec.vm().disk = spec.box_dir + "/" + kDiskName;
  PathGuard guard{spec.box_dir};
  if (::mkdir(spec.box_dir.c_str(), 0700) != 0) throw_errno(ErrorKind::Storage, "create box directory " + spec.box_dir);
  // The source's disk as it is now becomes a frozen layer both disks grow over:
  // O(1) whatever the disk holds, and neither box sees the other's writes. A
  // running source is paused for the swap and resumed (freeze_box_disk).
  make_dirs(source.dir() + "/snapshots", 0700);
  std::string frozen = engine::clone_backing_path(source.dir(), spec.box_id);
  freeze_box_disk(source, frozen);
  disk::create_overlay_on(frozen, "qcow2", spec.vm().disk, disk::virtual_size(frozen));
  engine::write_spec(spec);

  store::BoxRecord r = clone_record(*rec, spec.box_id, name, detach);
  nlohmann::json opts = nlohmann::json::object();
  try {
    opts = nlohmann::json::parse(rec->options_json);
  } catch (const nlohmann::json::exception&) {
  }
  opts["clone_of"] = source.id();
  r.options_json = opts.dump();
  store()->insert(r);
  core::keep_record_copy(spec.box_dir, r);  // once the row is committed
  guard.committed = true;
  return track(std::make_shared<LocalBox>(spec, r, recorded_argv(opts), store()));
}

// A jail's clone copies the source's upper layer (O(data)) over the same image
// layers: fully independent, so the source keeps no clone dependency.
std::shared_ptr<LocalBox> LocalRuntime::clone_jail(LocalBox& source, const std::string& name, bool detach) {
  auto rec = store()->find(source.id());
  if (!rec) throw Error(ErrorKind::NotFound, "No such box: " + source.id());
  engine::ShimSpec spec = clone_spec(source);
  PathGuard guard{spec.box_dir};
  if (::mkdir(spec.box_dir.c_str(), 0700) != 0) throw_errno(ErrorKind::Storage, "create box directory " + spec.box_dir);
  // A running source is frozen meanwhile.
  if (has_jail_disk(source)) {
    copy_jail_disk(source, engine::jail::disk_image_path(spec.box_dir));
  } else {
    copy_jail_upper(source, spec.box_dir + "/upper");
  }
  engine::write_spec(spec);
  store::BoxRecord r = clone_record(*rec, spec.box_id, name, detach);
  store()->insert(r);
  core::keep_record_copy(spec.box_dir, r);  // once the row is committed
  guard.committed = true;
  nlohmann::json opts;
  try {
    opts = nlohmann::json::parse(rec->options_json);
  } catch (const nlohmann::json::exception&) {
  }
  return track(std::make_shared<LocalBox>(spec, r, recorded_argv(opts), store()));
}

namespace {

std::vector<store::BoxRecord> clones_of(store::Store& store, const std::string& id) {
  std::vector<store::BoxRecord> out;
  // Only rows whose options name the id at all are parsed: every destroy asks.
  for (const auto& r : store.list_options_containing(nlohmann::json(id).dump())) {
    if (clone_of(r) == id) out.push_back(r);
  }
  return out;
}

[[noreturn]] void throw_clone_dependents(const std::vector<store::BoxRecord>& clones) {
  std::string ids;
  for (const auto& c : clones) ids += (ids.empty() ? "" : ", ") + c.id;
  throw Error(ErrorKind::InvalidState, "Cannot remove box: boxes [" + ids +
                                           "] have clone dependencies on it. Remove them first, or use force=true "
                                           "(which copies the data they share into each clone)");
}

}  // namespace

void check_no_clone_dependents(store::Store& store, const std::string& box_id) {
  auto clones = clones_of(store, box_id);
  if (!clones.empty()) throw_clone_dependents(clones);
}

void LocalRuntime::release_clones(const std::string& id, bool force) {
  std::vector<store::BoxRecord> clones = clones_of(*store(), id);
  if (clones.empty()) return;
  if (!force) throw_clone_dependents(clones);
  for (const auto& c : clones) {
    // qemu-img must not rewrite a disk QEMU has open.
    if (c.state == BoxState::Running && process_alive(c.shim_pid)) {
      throw Error(ErrorKind::InvalidState, "Cannot remove box: its clone " + c.id + " is running; stop it first");
    }
  }
  for (const auto& c : clones) {
    engine::ShimSpec spec = engine::read_spec(layout_.box_dir(c.id));
    FileLock lock = core::lock_box_directory(spec.box_dir);
    // Safe-mode rebase onto the image's base: the clone keeps every byte it sees,
    // and nothing of it lives in the source's directory any more.
    disk::rebase(spec.vm().disk, spec.vm().disk_base, "raw");
    // Independent now: no longer a dependent of the source (Box::destroy checks).
    store::BoxRecord r = c;
    try {
      auto opts = nlohmann::json::parse(r.options_json);
      opts.erase("clone_of");
      r.options_json = opts.dump();
      store()->update(r);
    } catch (const nlohmann::json::exception&) {
    }
  }
}

std::string LocalRuntime::export_box(LocalBox& box, const std::string& dest_dir) {
  struct stat st {};
  if (dest_dir.empty() || ::stat(dest_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error(ErrorKind::InvalidArgument, "export destination '" + dest_dir + "' is not an existing directory");
  }
  FileLock lock = core::lock_box_directory(box.dir());
  if (box.spec().engine() == EngineKind::Jail) return export_jail(box, dest_dir);
  std::string dest = dest_dir + "/" + (box.name().empty() ? box.id() : box.name()) + ".boxlite";
  make_dirs(layout_.tmp());
  std::string flat = layout_.tmp() + "/export-" + random_hex(6) + ".qcow2";
  PathGuard flat_guard{flat};
  std::string source = box.dir() + "/" + kDiskName;
  if (box_is_running(box)) {
    // The disk as it is now is frozen as a layer (the VM pauses only for the swap)
    // and that frozen chain is flattened while the box runs on. The layer stays
    // under the box's disk, as a snapshot's would.
    make_dirs(box.dir() + "/snapshots", 0700);
    source = box.dir() + "/snapshots/export-" + random_hex(6) + ".qcow2";
    freeze_box_disk(box, source);
  }
  disk::flatten(source, flat);

  return write_export(box, dest, kDiskName, flat);
}

// <dest>: a tar of the manifest (format, engine, the box's spec and options) and
// the box's data (`data_name`: the flattened disk, or the jail's upper layer).
std::string LocalRuntime::write_export(LocalBox& box, const std::string& dest, const std::string& data_name,
                                       const std::string& data_file) {
  engine::ShimSpec spec = box.spec();
  spec.net.secrets.clear();  // secret values never leave the machine
  spec.volumes.clear();      // host paths mean nothing elsewhere
  auto rec = store()->find(box.id());
  nlohmann::json manifest = {{"format", kExportFormat},
                             {"engine", engine_kind_name(spec.engine())},
                             {"box_id", box.id()},
                             {"name", box.name()},
                             {"image", rec ? rec->image : ""},
                             {"options", rec ? nlohmann::json::parse(rec->options_json) : nlohmann::json::object()},
                             {"spec", nlohmann::json::parse(engine::spec_to_json(spec))}};
  if (spec.engine() == EngineKind::Jail) manifest["image_layers"] = layer_ids(spec);
  std::string manifest_file = data_file + ".json";
  PathGuard manifest_guard{manifest_file};
  write_file_atomic(manifest_file, manifest.dump(2), 0600);

  std::string tmp = dest + ".tmp-" + random_hex(4);
  PathGuard tmp_guard{tmp};
  // The box's whole disk or upper layer: readable by its owner only, as the box
  // directory is (libarchive would create it 0666 less the umask; it keeps the
  // mode of a file that exists).
  if (UniqueFd made(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)); !made) {
    throw_errno(ErrorKind::Storage, "export: create " + tmp);
  }
  {
    WriteArchive a(la::archive_write_new());
    la::archive_write_set_format_pax_restricted(a.get());
    if (la::archive_write_open_filename(a.get(), tmp.c_str()) != ARCHIVE_OK) {
      throw Error(ErrorKind::Storage, "export: open " + tmp + ": " + la::archive_error_string(a.get()));
    }
    add_file_entry(a.get(), kManifestName, manifest_file);
    add_file_entry(a.get(), data_name, data_file);
    if (la::archive_write_close(a.get()) != ARCHIVE_OK)
      throw Error(ErrorKind::Storage, std::string("export: ") + la::archive_error_string(a.get()));
  }
  if (::rename(tmp.c_str(), dest.c_str()) != 0) throw_errno(ErrorKind::Storage, "rename " + tmp + " to " + dest);
  tmp_guard.committed = true;
  return dest;
}

// A jail's export carries its upper layer only: the image layers under it come
// from the importing home (the image must be there, or pullable by reference).
std::string LocalRuntime::export_jail(LocalBox& box, const std::string& dest_dir) {
  std::string dest = dest_dir + "/" + (box.name().empty() ? box.id() : box.name()) + ".boxlite";
  make_dirs(layout_.tmp());
  std::string base = layout_.tmp() + "/export-" + random_hex(6);
  if (has_jail_disk(box)) return export_jail_disk(box, dest, base);
  std::string upper = box.dir() + "/upper";
  PathGuard copy_guard;
  if (box_is_running(box)) {
    // A frozen copy (the box's processes are frozen only while it is made).
    copy_guard.path = upper = base + ".upper";
    copy_jail_upper(box, upper);
  } else if (!path_exists(upper)) {
    copy_guard.path = upper = base + ".upper";
    make_dirs(upper);  // never started
  }
  std::string layer = base + ".tar";
  PathGuard layer_guard{layer};
  write_upper_layer(upper, layer, box.spec().jail().uid_offset);
  return write_export(box, dest, kUpperName, layer);
}

// A jail box with a disk: its upper layer is read from the image (a frozen copy of
// a running box's), mounted read-only where nothing but this process reaches it
// (a detached mount: gone, with its loop device, when its fd closes).
std::string LocalRuntime::export_jail_disk(LocalBox& box, const std::string& dest, const std::string& base) {
  std::string image = engine::jail::disk_image_path(box.dir());
  PathGuard copy_guard;
  if (box_is_running(box)) {
    copy_guard.path = image = base + ".ext4";
    copy_jail_disk(box, image);
  }
  UniqueFd disk;
  std::string upper = base + ".upper";  // never started: no disk yet, an empty upper layer
  if (path_exists(image)) {
    disk = engine::jail::mount_disk(image, {.read_only = true});
    upper = "/proc/self/fd/" + std::to_string(disk.get()) + "/" + engine::jail::kDiskUpperDir;
  }
  PathGuard empty_guard;
  if (!path_exists(upper)) {  // its disk made but the box never started
    empty_guard.path = upper = base + ".upper";
    make_dirs(upper);
  }
  std::string layer = base + ".tar";
  PathGuard layer_guard{layer};
  write_upper_layer(upper, layer, box.spec().jail().uid_offset);
  return write_export(box, dest, kUpperName, layer);
}

std::shared_ptr<LocalBox> LocalRuntime::import_box(const std::string& path, const std::string& name, bool detach) {
  validate_new_name(*store(), name);
  ReadArchive a(la::archive_read_new());
  la::archive_read_support_format_tar(a.get());
  if (la::archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK) {
    throw Error(ErrorKind::NotFound, "import: cannot open " + path + ": " + la::archive_error_string(a.get()));
  }
  engine::ShimSpec spec;
  spec.box_id = make_box_id();
  spec.box_dir = layout_.box_dir(spec.box_id);
  PathGuard guard{spec.box_dir};
  if (::mkdir(spec.box_dir.c_str(), 0700) != 0) throw_errno(ErrorKind::Storage, "create box directory " + spec.box_dir);
  std::string disk_path = spec.box_dir + "/" + kDiskName;
  std::string upper_tar = spec.box_dir + "/" + kUpperName;
  nlohmann::json manifest;
  bool have_disk = false, have_upper = false;
  archive_entry* e = nullptr;
  // Only the two regular files an export writes are taken; nothing is written
  // by an archive-supplied name.
  while (la::archive_read_next_header(a.get(), &e) == ARCHIVE_OK) {
    std::string entry = la::archive_entry_pathname(e) ? la::archive_entry_pathname(e) : "";
    if (la::archive_entry_filetype(e) != AE_IFREG)
      throw Error(ErrorKind::InvalidArgument, "import: " + path + ": unexpected entry '" + entry + "'");
    if (entry == kManifestName) {
      if (la::archive_entry_size(e) > (1 << 20))
        throw Error(ErrorKind::InvalidArgument, "import: " + path + ": manifest too large");
      std::string text(static_cast<size_t>(la::archive_entry_size(e)), '\0');
      if (la::archive_read_data(a.get(), text.data(), text.size()) != static_cast<la_ssize_t>(text.size())) {
        throw Error(ErrorKind::InvalidArgument, "import: " + path + ": truncated manifest");
      }
      manifest = parse_export_manifest(text, path);
    } else if ((entry == kDiskName && !have_disk) || (entry == kUpperName && !have_upper)) {
      const std::string& out = entry == kDiskName ? disk_path : upper_tar;
      UniqueFd fd(::open(out.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
      if (!fd) throw_errno(ErrorKind::Storage, "create " + out);
      if (la::archive_read_data_into_fd(a.get(), fd.get()) != ARCHIVE_OK) {
        throw Error(ErrorKind::Storage, "import: " + path + ": " + la::archive_error_string(a.get()));
      }
      (entry == kDiskName ? have_disk : have_upper) = true;
    } else {
      throw Error(ErrorKind::InvalidArgument,
                  "import: " + path + ": unexpected entry '" + entry + "' (not a .boxlite export)");
    }
  }
  if (!manifest.is_object() || have_disk == have_upper) {
    throw Error(ErrorKind::InvalidArgument,
                "import: " + path + " is not a .boxlite export (it needs a manifest and one disk or upper layer)");
  }
  if (manifest["format"] != kExportFormat) {
    throw Error(ErrorKind::InvalidArgument,
                "import: " + path + ": unsupported export format " + manifest["format"].dump());
  }
  engine::ShimSpec exported;
  try {
    exported = engine::spec_from_json(manifest.at("spec").dump());
  } catch (const std::exception& ex) {
    throw Error(ErrorKind::InvalidArgument, "import: " + path + ": invalid box spec: " + ex.what());
  }
  // The archive records the engine: a jail export makes a jail box, a vm one a vm box.
  if (have_upper) {
    if (exported.engine() != EngineKind::Jail)
      throw Error(ErrorKind::InvalidArgument, "import: " + path + ": an upper layer in a " +
                                                  std::string(engine_kind_name(exported.engine())) + " export");
    spec.set_engine(EngineKind::Jail);
    copy_exported_box(spec, exported);
    // The size of the disk it had, from an untrusted manifest: 0 (an export made
    // before jail boxes had disks) gets the default.
    uint64_t disk_bytes = exported.jail().disk_bytes;
    if (disk_bytes % (1ull << 30) != 0 || disk_bytes > (kMaxDiskSizeGb << 30)) {
      throw Error(ErrorKind::InvalidArgument, "import: " + path + ": invalid manifest: the disk size " +
                                                  std::to_string(disk_bytes) + " is not a whole number of GiB up to " +
                                                  std::to_string(kMaxDiskSizeGb));
    }
    spec.jail().disk_bytes = disk_bytes;
    check_upper_layer(upper_tar, path);
    auto box = import_jail(spec, manifest, name, upper_tar, detach);
    guard.committed = true;
    return box;
  }
  // A hostile image could name a host file as its backing file or its external
  // data file, and read it from inside the box (or through a later export), or
  // write it: an export is always one self-contained qcow2. The header is read
  // first, by this process: nothing of an image that names another file is
  // handed to qemu-img.
  check_self_contained_qcow2(disk_path, path);
  RunResult info = run_capture({which("qemu-img"), "info", "--output=json", "-f", "qcow2", disk_path});
  nlohmann::json info_json;
  try {
    info_json = info.ok() ? nlohmann::json::parse(info.out) : nlohmann::json();
  } catch (const nlohmann::json::exception&) {
  }
  const nlohmann::json* qcow2_data = nullptr;
  if (info_json.is_object() && info_json.contains("format-specific") && info_json["format-specific"].is_object() &&
      info_json["format-specific"].contains("data") && info_json["format-specific"]["data"].is_object()) {
    qcow2_data = &info_json["format-specific"]["data"];
  }
  if (!info_json.is_object() || info_json.value("format", "") != "qcow2" || info_json.contains("backing-filename") ||
      info_json.contains("full-backing-filename") || (qcow2_data && qcow2_data->contains("data-file"))) {
    throw Error(ErrorKind::InvalidArgument, "import: " + path + ": the disk is not a self-contained qcow2 image");
  }

  if (exported.engine() != EngineKind::Vm)
    throw Error(ErrorKind::InvalidArgument,
                "import: " + path + ": a disk in a " + std::string(engine_kind_name(exported.engine())) + " export");
  spec.set_engine(EngineKind::Vm);
  BoxOptions machine = copy_exported_box(spec, exported);
  spec.vm().disk = disk_path;
  prepare_vm_machine(spec, machine);
  spec.ephemeral = false;  // an imported box is kept until removed
  engine::write_spec(spec);

  store::BoxRecord r;
  r.id = spec.box_id;
  r.name = name;
  r.image = manifest.value("image", "");
  r.engine = EngineKind::Vm;
  r.state = BoxState::Configured;
  r.created_at_ms = wall_clock_ms();
  r.auto_remove = false;
  r.detach = detach;
  nlohmann::json opts = manifest.value("options", nlohmann::json::object());
  opts.erase("clone_of");
  r.options_json = opts.dump();
  std::vector<std::string> argv = recorded_argv(opts);  // before the row: it may be refused
  store()->insert(r);
  core::keep_record_copy(spec.box_dir, r);  // once the row is committed
  guard.committed = true;
  return track(std::make_shared<LocalBox>(spec, r, std::move(argv), store()));
}

// The image comes from this home: the reference the box was made from (a layout
// directory, or a registry reference, pulled if missing), checked to be made of the
// same layers, so the upper layer lands on what it was written over.
std::shared_ptr<LocalBox> LocalRuntime::import_jail(engine::ShimSpec spec, const nlohmann::json& manifest,
                                                    const std::string& name, const std::string& upper_tar,
                                                    bool detach) {
  std::string ref = manifest.value("image", "");
  if (ref.empty())
    throw Error(ErrorKind::InvalidArgument, "import: the export does not name the image the jail box was made from");
  struct stat st {};
  bool is_layout = ref.rfind("oci:", 0) == 0 || ref[0] == '/' || ::stat(ref.c_str(), &st) == 0;
  std::string recorded = ref;
  image::LocalImage img =
      image::open_oci_layout(is_layout ? image::parse_layout_ref(ref) : resolve_registry_image(ref, recorded));
  prepare_jail(spec, img);
  nlohmann::json want = manifest.value("image_layers", nlohmann::json::array());
  if (layer_ids(spec) != want) {
    throw Error(ErrorKind::Image, "import: image " + ref +
                                      " here is not the one the box was made from (its layers differ): " +
                                      "the box's files would land on another root file system");
  }
  image::OverlayOptions o;
  o.uid_offset = o.gid_offset = spec.jail().uid_offset;
  o.max_bytes = image::max_image_bytes();
  // The box gets a disk of the size it had (the default for an export made before
  // jail boxes had disks), and its upper layer is unpacked onto it: a layer larger
  // than the disk fails here, as it would have in the box.
  engine::JailSpec& jail = spec.jail();
  uint64_t disk_bytes = jail.disk_bytes ? jail.disk_bytes : kDefaultDiskSizeGb << 30;
  jail.disk_bytes = 0;  // unless this host gives it one
  prepare_jail_disk(spec, disk_bytes);
  UniqueFd disk;
  std::string upper = spec.box_dir + "/upper";
  if (jail.disk_bytes > 0) {
    std::string image = engine::jail::disk_image_path(spec.box_dir);
    engine::jail::copy_disk_image(jail.disk_template, image);
    disk = engine::jail::mount_disk(image, {});
    upper = "/proc/self/fd/" + std::to_string(disk.get()) + "/" + engine::jail::kDiskUpperDir;
  }
  if (::mkdir(upper.c_str(), 0755) != 0 || ::chown(upper.c_str(), jail.uid_offset, jail.uid_offset) != 0)
    throw_errno(ErrorKind::Storage, "create the box's upper layer " + upper);
  try {
    image::extract_layer_for_overlay(upper, upper_tar, o);
  } catch (const Error& e) {
    throw Error(e.kind() == ErrorKind::Image ? ErrorKind::InvalidArgument : e.kind(),
                "import: the box's upper layer: " + std::string(e.what()));
  }
  disk.reset();  // unmounted: synced into the image, its loop device released
  ::unlink(upper_tar.c_str());
  engine::write_spec(spec);

  store::BoxRecord r;
  r.id = spec.box_id;
  r.name = name;
  r.image = recorded;
  r.engine = EngineKind::Jail;
  r.state = BoxState::Configured;
  r.created_at_ms = wall_clock_ms();
  r.auto_remove = false;
  r.detach = detach;
  nlohmann::json opts = manifest.value("options", nlohmann::json::object());
  opts.erase("clone_of");
  r.options_json = opts.dump();
  std::vector<std::string> argv = recorded_argv(opts);  // before the row: it may be refused
  store()->insert(r);
  core::keep_record_copy(spec.box_dir, r);  // once the row is committed
  return track(std::make_shared<LocalBox>(spec, r, std::move(argv), store()));
}

}  // namespace boxlite
