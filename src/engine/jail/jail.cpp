#include "engine/jail/jail.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <thread>

#include "common/error.hpp"
#include "common/etc_files.hpp"
#include "common/in_root.hpp"
#include "common/io.hpp"
#include "common/trace.hpp"
#include "engine/jail/disk.hpp"
#include "engine/jail/seccomp.hpp"

namespace boxlite::engine::jail {
namespace {

// ---- host side ---------------------------------------------------------------

void write_proc(const std::string& path, const std::string& value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) throw_errno(ErrorKind::Engine, "open " + path);
  if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    throw_errno(ErrorKind::Engine, "write " + path);
  }
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The directories the box's init mounts over (/dev, /proc, /sys, /tmp), as an
// overlay layer above the image's, made once beside the image layers and shared by
// every box: an image without them (scratch-based, like the busybox test image)
// would otherwise have them made in each box's upper layer, and every block a box
// allocates there is freed at its removal (~0.1 ms each where the host file system
// discards synchronously). Being above the image, they also hide whatever an image
// has at those names (a symlink to a host path, a file), which is mounted over anyway.
// A box with a network also gets /etc/hosts and /etc/resolv.conf there, empty, which
// the shim binds its files onto (bind_etc_files).
std::string mountpoint_layer(const std::string& parent, unsigned uid_offset, bool with_etc) {
  std::string final_path =
      parent + (with_etc ? "/boxlite-mountpoints-etc-" : "/boxlite-mountpoints-") + std::to_string(uid_offset);
  if (path_exists(final_path)) return final_path;  // complete: it only appears by rename
  std::string tmp = final_path + ".tmp-" + std::to_string(::getpid());
  remove_tree(tmp);  // a crashed shim's of the same pid
  // chmod: the caller's umask (077, say) must not shape a layer every box shares.
  // Owned by the box's root, as the image's files are in the layer cache.
  auto own = [&](const std::string& path, mode_t mode) {
    if (::chmod(path.c_str(), mode) != 0 || ::chown(path.c_str(), uid_offset, uid_offset) != 0)
      throw_errno(ErrorKind::Engine, "chmod/chown " + path);
  };
  for (const char* sub : {"", "/dev", "/proc", "/sys", "/tmp", "/etc"}) {
    if (!with_etc && std::string_view(sub) == "/etc") continue;
    std::string d = tmp + sub;
    if (::mkdir(d.c_str(), 0755) != 0) throw_errno(ErrorKind::Engine, "mkdir " + d);
    own(d, 0755);
  }
  for (const char* file : {"/etc/hosts", "/etc/resolv.conf"}) {
    if (!with_etc) break;
    std::string f = tmp + file;
    UniqueFd fd(::open(f.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd) throw_errno(ErrorKind::Engine, "create " + f);
    own(f, 0644);
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    int err = errno;
    remove_tree(tmp);
    if (err != EEXIST && err != ENOTEMPTY) throw_errno(ErrorKind::Engine, "rename " + tmp + " to " + final_path, err);
  }
  return final_path;
}

// The layer holding the image's entry at `path` (relative to the root): the top
// one that has it, the entry in `st`; "" if none has it (a whiteout: none below).
std::string layer_showing(const ShimSpec& spec, const std::string& path, struct stat& st) {
  for (auto it = spec.jail().lower_dirs.rbegin(); it != spec.jail().lower_dirs.rend(); ++it) {
    if (::lstat((*it + "/" + path).c_str(), &st) == 0) return S_ISCHR(st.st_mode) && st.st_rdev == 0 ? "" : *it;
    if (errno != ENOENT) return "";
  }
  return "";
}

// Whether the shared layer with /etc (mountpoint_layer) may stand above the image's
// /etc. Overlay shows the top layer's directory there, hiding the image's: right
// where the image has none, a file, a dangling link, or a directory of the box's
// root with mode 0755 (nearly every image; the same then). Not where the image's
// /etc is another directory (another owner or mode) or a link to one (into /usr,
// say): that then shows as it is, and its hosts and resolv.conf are bound over or
// written by the agent (bind_etc_files). A link is followed one step, inside the
// image's layers: a guess only chooses which of two confined views the box gets.
bool etc_layer_fits_image(const ShimSpec& spec) {
  struct stat st {};
  std::string layer = layer_showing(spec, "etc", st);
  if (layer.empty()) return true;
  if (S_ISDIR(st.st_mode)) {
    return st.st_uid == spec.jail().uid_offset && st.st_gid == spec.jail().uid_offset && (st.st_mode & 07777) == 0755;
  }
  if (!S_ISLNK(st.st_mode)) return true;
  char target[4096];
  ssize_t n = ::readlink((layer + "/etc").c_str(), target, sizeof target - 1);
  if (n < 0) return true;
  std::string to(target, static_cast<size_t>(n));
  while (!to.empty() && to.front() == '/') to.erase(0, 1);
  struct stat dir {};
  return !to.empty() && (layer_showing(spec, to, dir).empty() || !S_ISDIR(dir.st_mode));
}

// The box's root owns its upper layer, so "/" inside is root's, and its mode is
// 0755 whatever the caller's umask (077 would shut every other user out of "/").
// They may be there already: a box started before, a clone's or an import's upper/,
// a spare box directory's (core/spare_dirs.hpp).
void make_layer_dirs(const ShimSpec& spec, const std::string& upper, const std::string& work) {
  for (const auto& d : {upper, work}) {
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) throw_errno(ErrorKind::Engine, "mkdir " + d);
    if (::chown(d.c_str(), spec.jail().uid_offset, spec.jail().uid_offset) != 0)
      throw_errno(ErrorKind::Engine, "chown " + d);
    if (::chmod(d.c_str(), 0755) != 0) throw_errno(ErrorKind::Engine, "chmod " + d);
  }
}

// The overlay's upper and work directories: on the box's disk (disk.hpp), or, for a
// box without one, in its directory on the host's file system.
struct WritableLayer {
  std::string upper, work;
  UniqueFd disk;  // the disk's mount, attached to our namespace
};

// The box's disk, mounted: its image, or at its first start a new one (a copy of
// the template), named in its directory only once it is mounted, so that a start
// that failed before leaves none behind.
UniqueFd mount_box_disk(const ShimSpec& spec) {
  DiskMountOptions opts{.read_only = false, .ephemeral = spec.ephemeral};
  std::string image = disk_image_path(spec.box_dir);
  if (path_exists(image)) return mount_disk(image, opts);
  const std::string& tmpl = spec.jail().disk_template;
  if (tmpl.empty()) throw Error(ErrorKind::Engine, "the box's spec names no template for its disk");
  if (!path_exists(tmpl))
    ensure_disk_template(tmpl.substr(0, tmpl.rfind('/')), spec.jail().disk_bytes);  // removed since
  UniqueFd file, disk;
  if (take_warm_disk(tmpl, spec.ephemeral, file, disk)) {
    // Made while the shim waited for its box, in the template's directory: on the
    // box's file system but in an odd home (EXDEV), it is let go.
    if (::linkat(file.get(), "", AT_FDCWD, image.c_str(), AT_EMPTY_PATH) == 0) {
      trace("jail: warm disk taken");
      return disk;
    }
    disk.reset();
  }
  file = new_disk_image(tmpl, spec.box_dir);
  trace("jail: disk made");
  opts.fill_from = tmpl;
  disk = mount_disk(file.get(), image, opts);
  link_disk_image(file.get(), image);
  return disk;
}

WritableLayer writable_layer(const ShimSpec& spec) {
  if (spec.jail().disk_bytes == 0) return {spec.box_dir + "/upper", spec.box_dir + "/work", {}};
  if (spec.jail().disk_mountpoint.empty()) throw Error(ErrorKind::Engine, "the box's spec names no place for its disk");
  UniqueFd disk = mount_box_disk(spec);
  // Attached (before Linux 6.15 an overlay's layers must be on mounts of its
  // namespace) at a name every shim of the home shares, each seeing only its own
  // mount there; the paths below go through the mount itself, not that name.
  const std::string& at = spec.jail().disk_mountpoint;
  if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST) throw_errno(ErrorKind::Engine, "mkdir " + at);
  if (::move_mount(disk.get(), "", AT_FDCWD, at.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    throw_errno(ErrorKind::Engine, "attach the box's disk at " + at);
  std::string top = "/proc/self/fd/" + std::to_string(disk.get()) + "/";
  // The workdir is scratch, and a copy of a running box's disk (a clone, a
  // snapshot) has the volatile marker of an ephemeral box's mount in it, which
  // overlayfs refuses: it goes (on the disk, so no block of the host is freed).
  remove_tree(top + kDiskWorkDir + "/work");
  return {top + kDiskUpperDir, top + kDiskWorkDir, std::move(disk)};
}

void mount_root(const ShimSpec& spec, const std::string& root) {
  WritableLayer layer = writable_layer(spec);
  const std::string &upper = layer.upper, &work = layer.work;
  make_layer_dirs(spec, upper, work);
  if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) throw_errno(ErrorKind::Engine, "mkdir " + root);
  if (spec.jail().lower_dirs.empty()) throw Error(ErrorKind::Engine, "jail: the image has no layers");
  // The options must fit in a page: with the layers in one directory (the layer
  // cache), name them relative to it, which fits ~60 layers instead of ~40.
  std::string parent = spec.jail().lower_dirs.front().substr(0, spec.jail().lower_dirs.front().rfind('/'));
  bool shared_parent = true;
  for (const auto& d : spec.jail().lower_dirs) shared_parent = shared_parent && d.substr(0, d.rfind('/')) == parent;
  std::vector<std::string> lowers;
  std::string mountpoints =
      mountpoint_layer(parent, spec.jail().uid_offset, spec.net.enabled && etc_layer_fits_image(spec));
  lowers.push_back(shared_parent ? mountpoints.substr(mountpoints.rfind('/') + 1) : mountpoints);
  for (auto it = spec.jail().lower_dirs.rbegin(); it != spec.jail().lower_dirs.rend();
       ++it) {  // overlay wants the top first
    lowers.push_back(shared_parent ? it->substr(it->rfind('/') + 1) : *it);
  }
  std::string opts = "lowerdir=" + join(lowers, ":") + ",upperdir=" + upper + ",workdir=" + work;
  // Unmounting an overlay syncs the whole host file system its upper layer is on
  // (milliseconds, more while the host writes): a box removed when it stops needs
  // none of that. Overlay refuses a volatile workdir left by a crash; it is scratch.
  if (spec.ephemeral) {
    remove_tree(work + "/work");
    opts += ",volatile";
  }
  if (opts.size() > 4000) {
    throw Error(ErrorKind::Engine,
                "jail: the image has too many layers (" + std::to_string(lowers.size()) + ") for one overlay mount");
  }
  UniqueFd saved_cwd(::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (shared_parent && ::chdir(parent.c_str()) != 0) throw_errno(ErrorKind::Engine, "chdir " + parent);
  int rc = ::mount("overlay", root.c_str(), "overlay", MS_NOSUID | MS_NODEV, opts.c_str());
  int err = errno;
  if (!saved_cwd || ::fchdir(saved_cwd.get()) != 0) (void)!::chdir("/");
  if (rc != 0) throw_errno(ErrorKind::Engine, "mount overlay root at " + root, err);
}

// ---- volumes -------------------------------------------------------------------

// The id map of a volume's idmapped mount, as uid_map lines: on-disk `owner`
// (the volume directory's owner) is the box's root, other on-disk ids below
// kUidCount are the same box ids, and on-disk root is not mapped unless it owns the
// volume, so a box never creates host-root files in a user's directory.
std::string volume_id_map(unsigned offset, unsigned owner) {
  auto line = [](unsigned disk, unsigned host, unsigned count) {
    return std::to_string(disk) + " " + std::to_string(host) + " " + std::to_string(count) + "\n";
  };
  if (owner == 0) return line(0, offset, kUidCount);
  std::string map = line(owner, offset, 1);
  if (owner >= kUidCount) return map + line(1, offset + 1, kUidCount - 1);
  if (owner > 1) map += line(1, offset + 1, owner - 1);
  if (owner + 1 < kUidCount) map += line(owner + 1, offset + owner + 1, kUidCount - owner - 1);
  return map;
}

// Held in its namespace until killed, and killed with its parent however that dies
// (a shim killed while it mounts a volume left it parked for good).
int park_in_userns(void* parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != *static_cast<pid_t*>(parent)) return 0;  // the parent died first
  ::pause();
  return 0;
}

}  // namespace

// A child is cloned into a fresh user namespace, the maps written, its namespace
// opened, the child reaped.
UniqueFd make_idmap_userns(const std::string& uid_map, const std::string& gid_map) {
  constexpr size_t kStack = 16 * 1024;
  auto stack = std::make_unique<char[]>(kStack);
  pid_t parent = ::getpid();
  pid_t pid = ::clone(park_in_userns, stack.get() + kStack, CLONE_NEWUSER | SIGCHLD, &parent);
  if (pid < 0) throw_errno(ErrorKind::Engine, "clone a user namespace for a volume's id map");
  Child child(pid);
  std::string proc = "/proc/" + std::to_string(pid);
  UniqueFd ns;
  try {
    write_proc(proc + "/uid_map", uid_map);
    write_proc(proc + "/setgroups", "deny");
    write_proc(proc + "/gid_map", gid_map);
    ns = UniqueFd(::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) throw_errno(ErrorKind::Engine, "open " + proc + "/ns/user");
  } catch (...) {
    ::kill(pid, SIGKILL);
    child.wait();
    throw;
  }
  ::kill(pid, SIGKILL);
  child.wait();
  return ns;
}

namespace {

// The box's /tmp tmpfs, mounted before the volumes (not with /proc and /sys in the
// child) so that a volume under /tmp lands on it instead of being hidden by it.
// Owned by the box's root; the mount point is made inside the root (a symlinked
// /tmp in the image resolves inside it).
void mount_tmp(const ShimSpec& spec, const std::string& root) {
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) throw_errno(ErrorKind::Engine, "open " + root);
  UniqueFd tmp = make_dirs_in_root(root_fd.get(), "/tmp", ErrorKind::Engine);
  std::string at = "/proc/self/fd/" + std::to_string(tmp.get());
  std::string opts =
      "mode=1777,uid=" + std::to_string(spec.jail().uid_offset) + ",gid=" + std::to_string(spec.jail().uid_offset);
  if (::mount("tmpfs", at.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
    throw_errno(ErrorKind::Engine, "mount the box's /tmp");
}

// A box with a network gets /etc/hosts and /etc/resolv.conf as Docker's containers
// do: files of its own directory (its root's to write; a kept box keeps its edits
// across restarts) bound onto the root's, before the box's namespaces exist. Writing
// them into the root instead copies /etc up into the box's upper layer, ~0.25 ms a
// start on these hosts. False, and nothing bound, where the root has something other
// than a file at either name (an imported upper layer's symlink, say): the agent then
// writes them as a VM's does.
bool bind_etc_files(const ShimSpec& spec, const std::string& root) {
  // A volume there would hide the binds (volumes are mounted after): the agent then
  // writes what it can, as before.
  for (const auto& v : spec.volumes) {
    for (const char* p : {"/etc", "/etc/hosts", "/etc/resolv.conf"}) {
      if (v.guest_path == p || v.guest_path == std::string(p) + "/") return false;
    }
  }
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) throw_errno(ErrorKind::Engine, "open " + root);
  struct File {
    const char* name;
    std::string text;
    UniqueFd target;
  };
  File files[] = {
      {"hosts", hosts_file_text(net::kGuestAddress, spec.hostname, net::kHostAlias, net::kHostAliasName), {}},
      {"resolv.conf", resolv_conf_text(net::kGatewayAddress), {}},
  };
  for (auto& f : files) {
    f.target = open_in_root(root_fd.get(), std::string("/etc/") + f.name, O_PATH | O_NOFOLLOW);
    struct stat st {};
    if (!f.target || ::fstat(f.target.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  }
  for (auto& f : files) {
    std::string source = spec.box_dir + "/" + f.name;
    UniqueFd fd(::open(source.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd) {  // else kept from an earlier start, with whatever the box wrote into it
      try {
        write_all(fd.get(), f.text.data(), f.text.size());
        if (::fchown(fd.get(), spec.jail().uid_offset, spec.jail().uid_offset) != 0 || ::fchmod(fd.get(), 0644) != 0)
          throw_errno(ErrorKind::Engine, "own " + source);
      } catch (...) {
        ::unlink(source.c_str());  // not to be taken for a complete one at the next start
        throw;
      }
    } else if (errno != EEXIST) {
      throw_errno(ErrorKind::Engine, "create " + source);
    }
    // What is bound is the regular file at that name, never what a link there names.
    UniqueFd src(::open(source.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!src || ::fstat(src.get(), &st) != 0) throw_errno(ErrorKind::Engine, "open " + source);
    if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::Engine, source + " is not a regular file");
    UniqueFd tree(static_cast<int>(::open_tree(src.get(), "", AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
    if (!tree) throw_errno(ErrorKind::Engine, "open " + source);
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    // (Flags of hygiene only: a kernel before 5.12 binds the files without them.)
    if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0 && errno != ENOSYS)
      throw_errno(ErrorKind::Engine, "set flags of the bind of " + source);
    if (::move_mount(tree.get(), "", f.target.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
      throw_errno(ErrorKind::Engine, std::string("bind ") + source + " onto the box's /etc/" + f.name);
    }
  }
  return true;
}

// Binds each volume onto its mount point in the box root, before the box's
// namespaces exist: from inside, the mounts are locked (a user namespace cannot
// remount a read-only mount it inherited read-write, nor unmount it to see what
// is under it), and the box has no CAP_SYS_ADMIN anyway. Always nosuid, nodev.

// A volume's mount point, resolved inside the root (an image's links followed
// there), must not land under what the box's init mounts over later (/dev, /proc,
// /sys): the volume would be hidden, silently. (/tmp is mounted before.)
// Both as the kernel names them (/proc/self/fd), so that a link in the home's path
// changes nothing.
void refuse_hidden_mount_point(int root_fd, int target, const std::string& guest_path) {
  auto path_of = [&](int fd) {
    char buf[PATH_MAX];
    ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof buf - 1);
    if (n < 0) throw_errno(ErrorKind::Engine, "resolve the mount point of volume " + guest_path);
    return std::string(buf, static_cast<size_t>(n));
  };
  std::string root = path_of(root_fd), at = path_of(target);
  if (!at.starts_with(root + "/")) return;
  std::string in_box = at.substr(root.size());
  for (const char* hidden : {"/dev", "/proc", "/sys"}) {
    if (in_box == hidden || in_box.starts_with(std::string(hidden) + "/")) {
      std::string where = in_box == hidden ? in_box : in_box + ", under " + hidden;
      throw Error(ErrorKind::InvalidArgument, "volume " + guest_path + ": the image's links take it to " + where +
                                                  ", which the box mounts over: the volume would be hidden. Choose "
                                                  "another guest path");
    }
  }
}

void mount_volumes(const ShimSpec& spec, const std::string& root, std::vector<std::string>& warnings) {
  if (spec.volumes.empty()) return;
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) throw_errno(ErrorKind::Engine, "open " + root);
  for (const auto& v : spec.volumes) {
    UniqueFd target = make_dirs_in_root(root_fd.get(), v.guest_path, ErrorKind::Engine);
    refuse_hidden_mount_point(root_fd.get(), target.get(), v.guest_path);
    UniqueFd tree(static_cast<int>(::open_tree(AT_FDCWD, v.host_path.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
    if (!tree) throw_errno(ErrorKind::Engine, "open volume " + v.host_path);
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (v.read_only ? MOUNT_ATTR_RDONLY : 0);
    if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
      throw_errno(ErrorKind::Engine, "set flags of volume " + v.host_path);
    }
    struct stat st;
    if (::stat(v.host_path.c_str(), &st) != 0) throw_errno(ErrorKind::Engine, "stat volume " + v.host_path);
    UniqueFd ns = make_idmap_userns(volume_id_map(spec.jail().uid_offset, st.st_uid),
                                    volume_id_map(spec.jail().uid_offset, st.st_gid));
    mount_attr idmap{};
    idmap.attr_set = MOUNT_ATTR_IDMAP;
    idmap.userns_fd = static_cast<uint64_t>(ns.get());
    if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &idmap, sizeof idmap) != 0) {
      // A filesystem without idmapped mounts: the box sees host ids shifted
      // by the offset (mostly "nobody") and writes only where others may.
      warnings.push_back(errno_text("volume " + v.host_path + " is not id-mapped (box root will not own its files)"));
    }
    if (::move_mount(tree.get(), "", target.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
      throw_errno(ErrorKind::Engine, "mount volume " + v.host_path + " at " + v.guest_path);
    }
  }
}

// cgroup v1 (these machines) or v2: the box's memory, CPU and pids limits.
struct CgroupPlan {
  std::vector<std::string> dirs;
  std::vector<std::string> warnings;
  // cgroup v1: each hierarchy's `tasks` file, opened here (as host root) for the
  // box's init to write "0" into: a thread moving itself skips the kernel's
  // cgroup_threadgroup_rwsem, whose first writer waits ~10 ms for an RCU grace
  // period; the write is checked against the opener's credentials.
  std::vector<UniqueFd> join_fds;
  // cgroup v2: the dir whose cgroup.procs the shim writes the init's pid into.
  std::string v2_procs;
};

bool is_cgroup2() { return path_exists("/sys/fs/cgroup/cgroup.controllers"); }

std::string v1_dir(const std::string& ctl, const std::string& box_id) {
  return "/sys/fs/cgroup/" + ctl + "/boxlite/" + box_id;
}
std::string v2_dir(const std::string& box_id) { return "/sys/fs/cgroup/boxlite/" + box_id; }

// A fresh memory cgroup costs ~13 ms on its first attach here (cgroup v1), more
// than the rest of a jail's start. So a removed box's cgroup is emptied and kept
// as a spare (renamed, which cgroupfs allows within a parent), and the next box
// takes one over by renaming it to its own name.
constexpr int kMaxSpares = 8;

std::vector<std::string> cgroup_parents() {
  if (is_cgroup2()) return {"/sys/fs/cgroup/boxlite"};
  return {"/sys/fs/cgroup/memory/boxlite", "/sys/fs/cgroup/pids/boxlite", "/sys/fs/cgroup/cpu/boxlite"};
}

// A spare still holding a process, or a pids charge of one that is exiting (a box
// that ended in a fork bomb leaves thousands for a while), would count against the
// next box's limits: such a spare waits for a later box.
bool spare_is_idle(const std::string& spare) {
  auto holds = [&](const std::string& file, bool zero_means_idle) {
    std::optional<std::string> text;
    try {
      text = read_file_if_present(spare + "/" + file);
    } catch (const Error&) {
      return true;  // unreadable: do not bet on it
    }
    if (!text) return false;
    std::string t = trim(*text);
    return zero_means_idle ? (t != "0") : !t.empty();
  };
  return !holds("cgroup.procs", false) && !holds("pids.current", true);
}

// Renames an idle spare to `dir` (atomic: two boxes never get the same one), else mkdir.
void take_or_make_cgroup(const std::string& parent, const std::string& dir) {
  make_dirs(parent);
  for (int i = 0; i < kMaxSpares; ++i) {
    std::string spare = parent + "/spare-" + std::to_string(i);
    if (!spare_is_idle(spare)) continue;
    if (::rename(spare.c_str(), dir.c_str()) == 0) return;
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw_errno(ErrorKind::Engine, "mkdir " + dir);
}

void retire_cgroup(const std::string& parent, const std::string& dir) {
  if (!path_exists(dir)) return;
  // What the old box left charged (page cache) is reclaimable, so the next box is
  // never refused memory for it; memory.force_empty here stalled up to a second.
  for (int i = 0; i < kMaxSpares; ++i) {
    std::string spare = parent + "/spare-" + std::to_string(i);
    if (!path_exists(spare) && ::rename(dir.c_str(), spare.c_str()) == 0) return;
  }
  ::rmdir(dir.c_str());
}

// Makes the box's cgroups and sets their limits, before its init exists.
CgroupPlan prepare_cgroups(const ShimSpec& spec) {
  CgroupPlan plan;
  long long mem = static_cast<long long>(spec.memory_mib) << 20;
  long long quota = 100000LL * spec.cpus;
  auto try_limit = [&](const std::string& what, auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      plan.warnings.push_back(what + " limit not enforced: " + e.what());
    }
  };
  if (is_cgroup2()) {
    std::string dir = v2_dir(spec.box_id);
    try_limit("memory/cpu/pids", [&] {
      make_dirs("/sys/fs/cgroup/boxlite");
      try {
        write_proc("/sys/fs/cgroup/cgroup.subtree_control", "+memory +pids +cpu");
        write_proc("/sys/fs/cgroup/boxlite/cgroup.subtree_control", "+memory +pids +cpu");
      } catch (const Error&) {
      }
      take_or_make_cgroup("/sys/fs/cgroup/boxlite", dir);
      plan.dirs.push_back(dir);
      plan.v2_procs = dir + "/cgroup.procs";
    });
    try_limit("memory", [&] {
      write_proc(dir + "/memory.max", std::to_string(mem));
      write_proc(dir + "/memory.swap.max", "0");
    });
    try_limit("pids", [&] { write_proc(dir + "/pids.max", std::to_string(spec.jail().pids_limit)); });
    try_limit("cpu", [&] { write_proc(dir + "/cpu.max", std::to_string(quota) + " 100000"); });
    return plan;
  }
  auto v1 = [&](const std::string& ctl, const std::vector<std::pair<std::string, std::string>>& files) {
    try_limit(ctl, [&] {
      if (!path_exists("/sys/fs/cgroup/" + ctl))
        throw Error(ErrorKind::Unsupported, "no cgroup v1 " + ctl + " hierarchy");
      std::string dir = v1_dir(ctl, spec.box_id);
      take_or_make_cgroup("/sys/fs/cgroup/" + ctl + "/boxlite", dir);
      plan.dirs.push_back(dir);
      for (const auto& [file, value] : files) {
        try {
          write_proc(dir + "/" + file, value);
        } catch (const Error&) {
          if (file.find("memsw") == std::string::npos) throw;  // swap accounting may be off
        }
      }
      UniqueFd tasks(::open((dir + "/tasks").c_str(), O_WRONLY | O_CLOEXEC));
      if (!tasks) throw_errno(ErrorKind::Engine, "open " + dir + "/tasks");
      plan.join_fds.push_back(std::move(tasks));
    });
  };
  // memsw must stay >= the limit at every step (a reused cgroup may hold a smaller one).
  v1("memory", {{"memory.memsw.limit_in_bytes", "-1"},
                {"memory.limit_in_bytes", std::to_string(mem)},
                {"memory.memsw.limit_in_bytes", std::to_string(mem)}});
  v1("pids", {{"pids.max", std::to_string(spec.jail().pids_limit)}});
  v1("cpu", {{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", std::to_string(quota)}});
  return plan;
}

InitParams init_params(const ShimSpec& spec) {
  InitParams p{};
  p.version = kInitProtocolVersion;
  if (spec.hostname.size() >= sizeof p.hostname) {
    throw Error(ErrorKind::InvalidArgument, "hostname '" + spec.hostname + "' is longer than " +
                                                std::to_string(sizeof p.hostname - 1) + " characters");
  }
  std::memcpy(p.hostname, spec.hostname.data(), spec.hostname.size());
  p.seccomp = spec.seccomp;
  p.rlimit_nofile = spec.rlimit_nofile;
  p.rlimit_fsize = spec.rlimit_fsize;
  p.rlimit_nproc = spec.rlimit_nproc;
  p.rlimit_as = spec.rlimit_as;
  p.rlimit_cpu = spec.rlimit_cpu;
  return p;
}

}  // namespace

Zygote Zygote::start(const std::string& libexec_dir) {
  Zygote z;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    z.failure_ = errno_text("socketpair");
    return z;
  }
  UniqueFd ours(sv[0]), theirs(sv[1]);
  SpawnOptions so;
  z.binary_ = libexec_dir + "/boxlite-guest";
  so.argv = {z.binary_, "--jail-zygote", "3"};
  so.fds = {{theirs.get(), 3}};
  so.stdout_path = so.stderr_path = "/dev/null";
  so.empty_env = true;  // whatever the shim's caller had in its environment stays out
  try {
    z.process_ = spawn(so);
  } catch (const Error& e) {
    z.failure_ = e.what();
    return z;
  }
  z.sock_ = std::move(ours);
  return z;
}

Zygote::~Zygote() { release(); }

void Zygote::release() {
  if (!process_.valid()) return;
  sock_.reset();  // EOF: it exits
  process_.wait();
}

pid_t Zygote::clone_init(const InitParams& params, const std::string& root, const std::vector<int>& fds) {
  if (!process_.valid()) {
    throw Error(ErrorKind::Engine, "no zygote to clone the box's init from (" +
                                       (failure_.empty() ? std::string("used already") : failure_) + ")");
  }
  UniqueFd mntns(::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC));
  if (!mntns) throw_errno(ErrorKind::Engine, "open this process's mount namespace");
  UniqueFd root_dir(::open(root.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root_dir) throw_errno(ErrorKind::Engine, "open " + root);
  // The mount point is one name every shim of the home shares: what we open must be
  // the overlay we mounted there, not whatever took that name meanwhile.
  struct statx stx {};
  struct statfs sfs {};
  if (::statx(root_dir.get(), "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) != 0 || ::fstatfs(root_dir.get(), &sfs) != 0)
    throw_errno(ErrorKind::Engine, "stat " + root);
  if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) || !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) ||
      sfs.f_type != OVERLAYFS_SUPER_MAGIC) {
    throw Error(ErrorKind::Engine, "the box root " + root + " is not the overlay just mounted there");
  }
  std::vector<int> all = {mntns.get(), root_dir.get()};
  all.insert(all.end(), fds.begin(), fds.end());
  pid_t pid = 0;
  ssize_t n;
  if (send_with_fds(sock_.get(), &params, sizeof params, all.data(), all.size()) !=
      static_cast<ssize_t>(sizeof params)) {
    int err = errno;
    release();
    throw_errno(ErrorKind::Engine, "ask the jail's zygote for the box's init", err);
  }
  while ((n = ::recv(sock_.get(), &pid, sizeof pid, 0)) < 0 && errno == EINTR) {
  }
  int err = errno;
  release();  // one init per zygote: it exits once it answered
  if (n != static_cast<ssize_t>(sizeof pid)) {
    throw_errno(ErrorKind::Engine, "the jail's zygote did not answer", n < 0 ? err : EPIPE);
  }
  if (pid == -EPROTO) {
    throw Error(ErrorKind::Engine, "the jail's zygote (" + binary_ +
                                       ") refused the box's request: it is not from this build of the shim; "
                                       "install boxlite-shim and boxlite-guest together");
  }
  if (pid < 0) {
    throw Error(ErrorKind::Engine,
                errno_text("clone the box's namespaces", -pid) + namespace_refusal_hint(-pid, /*network=*/false));
  }
  return pid;
}

std::string root_mountpoint(const ShimSpec& spec) {
  return spec.jail().root_mountpoint.empty() ? spec.box_dir + "/rootfs" : spec.jail().root_mountpoint;
}

void enter_private_mount_namespace() {
  // Once per process: a second unshare would copy the mounts a warm disk was made
  // on, and its unnamed image could no longer be linked (EXDEV).
  static bool entered = false;
  if (entered) return;
  if (::unshare(CLONE_NEWNS) != 0) throw_errno(ErrorKind::Engine, "unshare mount namespace");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    throw_errno(ErrorKind::Engine, "make / private");
  entered = true;
}

namespace {

// The init's first word on the channel: a byte and its network namespace, which
// must be a network namespace of the box's own user namespace (so never the host's,
// where a TAP made would be a host device). An empty fd if the init is gone first.
UniqueFd receive_box_netns(int channel, int box_userns) {
  char byte = 0;
  int fd = -1;
  size_t got = 0;
  ssize_t n = recv_with_fds(channel, &byte, 1, &fd, 1, &got);  // retries EINTR itself
  if (n == 0 || (n < 0 && errno == ECONNRESET)) return UniqueFd();
  if (n < 0) throw_errno(ErrorKind::Engine, "hear the box's network namespace from its init");
  UniqueFd netns(got == 1 ? fd : -1);
  if (byte != 'n' || !netns) {
    throw Error(ErrorKind::Engine,
                "the box's init sent no network namespace: is boxlite-guest from another build than the shim? "
                "Install boxlite-shim and boxlite-guest together");
  }
  UniqueFd owner(::ioctl(netns.get(), NS_GET_USERNS));
  struct stat want {
  }, have{};
  if (::ioctl(netns.get(), NS_GET_NSTYPE) != CLONE_NEWNET || !owner || ::fstat(owner.get(), &have) != 0 ||
      ::fstat(box_userns, &want) != 0 || have.st_ino != want.st_ino || have.st_dev != want.st_dev) {
    throw Error(ErrorKind::Engine, "the box's init sent a namespace that is not a network namespace of the box's");
  }
  return netns;
}

}  // namespace

Jail start(const ShimSpec& spec, Zygote& zygote, const std::function<void(int)>& once_cloned) {
  if (::geteuid() != 0) {
    throw Error(ErrorKind::UnsupportedEngine,
                "the jail engine needs root here (it maps box users to an unprivileged host uid range and mounts "
                "overlayfs); see docs/jail.md");
  }
  std::string root = root_mountpoint(spec);
  mount_root(spec, root);
  mount_tmp(spec, root);
  bool etc_files_bound = spec.net.enabled && bind_etc_files(spec, root);
  trace("jail: root mounted");
  std::vector<std::string> volume_warnings;
  mount_volumes(spec, root, volume_warnings);

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw_errno(ErrorKind::Engine, "socketpair");
  UniqueFd host_end(sv[0]), box_end(sv[1]);
  // Room for four of the protocol's largest chunks (256 KiB) each way: the agent's
  // and the shim's writes of a chunk go whole (bench/RESULTS.md, "Exec stdout throughput").
  for (int fd : sv) set_send_buffer(fd, 1 << 20);
  int sp[2], rp[2];
  if (::pipe2(sp, O_CLOEXEC) != 0) throw_errno(ErrorKind::Engine, "pipe");
  UniqueFd sync_r(sp[0]), sync_w(sp[1]);
  if (::pipe2(rp, O_CLOEXEC) != 0) throw_errno(ErrorKind::Engine, "pipe");
  UniqueFd report_r(rp[0]), report_w(rp[1]);

  CgroupPlan cg = prepare_cgroups(spec);
  trace("jail: cgroups prepared");
  InitParams params = init_params(spec);
  std::vector<int> fds = {sync_r.get(), report_w.get(), box_end.get()};
  for (const auto& fd : cg.join_fds) fds.push_back(fd.get());
  pid_t pid = zygote.clone_init(params, root, fds);
  trace("jail: cloned");
  // Opened while the init is still ours (its uid, dumpable), to check the network
  // namespace it sends us against.
  UniqueFd userns(::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  int userns_errno = errno;
  Jail j;
  j.init = Child(pid);
  sync_r.reset();
  report_w.reset();
  box_end.reset();

  // Either the agent runs (the init closes the report pipe empty) or the init says why.
  auto child_report = [&] {
    std::string why;
    char buf[512];
    for (;;) {
      ssize_t n = ::read(report_r.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      why.append(buf, static_cast<size_t>(n));
    }
    return why;
  };
  // The init waits for each byte; one that failed before it (a mount point of the
  // box's that is not a directory, say) has closed its end: its reason is the error.
  auto release_init = [&](char step) {
    if (::write(sync_w.get(), &step, 1) == 1) return;
    int err = errno;
    j.init.kill_now();
    if (std::string why = child_report(); !why.empty()) throw Error(ErrorKind::Engine, "jail setup failed: " + why);
    throw_errno(ErrorKind::Engine, "release the box init", err);
  };

  std::string map = "0 " + std::to_string(spec.jail().uid_offset) + " " + std::to_string(kUidCount) + "\n";
  write_proc("/proc/" + std::to_string(pid) + "/uid_map", map);
  write_proc("/proc/" + std::to_string(pid) + "/gid_map", map);
  release_init('g');
  trace("jail: id maps written");
  cg.join_fds.clear();  // the child has its copies
  if (!cg.v2_procs.empty()) {
    try {
      write_proc(cg.v2_procs, std::to_string(pid));
    } catch (const Error& e) {
      cg.warnings.push_back(std::string("memory/cpu/pids limit not enforced: ") + e.what());
    }
  }
  trace("jail: cgroups applied");
  j.warnings = cg.warnings;
  j.etc_files_bound = etc_files_bound;
  j.warnings.insert(j.warnings.end(), volume_warnings.begin(), volume_warnings.end());
  release_init('c');
  sync_w.reset();
  try {
    if (!userns) throw_errno(ErrorKind::Engine, "open the box's user namespace", userns_errno);
    UniqueFd netns = receive_box_netns(host_end.get(), userns.get());
    if (!netns) throw Error(ErrorKind::Engine, "jail setup failed: the box's init exited before it had a network");
    if (once_cloned) once_cloned(netns.get());
  } catch (const Error&) {
    // A child that failed meanwhile took its namespaces with it: its reason is the
    // one to give, not the caller's failure to enter them.
    j.init.kill_now();
    if (std::string why = child_report(); !why.empty()) throw Error(ErrorKind::Engine, "jail setup failed: " + why);
    throw;
  }
  std::string why = child_report();
  trace("jail: agent exec'd");
  if (!why.empty()) {
    j.init.wait();
    throw Error(ErrorKind::Engine, "jail setup failed: " + why);
  }
  j.channel = std::move(host_end);
  return j;
}

namespace {

// 0 if a child could be cloned with `flags` (it exits at once), else the errno.
// Like fork, no stack of its own: the child makes no call before its exit, so a
// caller with threads is fine.
int clone_and_reap(unsigned long flags) {
  long pid = ::syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, 0L);
  if (pid == 0) ::syscall(SYS_exit_group, 0);
  if (pid < 0) return errno;
  int status = 0;
  while (::waitpid(static_cast<pid_t>(pid), &status, 0) < 0 && errno == EINTR) {
  }
  return 0;
}

}  // namespace

std::string namespaces_refused() {
  if (int err =
          clone_and_reap(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP)) {
    return errno_text("cannot make a box's user, pid, mount, uts, ipc and cgroup namespaces", err) +
           namespace_refusal_hint(err, /*network=*/false);
  }
  if (int err = clone_and_reap(CLONE_NEWUSER | CLONE_NEWNET)) {
    return errno_text("cannot make a box's network namespace", err) + namespace_refusal_hint(err, /*network=*/true);
  }
  return "";
}

void prime_cgroup_attach() {
  if (!is_cgroup2()) return;  // v1: the box's init joins its cgroups itself, with no wait
  static std::atomic<int64_t> last_ms{0};
  auto now = static_cast<int64_t>(now_ms());
  if (now - last_ms.exchange(now) < 5) return;  // one is in flight or the mode is on
  std::thread([] {
    try {
      std::string procs;
      for (const auto& line : split(read_file("/proc/self/cgroup"), '\n')) {
        auto parts = split(line, ':');
        if (parts.size() >= 3 && parts[0] == "0" && parts[1].empty())
          procs = "/sys/fs/cgroup" + parts[2] + "/cgroup.procs";
      }
      if (!procs.empty() && path_exists(procs)) write_proc(procs, std::to_string(::getpid()));
    } catch (const Error&) {
    }
  }).detach();
}

std::optional<Usage> usage(const std::string& box_id) {
  auto number = [](const std::string& path) -> std::optional<uint64_t> {
    try {
      return std::stoull(trim(read_file(path)));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  Usage u;
  if (is_cgroup2()) {
    auto mem = number(v2_dir(box_id) + "/memory.current");
    if (!mem) return std::nullopt;
    u.memory_bytes = *mem;
    try {
      for (const auto& line : split(read_file(v2_dir(box_id) + "/cpu.stat"), '\n')) {
        if (line.rfind("usage_usec ", 0) == 0) u.cpu_ns = std::stoull(line.substr(11)) * 1000;
      }
    } catch (const std::exception&) {
    }
    return u;
  }
  auto mem = number(v1_dir("memory", box_id) + "/memory.usage_in_bytes");
  if (!mem) return std::nullopt;
  u.memory_bytes = *mem;
  // The jail joins no cpuacct hierarchy under v1: add up its live processes'
  // times, with what each has collected from the children it reaped.
  try {
    for (const auto& pid : split(read_file(v1_dir("memory", box_id) + "/cgroup.procs"), '\n')) {
      if (!pid.empty()) u.cpu_ns += process_cpu_ns(std::stoi(pid));
    }
  } catch (const std::exception&) {
  }
  return u;
}

void remove_cgroups(const std::string& box_id) {
  for (const auto& parent : cgroup_parents()) retire_cgroup(parent, parent + "/" + box_id);
  if (!is_cgroup2()) ::rmdir(v1_dir("freezer", box_id).c_str());  // made by freeze(), never kept as a spare
}

namespace {

std::set<std::string> pids_in(const std::string& procs_file) {
  std::set<std::string> out;
  try {
    for (const auto& p : split(read_file(procs_file), '\n')) {
      if (!trim(p).empty()) out.insert(trim(p));
    }
  } catch (const Error&) {
  }
  return out;
}

// Polls `done` every millisecond for up to 5 s.
bool wait_until(const std::function<bool()>& done) {
  for (int i = 0; i < 5000; ++i) {
    if (done()) return true;
    ::usleep(1000);
  }
  return done();
}

}  // namespace

void freeze(const std::string& box_id) {
  if (is_cgroup2()) {
    std::string dir = v2_dir(box_id);
    if (!path_exists(dir + "/cgroup.freeze"))
      throw Error(ErrorKind::Unsupported, "box " + box_id + " has no cgroup to freeze");
    write_proc(dir + "/cgroup.freeze", "1");
    if (!wait_until([&] { return read_file(dir + "/cgroup.events").find("frozen 1") != std::string::npos; })) {
      write_proc(dir + "/cgroup.freeze", "0");
      throw Error(ErrorKind::Engine, "box " + box_id + ": its processes did not freeze within 5 s");
    }
    return;
  }
  // cgroup v1: the jail joins no freezer hierarchy when it starts (each attach costs),
  // so its processes move into one now. A process forked meanwhile by one not yet
  // moved is caught by the next round; one forked inside the frozen group is frozen.
  std::string members = v1_dir("memory", box_id) + "/cgroup.procs";
  if (!path_exists(members)) members = v1_dir("pids", box_id) + "/cgroup.procs";
  if (!path_exists(members))
    throw Error(ErrorKind::Unsupported, "box " + box_id + " has no cgroup listing its processes");
  if (!path_exists("/sys/fs/cgroup/freezer"))
    throw Error(ErrorKind::Unsupported, "no cgroup v1 freezer hierarchy on this host");
  std::string dir = v1_dir("freezer", box_id);
  make_dirs("/sys/fs/cgroup/freezer/boxlite");
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw_errno(ErrorKind::Engine, "mkdir " + dir);
  bool frozen = false;
  for (int round = 0; round < 100; ++round) {
    auto inside = pids_in(dir + "/cgroup.procs");
    bool moved = false;
    for (const auto& pid : pids_in(members)) {
      if (inside.count(pid)) continue;
      try {
        write_proc(dir + "/cgroup.procs", pid);
        moved = true;
      } catch (const Error&) {
        // It exited meanwhile.
      }
    }
    if (!frozen) {
      write_proc(dir + "/freezer.state", "FROZEN");
      frozen = true;
    } else if (!moved) {
      break;
    }
  }
  if (!wait_until([&] { return trim(read_file(dir + "/freezer.state")) == "FROZEN"; })) {
    thaw(box_id);
    throw Error(ErrorKind::Engine, "box " + box_id + ": its processes did not freeze within 5 s");
  }
}

void thaw(const std::string& box_id) {
  if (is_cgroup2()) {
    write_proc(v2_dir(box_id) + "/cgroup.freeze", "0");
  } else {
    write_proc(v1_dir("freezer", box_id) + "/freezer.state", "THAWED");
  }
}

}  // namespace boxlite::engine::jail
