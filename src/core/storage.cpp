// Runtime's storage operations: clone, export, import, and the clone
// dependencies a remove checks. docs/storage.md has the design.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/file_lock.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "core/network.hpp"
#include "core/paths.hpp"
#include "core/runtime.hpp"
#include "core/snapshots.hpp"

namespace boxlite {
namespace {

constexpr const char* kManifestName = "boxlite-export.json";
constexpr const char* kDiskName = "disk.qcow2";
constexpr int kExportFormat = 1;

int64_t now_ms_wall() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

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
  void operator()(archive* a) const { archive_write_free(a); }
};
struct ArchiveReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
using WriteArchive = std::unique_ptr<archive, ArchiveWriteDeleter>;
using ReadArchive = std::unique_ptr<archive, ArchiveReadDeleter>;

void check_vm_and_stopped(Box& box, const std::string& what) {
  if (box.spec().engine != "vm") {
    throw Error(ErrorCode::Unsupported, what + " is not supported by the jail engine (its root is a host overlay, not a disk)");
  }
  if (box.state() == BoxState::Running) {
    throw Error(ErrorCode::InvalidState, "Cannot " + what + " box " + box.id() + " while it is running. Stop the box first.");
  }
}

void validate_new_name(store::Store& store, const std::string& name) {
  if (name.empty()) return;
  bool ok = name.size() <= 128 && std::isalnum(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  if (!ok) throw Error(ErrorCode::InvalidArgument, "invalid box name '" + name + "': use [a-zA-Z0-9][a-zA-Z0-9_.-]* (at most 128)");
  if (store.find(name)) throw Error(ErrorCode::AlreadyExists, "box name '" + name + "' is already in use");
}

std::string clone_of(const store::BoxRecord& r) {
  try {
    return nlohmann::json::parse(r.options_json).value("clone_of", std::string());
  } catch (const nlohmann::json::exception&) {
    return "";
  }
}

void add_file_entry(archive* a, const std::string& name, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw_errno(ErrorCode::Storage, "stat " + path);
  std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(), archive_entry_free);
  archive_entry_set_pathname(e.get(), name.c_str());
  archive_entry_set_filetype(e.get(), AE_IFREG);
  archive_entry_set_perm(e.get(), 0600);
  archive_entry_set_size(e.get(), st.st_size);
  if (archive_write_header(a, e.get()) != ARCHIVE_OK) throw Error(ErrorCode::Storage, std::string("export: ") + archive_error_string(a));
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno(ErrorCode::Storage, "open " + path);
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(ErrorCode::Storage, "read " + path);
    if (n == 0) break;
    if (archive_write_data(a, buf.data(), static_cast<size_t>(n)) != n) {
      throw Error(ErrorCode::Storage, std::string("export: ") + archive_error_string(a));
    }
  }
}

// The record of a new box made from `source`'s: created, never started, kept
// until removed (a clone has no owner process), under its own id and name.
store::BoxRecord clone_record(const store::BoxRecord& source, const std::string& id, const std::string& name) {
  store::BoxRecord r = source;
  r.id = id;
  r.name = name;
  r.state = "created";
  r.stop_reason.clear();
  r.created_at_ms = now_ms_wall();
  r.started_at_ms = r.stopped_at_ms = 0;
  r.shim_pid = 0;
  r.main_exit_code.reset();
  r.auto_remove = false;
  r.detach = false;
  r.timings_json = "{}";
  return r;
}

// The main command a record was created with ("sh" when it is unreadable).
std::vector<std::string> recorded_argv(const nlohmann::json& options) {
  return options.is_object() ? options.value("argv", std::vector<std::string>{"sh"}) : std::vector<std::string>{"sh"};
}

}  // namespace

std::shared_ptr<Box> Runtime::clone_box(Box& source, const std::string& name) {
  validate_new_name(*store_, name);
  FileLock lock = FileLock::acquire(source.dir() + "/box.lock");
  if (source.spec().engine == "jail") return clone_jail(source, name);
  check_vm_and_stopped(source, "clone");
  auto rec = store_->find(source.id());
  if (!rec) throw Error(ErrorCode::NotFound, "No such box: " + source.id());

  engine::ShimSpec spec = source.spec();
  spec.ephemeral = false;  // a clone is kept until removed (auto_remove off)
  spec.box_id = make_box_id();
  spec.box_dir = layout_.box_dir(spec.box_id);
  spec.hostname = spec.box_id;
  spec.disk = spec.box_dir + "/" + kDiskName;
  PathGuard guard{spec.box_dir};
  if (::mkdir(spec.box_dir.c_str(), 0700) != 0) throw_errno(ErrorCode::Storage, "create box directory " + spec.box_dir);
  // The source's disk as it is now becomes a frozen layer both disks grow over:
  // O(1) whatever the disk holds, and neither box sees the other's writes.
  make_dirs(source.dir() + "/snapshots", 0700);
  std::string frozen = source.dir() + "/snapshots/clone-" + spec.box_id + ".qcow2";
  disk::freeze_top(source.dir(), frozen);
  disk::create_overlay_on(frozen, "qcow2", spec.disk);
  write_file_atomic(spec.box_dir + "/shim.json", engine::spec_to_json(spec), 0600);

  store::BoxRecord r = clone_record(*rec, spec.box_id, name);
  nlohmann::json opts = nlohmann::json::object();
  try {
    opts = nlohmann::json::parse(rec->options_json);
  } catch (const nlohmann::json::exception&) {
  }
  opts["clone_of"] = source.id();
  r.options_json = opts.dump();
  store_->insert(r);
  guard.committed = true;
  return track(std::make_shared<Box>(spec, r, recorded_argv(opts), store_));
}

// A jail's clone copies the source's upper layer (O(data)) over the same image
// layers: fully independent, so the source keeps no clone dependency.
std::shared_ptr<Box> Runtime::clone_jail(Box& source, const std::string& name) {
  if (source.state() == BoxState::Running) {
    throw Error(ErrorCode::InvalidState, "Cannot clone box " + source.id() + " while it is running. Stop the box first.");
  }
  auto rec = store_->find(source.id());
  if (!rec) throw Error(ErrorCode::NotFound, "No such box: " + source.id());
  engine::ShimSpec spec = source.spec();
  spec.ephemeral = false;  // a clone is kept until removed (auto_remove off)
  spec.box_id = make_box_id();
  spec.box_dir = layout_.box_dir(spec.box_id);
  spec.hostname = spec.box_id;
  PathGuard guard{spec.box_dir};
  if (::mkdir(spec.box_dir.c_str(), 0700) != 0) throw_errno(ErrorCode::Storage, "create box directory " + spec.box_dir);
  if (path_exists(source.dir() + "/upper")) disk::copy_tree(source.dir() + "/upper", spec.box_dir + "/upper");
  write_file_atomic(spec.box_dir + "/shim.json", engine::spec_to_json(spec), 0600);
  store::BoxRecord r = clone_record(*rec, spec.box_id, name);
  store_->insert(r);
  guard.committed = true;
  nlohmann::json opts;
  try {
    opts = nlohmann::json::parse(rec->options_json);
  } catch (const nlohmann::json::exception&) {
  }
  return track(std::make_shared<Box>(spec, r, recorded_argv(opts), store_));
}

void Runtime::release_clones(const std::string& id, bool force) {
  std::vector<store::BoxRecord> clones;
  for (const auto& r : store_->list()) {
    if (clone_of(r) == id) clones.push_back(r);
  }
  if (clones.empty()) return;
  if (!force) {
    std::string ids;
    for (const auto& c : clones) ids += (ids.empty() ? "" : ", ") + c.id;
    throw Error(ErrorCode::InvalidState, "Cannot remove box: boxes [" + ids + "] have clone dependencies on it. Remove them first, or use force=true "
                                         "(which copies the data they share into each clone)");
  }
  for (const auto& c : clones) {
    // qemu-img must not rewrite a disk QEMU has open.
    if (c.state == "running" && process_alive(c.shim_pid)) {
      throw Error(ErrorCode::InvalidState, "Cannot remove box: its clone " + c.id + " is running; stop it first");
    }
  }
  for (const auto& c : clones) {
    engine::ShimSpec spec = engine::spec_from_json(read_file(layout_.box_dir(c.id) + "/shim.json"));
    FileLock lock = FileLock::acquire(spec.box_dir + "/box.lock");
    // Safe-mode rebase onto the image's base: the clone keeps every byte it sees,
    // and nothing of it lives in the source's directory any more.
    disk::rebase(spec.disk, spec.disk_base, "raw");
  }
}

std::string Runtime::export_box(Box& box, const std::string& dest_dir) {
  struct stat st {};
  if (dest_dir.empty() || ::stat(dest_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error(ErrorCode::InvalidArgument, "export destination '" + dest_dir + "' is not an existing directory");
  }
  FileLock lock = FileLock::acquire(box.dir() + "/box.lock");
  check_vm_and_stopped(box, "export");
  std::string dest = dest_dir + "/" + (box.name().empty() ? box.id() : box.name()) + ".boxlite";
  make_dirs(layout_.tmp());
  std::string flat = layout_.tmp() + "/export-" + random_hex(6) + ".qcow2";
  PathGuard flat_guard{flat};
  disk::flatten(box.dir() + "/" + kDiskName, flat);

  engine::ShimSpec spec = box.spec();
  spec.net.secrets.clear();  // secret values never leave the machine
  spec.volumes.clear();      // host paths mean nothing elsewhere
  auto rec = store_->find(box.id());
  nlohmann::json manifest = {{"format", kExportFormat},
                             {"box_id", box.id()},
                             {"name", box.name()},
                             {"image", rec ? rec->image : ""},
                             {"options", rec ? nlohmann::json::parse(rec->options_json) : nlohmann::json::object()},
                             {"spec", nlohmann::json::parse(engine::spec_to_json(spec))}};
  std::string manifest_file = flat + ".json";
  PathGuard manifest_guard{manifest_file};
  write_file_atomic(manifest_file, manifest.dump(2), 0600);

  std::string tmp = dest + ".tmp-" + random_hex(4);
  PathGuard tmp_guard{tmp};
  {
    WriteArchive a(archive_write_new());
    archive_write_set_format_pax_restricted(a.get());
    if (archive_write_open_filename(a.get(), tmp.c_str()) != ARCHIVE_OK) {
      throw Error(ErrorCode::Storage, "export: open " + tmp + ": " + archive_error_string(a.get()));
    }
    add_file_entry(a.get(), kManifestName, manifest_file);
    add_file_entry(a.get(), kDiskName, flat);
    if (archive_write_close(a.get()) != ARCHIVE_OK) throw Error(ErrorCode::Storage, std::string("export: ") + archive_error_string(a.get()));
  }
  if (::rename(tmp.c_str(), dest.c_str()) != 0) throw_errno(ErrorCode::Storage, "rename " + tmp + " to " + dest);
  tmp_guard.committed = true;
  return dest;
}

std::shared_ptr<Box> Runtime::import_box(const std::string& path, const std::string& name) {
  validate_new_name(*store_, name);
  ReadArchive a(archive_read_new());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK) {
    throw Error(ErrorCode::NotFound, "import: cannot open " + path + ": " + archive_error_string(a.get()));
  }
  engine::ShimSpec spec;
  spec.box_id = make_box_id();
  spec.box_dir = layout_.box_dir(spec.box_id);
  PathGuard guard{spec.box_dir};
  if (::mkdir(spec.box_dir.c_str(), 0700) != 0) throw_errno(ErrorCode::Storage, "create box directory " + spec.box_dir);
  std::string disk_path = spec.box_dir + "/" + kDiskName;
  nlohmann::json manifest;
  bool have_disk = false;
  archive_entry* e = nullptr;
  // Only the two regular files an export writes are taken; nothing is written
  // by an archive-supplied name.
  while (archive_read_next_header(a.get(), &e) == ARCHIVE_OK) {
    std::string entry = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    if (archive_entry_filetype(e) != AE_IFREG) throw Error(ErrorCode::InvalidArgument, "import: " + path + ": unexpected entry '" + entry + "'");
    if (entry == kManifestName) {
      if (archive_entry_size(e) > (1 << 20)) throw Error(ErrorCode::InvalidArgument, "import: " + path + ": manifest too large");
      std::string text(static_cast<size_t>(archive_entry_size(e)), '\0');
      if (archive_read_data(a.get(), text.data(), text.size()) != static_cast<la_ssize_t>(text.size())) {
        throw Error(ErrorCode::InvalidArgument, "import: " + path + ": truncated manifest");
      }
      try {
        manifest = nlohmann::json::parse(text);
      } catch (const nlohmann::json::exception& ex) {
        throw Error(ErrorCode::InvalidArgument, "import: " + path + ": invalid manifest: " + ex.what());
      }
    } else if (entry == kDiskName) {
      UniqueFd fd(::open(disk_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
      if (!fd) throw_errno(ErrorCode::Storage, "create " + disk_path);
      if (archive_read_data_into_fd(a.get(), fd.get()) != ARCHIVE_OK) {
        throw Error(ErrorCode::Storage, "import: " + path + ": " + archive_error_string(a.get()));
      }
      have_disk = true;
    } else {
      throw Error(ErrorCode::InvalidArgument, "import: " + path + ": unexpected entry '" + entry + "' (not a .boxlite export)");
    }
  }
  if (!manifest.is_object() || !have_disk) throw Error(ErrorCode::InvalidArgument, "import: " + path + " is not a .boxlite export (missing manifest or disk)");
  if (manifest.value("format", 0) != kExportFormat) {
    throw Error(ErrorCode::InvalidArgument, "import: " + path + ": unsupported export format " + manifest.value("format", nlohmann::json(0)).dump());
  }
  // A hostile image could name a host file as its backing file and read it from
  // inside the box: an export is always one self-contained qcow2.
  RunResult info = run_capture({which("qemu-img"), "info", "--output=json", "-f", "qcow2", disk_path});
  nlohmann::json info_json;
  try {
    info_json = info.ok() ? nlohmann::json::parse(info.out) : nlohmann::json();
  } catch (const nlohmann::json::exception&) {
  }
  if (!info_json.is_object() || info_json.value("format", "") != "qcow2" || info_json.contains("backing-filename") ||
      info_json.contains("full-backing-filename")) {
    throw Error(ErrorCode::InvalidArgument, "import: " + path + ": the disk is not a self-contained qcow2 image");
  }

  engine::ShimSpec exported;
  try {
    exported = engine::spec_from_json(manifest.at("spec").dump());
  } catch (const std::exception& ex) {
    throw Error(ErrorCode::InvalidArgument, "import: " + path + ": invalid box spec: " + ex.what());
  }
  if (exported.engine != "vm") throw Error(ErrorCode::InvalidArgument, "import: " + path + ": not a vm box");
  // What the box is comes from the export; how this machine runs it, from here.
  spec.engine = "vm";
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
  spec.guest_binary = core::libexec_dir() + "/boxlite-guest";
  spec.disk = disk_path;
  BoxOptions machine;
  machine.network.mode = exported.net.enabled ? "enabled" : "disabled";
  machine.network.allow_net = exported.net.allow_net;
  spec.net = make_net_config(machine);
  prepare_vm_machine(spec, machine);
  spec.ephemeral = false;  // an imported box is kept until removed
  write_file_atomic(spec.box_dir + "/shim.json", engine::spec_to_json(spec), 0600);

  store::BoxRecord r;
  r.id = spec.box_id;
  r.name = name;
  r.image = manifest.value("image", "");
  r.engine = "vm";
  r.state = "created";
  r.created_at_ms = now_ms_wall();
  r.auto_remove = false;
  nlohmann::json opts = manifest.value("options", nlohmann::json::object());
  opts.erase("clone_of");
  r.options_json = opts.dump();
  store_->insert(r);
  guard.committed = true;
  return track(std::make_shared<Box>(spec, r, recorded_argv(opts), store_));
}

}  // namespace boxlite
