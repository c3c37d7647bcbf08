#include "guest/container.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/random.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>

#include "common/error.hpp"
#include "common/in_root.hpp"
#include "common/io.hpp"

namespace boxlite::guest {
namespace {

// A mount point of the box's root that the image has as something else (a symlink,
// which mount would follow out of the root into the agent's initramfs, or a file)
// becomes an empty directory: nothing of the image's is ever seen there, as in a jail
// box, whose engine's layer of mount points hides it.
void make_root_mount_point(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return;
    if (::unlink(path.c_str()) != 0) throw_errno(ErrorKind::Engine, "remove the image's " + path);
  }
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) throw_errno(ErrorKind::Engine, "mkdir " + path);
}

void mount_or_throw(const char* src, const std::string& target, const char* type, unsigned long flags,
                    const char* data = nullptr) {
  ::mkdir(target.c_str(), 0755);
  if (::mount(src, target.c_str(), type, flags, data) != 0) {
    throw_errno(ErrorKind::Engine, std::string("mount ") + type + " on " + target);
  }
}

// Boot-time parameters of a loadable module ("virtio_mmio.device=..." that QEMU
// appends) are not applied by the kernel; modprobe reads them from /proc/cmdline,
// and so do we.
std::string module_params(const std::string& cmdline, const std::string& module) {
  std::string params;
  for (const auto& tok : split(trim(cmdline), ' ')) {
    if (tok.size() > module.size() + 1 && tok.compare(0, module.size() + 1, module + ".") == 0) {
      if (!params.empty()) params += ' ';
      params += tok.substr(module.size() + 1);
    }
  }
  return params;
}

void load_modules() {
  std::string cmdline;
  try {
    cmdline = read_file("/proc/cmdline");
  } catch (const Error&) {
  }
  std::string list;
  try {
    list = read_file("/modules/load.list");
  } catch (const Error&) {
    return;  // built-in kernel: nothing to load
  }
  for (const auto& line : split(list, '\n')) {
    if (line.empty()) continue;
    UniqueFd fd(::open(line.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) throw_errno(ErrorKind::Engine, "open module " + line);
    // /modules/<n>-<name>.ko
    std::string name = line.substr(line.find('-') + 1);
    name = name.substr(0, name.find(".ko"));
    for (auto& ch : name) ch = ch == '-' ? '_' : ch;
    std::string params = module_params(cmdline, name);
    if (::syscall(SYS_finit_module, fd.get(), params.c_str(), 0) != 0 && errno != EEXIST) {
      throw_errno(ErrorKind::Engine, "load module " + line);
    }
  }
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

std::string find_disk_by_serial(const std::string& serial) {
  std::unique_ptr<DIR, DirCloser> dir(::opendir("/sys/block"));
  if (!dir) throw_errno(ErrorKind::Engine, "open /sys/block");
  std::string seen;
  while (auto* e = ::readdir(dir.get())) {
    std::string name = e->d_name;
    if (name.rfind("vd", 0) != 0) continue;
    std::string s;
    try {
      s = trim(read_file("/sys/block/" + name + "/serial"));
    } catch (const Error&) {
      continue;
    }
    if (s == serial) return "/dev/" + name;
    seen += " " + name + "(" + s + ")";
  }
  throw Error(ErrorKind::Engine,
              "root disk with serial '" + serial + "' not found; disks:" + (seen.empty() ? " none" : seen));
}

// The root disk is a qcow2 overlay of disk_size_gb over the image's ext4, which
// is only as big as the image needs: grow the file system online to the whole
// device (a no-op once it fills it). The ioctl is what resize2fs uses for a
// mounted file system.
void grow_root_fs(const std::string& disk, const std::string& root) {
  constexpr unsigned long kExt4ResizeFs = _IOW('f', 16, uint64_t);  // EXT4_IOC_RESIZE_FS
  constexpr unsigned long kBlkGetSize64 =
      _IOR(0x12, 114, size_t);  // BLKGETSIZE64 (<linux/fs.h> clashes with <sys/mount.h>)
  UniqueFd dev(::open(disk.c_str(), O_RDONLY | O_CLOEXEC));
  uint64_t bytes = 0;
  if (!dev || ::ioctl(dev.get(), kBlkGetSize64, &bytes) != 0)
    throw_errno(ErrorKind::Engine, "size of the root disk " + disk);
  UniqueFd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct statvfs vfs;
  if (!dir || ::fstatvfs(dir.get(), &vfs) != 0) throw_errno(ErrorKind::Engine, "statvfs " + root);
  uint64_t blocks = bytes / vfs.f_bsize;
  if (::ioctl(dir.get(), kExt4ResizeFs, &blocks) != 0) {
    throw_errno(ErrorKind::Engine, "grow the root file system to " + std::to_string(bytes >> 20) + " MiB");
  }
}

// The box's 9p shares, last so that none is hidden by /tmp's tmpfs. QEMU enforces
// read_only on the host (readonly=on); MS_RDONLY here only makes writes fail
// early with EROFS. cache=none (the default) keeps edits live both ways.
void mount_volumes(const proto::BoxConfig& cfg, const std::string& root) {
  if (cfg.volumes().empty()) return;
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) throw_errno(ErrorKind::Engine, "open " + root);
  for (const auto& v : cfg.volumes()) {
    UniqueFd target = make_dirs_in_root(root_fd.get(), v.guest_path(), ErrorKind::Engine);
    std::string at = "/proc/self/fd/" + std::to_string(target.get());
    unsigned long flags = MS_NOSUID | MS_NODEV | (v.read_only() ? MS_RDONLY : 0);
    if (::mount(v.tag().c_str(), at.c_str(), "9p", flags, "trans=virtio,version=9p2000.L,msize=512000,access=client") !=
        0) {
      throw_errno(ErrorKind::Engine, "mount volume " + v.tag() + " at " + v.guest_path());
    }
  }
}

}  // namespace

void init_vm_phase1() {
  mount_or_throw("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
  mount_or_throw("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
  mount_or_throw("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC);
  load_modules();
}

std::string find_virtio_port(const std::string& name) {
  // Ports can appear a moment after the driver binds; poll briefly.
  for (int attempt = 0; attempt < 500; ++attempt) {
    std::unique_ptr<DIR, DirCloser> dir(::opendir("/sys/class/virtio-ports"));
    if (dir) {
      while (auto* e = ::readdir(dir.get())) {
        if (e->d_name[0] == '.') continue;
        std::string port = e->d_name;
        try {
          if (trim(read_file("/sys/class/virtio-ports/" + port + "/name")) == name) return "/dev/" + port;
        } catch (const Error&) {
        }
      }
    }
    ::usleep(10000);
  }
  std::string devices;
  try {
    std::fprintf(stderr, "boxlite-guest: kernel command line: %s\n", read_file("/proc/cmdline").c_str());
  } catch (const Error&) {
  }
  std::unique_ptr<DIR, DirCloser> dir(::opendir("/sys/bus/virtio/devices"));
  while (dir && (true)) {
    auto* e = ::readdir(dir.get());
    if (!e) break;
    if (e->d_name[0] != '.') devices += std::string(" ") + e->d_name;
  }
  throw Error(ErrorKind::Engine, "virtio-serial port '" + name +
                                     "' not found under /sys/class/virtio-ports (virtio devices:" +
                                     (devices.empty() ? std::string(" none") : devices) + ")");
}

void setup_vm_root(const proto::BoxConfig& cfg) {
  const std::string root = "/newroot";
  std::string disk = find_disk_by_serial(cfg.root_disk_serial());
  mount_or_throw(disk.c_str(), root, "ext4", MS_NOATIME);
  grow_root_fs(disk, root);
  for (const char* dir : {"/proc", "/sys", "/dev", "/tmp"}) make_root_mount_point(root + dir);
  mount_or_throw("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
  mount_or_throw("sysfs", root + "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC);
  mount_or_throw("devtmpfs", root + "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
  mount_or_throw("devpts", root + "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                 "newinstance,ptmxmode=0666,mode=0620,gid=5");
  // /dev/ptmx must reach this devpts instance.
  ::unlink((root + "/dev/ptmx").c_str());
  if (::symlink("pts/ptmx", (root + "/dev/ptmx").c_str()) != 0) throw_errno(ErrorKind::Engine, "symlink /dev/ptmx");
  mount_or_throw("shm", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  mount_or_throw("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  mount_volumes(cfg, root);
  if (::chdir(root.c_str()) != 0) throw_errno(ErrorKind::Engine, "chdir " + root);
  if (::mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) throw_errno(ErrorKind::Engine, "move " + root + " to /");
  if (::chroot(".") != 0) throw_errno(ErrorKind::Engine, "chroot " + root);
  if (::chdir("/") != 0) throw_errno(ErrorKind::Engine, "chdir /");
}

void limit_vm_box_processes(const proto::BoxConfig& cfg) {
  if (cfg.limits().nproc() == 0) return;
  const std::string cgroup = "/sys/fs/cgroup", group = cgroup + "/boxlite";
  mount_or_throw("cgroup2", cgroup, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC);
  auto write_control = [](const std::string& path, const std::string& value) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd || ::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
      throw_errno(ErrorKind::Engine, "set the box's max_processes limit (" + value + " to " + path + ")");
    }
  };
  write_control(cgroup + "/cgroup.subtree_control", "+pids");
  if (::mkdir(group.c_str(), 0755) != 0 && errno != EEXIST) throw_errno(ErrorKind::Engine, "mkdir " + group);
  // pids.max is an int64 in the kernel: a larger limit is no limit.
  uint64_t max = cfg.limits().nproc();
  write_control(group + "/pids.max", max > static_cast<uint64_t>(INT64_MAX) ? "max" : std::to_string(max));
  // The agent first: every process it starts from now on is charged there too.
  write_control(group + "/cgroup.procs", std::to_string(::getpid()));
}

void apply_box_identity(const proto::BoxConfig& cfg) {
  if (!cfg.hostname().empty() && ::sethostname(cfg.hostname().data(), cfg.hostname().size()) != 0) {
    throw_errno(ErrorKind::Engine, "sethostname " + cfg.hostname());
  }
  if (cfg.clock_unix_ns() > 0) {
    timespec ts{static_cast<time_t>(cfg.clock_unix_ns() / 1000000000),
                static_cast<long>(cfg.clock_unix_ns() % 1000000000)};
    ::clock_settime(CLOCK_REALTIME, &ts);  // best effort: a jail cannot set the clock
  }
  if (!cfg.entropy().empty()) {
    // Credit the host's entropy so a box restored from a snapshot never shares RNG state.
    std::string buf(sizeof(rand_pool_info) + cfg.entropy().size(), '\0');
    auto* info = reinterpret_cast<rand_pool_info*>(buf.data());
    info->entropy_count = static_cast<int>(cfg.entropy().size() * 8);
    info->buf_size = static_cast<int>(cfg.entropy().size());
    std::memcpy(info->buf, cfg.entropy().data(), cfg.entropy().size());
    UniqueFd fd(::open("/dev/urandom", O_WRONLY | O_CLOEXEC));
    if (fd) ::ioctl(fd.get(), RNDADDENTROPY, info);
  }
}

void vm_power_off() {
  ::kill(-1, SIGKILL);
  ::sync();
  ::reboot(RB_AUTOBOOT);
  for (;;) ::pause();
}

}  // namespace boxlite::guest
