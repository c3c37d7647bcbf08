#include "core/snapshots.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "boxlite/execution.hpp"
#include "common/error.hpp"
#include "common/file_lock.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "core/box.hpp"
#include "core/client.hpp"
#include "engine/jail/disk.hpp"
#include "engine/jail/jail.hpp"
#include "engine/spec.hpp"
#include "engine/vm/qmp.hpp"

namespace boxlite {
namespace disk {
namespace {

RunResult qemu_img(std::vector<std::string> args, const std::string& what) {
  std::string tool = which("qemu-img");
  if (tool.empty()) throw Error(ErrorKind::Engine, "qemu-img not found: install it with `apt-get install qemu-utils`");
  args.insert(args.begin(), tool);
  RunResult r;
  try {
    r = run_capture(args);
  } catch (const Error& e) {
    throw Error(ErrorKind::Storage, what + ": cannot run qemu-img: " + e.what());
  }
  if (!r.ok())
    throw Error(ErrorKind::Storage,
                what + ": qemu-img " + describe_status(r.status) + ": " + trim(r.err.empty() ? r.out : r.err));
  return r;
}

}  // namespace

void create_overlay_on(const std::string& backing, const std::string& backing_format, const std::string& path,
                       uint64_t virtual_size) {
  std::string tmp = path + ".tmp-" + random_hex(4);
  try {
    std::vector<std::string> args = {"create", "-q", "-f", "qcow2", "-F", backing_format, "-b", backing};
    if (virtual_size > 0) args.push_back("-u");
    args.push_back(tmp);
    if (virtual_size > 0) args.push_back(std::to_string(virtual_size));
    qemu_img(args, "create " + path + " over " + backing);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw_errno(ErrorKind::Storage, "rename " + tmp + " to " + path, err);
  }
}

uint64_t virtual_size(const std::string& path) {
  std::string tool = which("qemu-img");
  RunResult r = run_capture({tool, "info", "-U", "--output=json", path});
  try {
    return r.ok() ? nlohmann::json::parse(r.out).value("virtual-size", uint64_t{0}) : 0;
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
}

std::vector<std::string> backing_chain(const std::string& path) {
  RunResult r = qemu_img({"info", "-U", "--backing-chain", "--output=json", path}, "read the backing chain of " + path);
  std::vector<std::string> out;
  try {
    for (const auto& layer : nlohmann::json::parse(r.out)) out.push_back(layer.at("filename").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Storage, "unexpected qemu-img info output for " + path + ": " + e.what());
  }
  return out;
}

void freeze_top(const std::string& box_dir, const std::string& frozen) {
  std::string top = box_dir + "/disk.qcow2";
  if (::rename(top.c_str(), frozen.c_str()) != 0) throw_errno(ErrorKind::Storage, "freeze " + top + " as " + frozen);
  try {
    create_overlay_on(frozen, "qcow2", top);
  } catch (...) {
    (void)!::rename(frozen.c_str(), top.c_str());
    throw;
  }
  ::chmod(frozen.c_str(), 0400);  // frozen layers never change again
}

namespace {

// The file of a node's description as query-block gives it: a path, or once the
// node was given its backing explicitly (a live freeze's new top) "json:{...}" with
// the path as file.filename.
std::string node_file(const std::string& described) {
  if (described.rfind("json:", 0) != 0) return described;
  try {
    auto j = nlohmann::json::parse(described.substr(5));
    return j.at("file").at("filename").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return described;
  }
}

// The file name QEMU knows the box's current top by (query-block): disk.qcow2 as it
// booted, or the one-time name the last live freeze gave the new top (disk.qcow2.<hex>,
// renamed to disk.qcow2 since). Only those two are believed: the VM's QEMU is not.
std::string qemu_top_name(engine::vm::Qmp& qmp, const std::string& top) {
  nlohmann::json blocks = qmp.execute("query-block");
  std::string name;
  for (const auto& b : blocks.is_array() ? blocks : nlohmann::json::array()) {
    if (b.value("device", "") == "root" && b.contains("inserted")) name = node_file(b["inserted"].value("file", ""));
  }
  std::string suffix = name.size() > top.size() + 1 && name.compare(0, top.size() + 1, top + ".") == 0
                           ? name.substr(top.size() + 1)
                           : "";
  bool one_time = !suffix.empty() && std::all_of(suffix.begin(), suffix.end(),
                                                 [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  if (name != top && !one_time) {
    throw Error(ErrorKind::Engine, "the box's QEMU names its disk '" + name + "', not " + top +
                                       " or a name a freeze gave it: restart the box");
  }
  return name;
}

// A name for `top` that lasts while it is in scope: the name QEMU knows it by, which
// its read-only reopen at the switch goes by.
struct TemporaryName {
  std::string path;
  bool made = false;
  TemporaryName(const std::string& top, const std::string& name) : path(name) {
    if (name == top) return;
    ::unlink(name.c_str());  // one left by a freeze cut short: ours, never in use
    if (::link(top.c_str(), name.c_str()) != 0) throw_errno(ErrorKind::Storage, "link " + top + " as " + name);
    made = true;
  }
  ~TemporaryName() {
    if (made) ::unlink(path.c_str());
  }
  TemporaryName(const TemporaryName&) = delete;
  TemporaryName& operator=(const TemporaryName&) = delete;
};

}  // namespace

void freeze_running_top(const std::string& box_dir, const std::string& frozen) {
  std::string top = box_dir + "/disk.qcow2";
  uint64_t vsize = virtual_size(top);
  if (vsize == 0) throw Error(ErrorKind::Storage, "cannot read the virtual size of " + top);
  engine::vm::Qmp qmp = engine::vm::Qmp::connect(engine::qmp_socket_path(box_dir));
  // Paused, the guest issues no I/O and QEMU has flushed what it had (vm_stop
  // drains and flushes every drive): the top holds still while it is swapped.
  qmp.execute("stop");
  struct Resume {
    engine::vm::Qmp& q;
    ~Resume() {
      try {
        q.execute("cont");
      } catch (const Error& e) {
        std::fprintf(stderr, "boxlite: warning: could not resume the VM after freezing its disk: %s\n", e.what());
      }
    }
  } resume{qmp};
  // When QEMU puts the old top under the new one it reopens it read-only BY THE NAME
  // IT KNOWS IT BY (file-posix cannot turn an O_RDWR fd into O_RDONLY). That name must
  // be the top then: were it another file the disk would be corrupt at the next boot,
  // and were it gone QEMU would keep the layer read-write, holding the write lock that
  // a clone's QEMU, which opens it as a backing file, cannot share. So no rename before
  // the switch, and the one-time name of the last live freeze is given back for it.
  TemporaryName known(top, qemu_top_name(qmp, top));
  // The frozen layer gets its own name as a hardlink; the new top is made under a
  // name used once, and takes `disk.qcow2` only after the switch.
  if (::link(top.c_str(), frozen.c_str()) != 0) throw_errno(ErrorKind::Storage, "freeze " + top + " as " + frozen);
  std::string next = top + "." + random_hex(6);
  try {
    create_overlay_on(frozen, "qcow2", next, vsize);
    // mode existing: QEMU opens the new top we made and puts its current node
    // under it (it never opens the backing file the new top names).
    qmp.execute("blockdev-snapshot-sync",
                {{"device", "root"}, {"snapshot-file", next}, {"format", "qcow2"}, {"mode", "existing"}});
  } catch (...) {
    ::unlink(next.c_str());
    ::unlink(frozen.c_str());
    throw;
  }
  if (::rename(next.c_str(), top.c_str()) != 0) throw_errno(ErrorKind::Storage, "rename " + next + " to " + top);
  ::chmod(frozen.c_str(), 0400);  // frozen layers never change again
}

void flatten(const std::string& path, const std::string& out) {
  qemu_img({"convert", "-U", "-O", "qcow2", path, out}, "flatten " + path);
}

void copy_tree(const std::string& from, const std::string& to) {
  std::string tmp = to + ".tmp-" + random_hex(4);
  std::string cp = which("cp");
  if (cp.empty()) cp = "/bin/cp";
  RunResult r;
  try {
    // GNU cp -a keeps owners, modes, xattrs (overlay opaque markers), device nodes
    // (overlay whiteouts) and hardlinks; reflinks where the filesystem can.
    r = run_capture({cp, "-a", "--reflink=auto", "--", from, tmp});
  } catch (const Error& e) {
    throw Error(ErrorKind::Storage, "copy " + from + ": " + e.what());
  }
  if (!r.ok()) {
    try {
      remove_tree(tmp);
    } catch (...) {
    }
    throw Error(ErrorKind::Storage,
                "copy " + from + " to " + to + ": cp " + describe_status(r.status) + ": " + brief_tool_error(r.err));
  }
  if (::rename(tmp.c_str(), to.c_str()) != 0) throw_errno(ErrorKind::Storage, "rename " + tmp + " to " + to);
}

void rebase(const std::string& path, const std::string& new_base, const std::string& base_format) {
  std::vector<std::string> args = {"rebase", "-q", "-f", "qcow2", "-b", new_base};
  if (!new_base.empty()) args.insert(args.end(), {"-F", base_format});
  args.push_back(path);
  qemu_img(args, "make " + path + " independent");
}

}  // namespace disk

namespace {

std::vector<std::string> dir_entries(const std::string& path) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(path, ec)) out.push_back(e.path().filename().string());
  return out;
}

std::string snapshots_dir(const LocalBox& b) { return b.dir() + "/snapshots"; }
std::string index_path(const LocalBox& b) { return snapshots_dir(b) + "/index.json"; }

nlohmann::json load_index(const LocalBox& b) {
  if (!path_exists(index_path(b))) return nlohmann::json::array();
  try {
    return nlohmann::json::parse(read_file(index_path(b)));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Storage, "unreadable snapshot index " + index_path(b) + ": " + e.what());
  }
}

uint64_t tree_bytes(const std::string& root);
// A jail box with a disk: a copy of its image (sparse; O(data) unless the file
// system makes reflinks): <box>/snapshots/<id>.ext4.
std::string jail_disk_snapshot(const LocalBox& b, const std::string& id) {
  return snapshots_dir(b) + "/" + id + ".ext4";
}

SnapshotInfo info_of(const LocalBox& b, const nlohmann::json& j) {
  SnapshotInfo s;
  s.id = j.at("id");
  s.box_id = b.id();
  s.name = j.at("name");
  s.created_at = j.at("created_at");
  s.container_disk_bytes = j.at("container_disk_bytes");
  struct stat st {};
  if (has_jail_disk(b)) {
    if (::stat(jail_disk_snapshot(b, s.id).c_str(), &st) == 0) s.size_bytes = static_cast<uint64_t>(st.st_blocks) * 512;
  } else if (b.spec().engine() == EngineKind::Jail) {
    s.size_bytes = tree_bytes(snapshots_dir(b) + "/" + s.id + ".upper");
  } else if (::stat((snapshots_dir(b) + "/" + s.id + ".qcow2").c_str(), &st) == 0) {
    s.size_bytes = static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return s;
}

void validate_snapshot_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 128 && std::isalnum(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  if (!ok)
    throw Error(ErrorKind::InvalidArgument,
                "invalid snapshot name '" + name + "': use [a-zA-Z0-9][a-zA-Z0-9_.-]* (at most 128)");
}

// The lock that keeps a start (in any process) out while the disk changes.
FileLock lock_box_dir(LocalBox& b) { return core::lock_box_directory(b.dir()); }

bool is_jail(const LocalBox& b) { return b.spec().engine() == EngineKind::Jail; }

// A jail's snapshot is a copy of its overlay's upper directory (O(data), unlike
// the vm's O(1) chain): <box>/snapshots/<id>.upper.
std::string jail_snapshot(const LocalBox& b, const std::string& id) { return snapshots_dir(b) + "/" + id + ".upper"; }

uint64_t tree_bytes(const std::string& root) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

}  // namespace

SnapshotInfo SnapshotHandle::create(const std::string& name) {
  validate_snapshot_name(name);
  FileLock lock = lock_box_dir(local(box_));
  auto index = load_index(local(box_));
  for (const auto& s : index) {
    if (s.at("name") == name)
      throw Error(ErrorKind::AlreadyExists, "snapshot '" + name + "' already exists on box " + local(box_).id());
  }
  make_dirs(snapshots_dir(local(box_)), 0700);
  std::string id = random_hex(8);
  uint64_t vsize = 0;
  if (has_jail_disk(local(box_))) {
    copy_jail_disk(local(box_), jail_disk_snapshot(local(box_), id));
    vsize = local(box_).spec().jail().disk_bytes;
  } else if (is_jail(local(box_))) {
    copy_jail_upper(local(box_), jail_snapshot(local(box_), id));
    vsize = tree_bytes(jail_snapshot(local(box_), id));
  } else {
    std::string frozen = snapshots_dir(local(box_)) + "/" + id + ".qcow2";
    vsize = disk::virtual_size(local(box_).dir() + "/disk.qcow2");
    freeze_box_disk(local(box_), frozen);
  }
  nlohmann::json rec = {
      {"id", id},
      {"name", name},
      {"created_at",
       std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()},
      {"container_disk_bytes", vsize}};
  index.push_back(rec);
  write_file_atomic(index_path(local(box_)), index.dump(2), 0600);
  return info_of(local(box_), rec);
}

std::vector<SnapshotInfo> SnapshotHandle::list() {
  std::vector<SnapshotInfo> out;
  for (const auto& s : load_index(local(box_))) out.push_back(info_of(local(box_), s));
  return out;
}

std::optional<SnapshotInfo> SnapshotHandle::get(const std::string& name) {
  for (auto& s : list()) {
    if (s.name == name) return s;
  }
  return std::nullopt;
}

void SnapshotHandle::remove(const std::string& name) {
  FileLock lock = lock_box_dir(local(box_));
  auto index = load_index(local(box_));
  auto it = std::find_if(index.begin(), index.end(), [&](const auto& s) { return s.at("name") == name; });
  if (it == index.end())
    throw Error(ErrorKind::NotFound, "snapshot '" + name + "' not found on box " + local(box_).id());
  if (has_jail_disk(local(box_))) {  // a full copy: nothing depends on it
    std::string file = jail_disk_snapshot(local(box_), it->at("id").get<std::string>());
    index.erase(it);
    write_file_atomic(index_path(local(box_)), index.dump(2), 0600);
    ::unlink(file.c_str());
    return;
  }
  if (is_jail(local(box_))) {  // a full copy: nothing depends on it
    std::string dir = jail_snapshot(local(box_), it->at("id").get<std::string>());
    index.erase(it);
    write_file_atomic(index_path(local(box_)), index.dump(2), 0600);
    remove_tree(dir);
    return;
  }
  std::string file = snapshots_dir(local(box_)) + "/" + it->at("id").get<std::string>() + ".qcow2";
  auto depends = [&](const std::string& top) {
    auto chain = disk::backing_chain(top);
    return std::find(chain.begin() + 1, chain.end(), file) != chain.end();
  };
  if (depends(local(box_).dir() + "/disk.qcow2")) {
    throw Error(ErrorKind::InvalidState, "Cannot remove snapshot: current disk depends on this snapshot ('" + name +
                                             "'). Restore a snapshot taken before it first.");
  }
  // Later snapshots and the frozen layers under clones live beside it.
  for (const auto& entry : dir_entries(snapshots_dir(local(box_)))) {
    std::string other = snapshots_dir(local(box_)) + "/" + entry;
    if (other == file || !entry.ends_with(".qcow2")) continue;
    if (depends(other)) {
      throw Error(ErrorKind::InvalidState,
                  "Cannot remove snapshot: " +
                      std::string(entry.rfind(engine::kCloneBackingPrefix, 0) == 0 ? "a clone of this box"
                                                                                   : "a later snapshot") +
                      " depends on this snapshot ('" + name + "')");
    }
  }
  index.erase(it);
  write_file_atomic(index_path(local(box_)), index.dump(2), 0600);
  ::unlink(file.c_str());
}

void SnapshotHandle::restore(const std::string& name) {
  FileLock lock = lock_box_dir(local(box_));
  if (box_is_running(local(box_))) {
    throw Error(ErrorKind::InvalidState, "Cannot restore snapshot while box is running. Stop the box first.");
  }
  auto s = get(name);
  if (!s) throw Error(ErrorKind::NotFound, "snapshot '" + name + "' not found on box " + local(box_).id());
  if (has_jail_disk(local(box_))) {
    // The copy takes the disk's name only once it is whole (a rename).
    engine::jail::copy_disk_image(jail_disk_snapshot(local(box_), s->id),
                                  engine::jail::disk_image_path(local(box_).dir()));
    return;
  }
  if (is_jail(local(box_))) {
    // The copy is made first; only then does the old upper layer go.
    std::string upper = local(box_).dir() + "/upper", fresh = local(box_).dir() + "/upper.restore";
    if (path_exists(fresh)) remove_tree(fresh);
    disk::copy_tree(jail_snapshot(local(box_), s->id), fresh);
    if (path_exists(upper)) remove_tree(upper);
    if (::rename(fresh.c_str(), upper.c_str()) != 0)
      throw_errno(ErrorKind::Storage, "rename " + fresh + " to " + upper);
    return;
  }
  // The new top is made before the old one goes: a failure leaves the box as it was.
  disk::create_overlay_on(snapshots_dir(local(box_)) + "/" + s->id + ".qcow2", "qcow2",
                          local(box_).dir() + "/disk.qcow2");
}

namespace {

// A connection to the box's shim, or null when none answers (not running).
std::shared_ptr<core::ShimClient> running_shim(const LocalBox& b) {
  try {
    return core::ShimClient::connect(engine::shim_socket_path(b.dir()), b.id());
  } catch (const Error&) {
    return nullptr;
  }
}

// Has the agent sync(2) so the box's own page cache reaches the disk; best effort.
void sync_guest(const std::shared_ptr<core::ShimClient>& shim, const std::string& box_id) {
  proto::ExecRequest req;
  req.add_argv("/.boxlite/builtin/sync");
  req.set_builtin("sync");
  try {
    Execution e(shim, shim->start_exec(req));
    ExecResult r = e.wait();
    if (r.exit_code == 0) return;
    std::fprintf(stderr, "boxlite: warning: box %s: sync before freezing its disk exited %d\n", box_id.c_str(),
                 r.exit_code);
  } catch (const Error& e) {
    std::fprintf(stderr, "boxlite: warning: box %s: could not sync its file systems before freezing its disk: %s\n",
                 box_id.c_str(), e.what());
  }
}

}  // namespace

bool box_is_running(const LocalBox& b) {
  auto shim = running_shim(b);
  if (shim) shim->close();
  return shim != nullptr;
}

void freeze_box_disk(LocalBox& b, const std::string& frozen) {
  auto shim = running_shim(b);
  if (!shim) {
    disk::freeze_top(b.dir(), frozen);
    return;
  }
  sync_guest(shim, b.id());
  shim->close();
  disk::freeze_running_top(b.dir(), frozen);
}

namespace {

// Runs `copy` with the running jail box's processes frozen (the cgroup freezer),
// thawed whatever happens.
template <class Copy>
void with_jail_frozen(const LocalBox& b, Copy&& copy) {
  engine::jail::freeze(b.id());
  struct Thaw {
    std::string id;
    ~Thaw() {
      try {
        engine::jail::thaw(id);
      } catch (const Error& e) {
        std::fprintf(stderr, "boxlite: warning: box %s: could not thaw its processes: %s\n", id.c_str(), e.what());
      }
    }
  } thaw{b.id()};
  copy();
}

}  // namespace

void copy_jail_upper(LocalBox& b, const std::string& to) {
  std::string upper = b.dir() + "/upper";
  if (!path_exists(upper)) make_dirs(upper);  // never started: an empty upper layer
  if (!box_is_running(b)) {
    disk::copy_tree(upper, to);
    return;
  }
  // Frozen, the box's processes change nothing in the upper layer while it is
  // copied (their writes go through the host's page cache, which cp reads).
  with_jail_frozen(b, [&] { disk::copy_tree(upper, to); });
}

bool has_jail_disk(const LocalBox& b) {
  const auto* jail = b.spec().if_jail();
  return jail && jail->disk_bytes > 0;
}

void copy_jail_disk(LocalBox& b, const std::string& to) {
  std::string image = engine::jail::disk_image_path(b.dir());
  pid_t shim = unix_listener_pid(engine::shim_socket_path(b.dir()));
  if (shim <= 0) {  // stopped: the image is all there is (never started: an empty disk, the template)
    const std::string& tmpl = b.spec().jail().disk_template;
    if (!path_exists(image)) {
      engine::jail::ensure_disk_template(tmpl.substr(0, tmpl.rfind('/')), b.spec().jail().disk_bytes);
      image = tmpl;
    }
    engine::jail::copy_disk_image(image, to);
    return;
  }
  // Frozen, the box writes nothing; what it wrote is still in its disk's page
  // cache, in the shim's mount namespace, until synced into the image we copy.
  with_jail_frozen(b, [&] {
    engine::jail::sync_running_disk(shim, b.spec().jail().disk_mountpoint);
    engine::jail::copy_disk_image(image, to);
  });
}

}  // namespace boxlite
