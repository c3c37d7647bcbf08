#include "engine/jail/disk.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "common/trace.hpp"

namespace boxlite::engine::jail {
namespace {

// e2fsprogs lives in sbin directories that PATH may lack.
std::string e2fs_tool(const std::string& name) {
  std::string p = which(name);
  if (!p.empty()) return p;
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/local/sbin"}) {
    std::string candidate = std::string(dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw Error(ErrorKind::Storage, name + " not found: a jail box's disk needs it (install e2fsprogs)");
}

std::string probe_disks() {
  UniqueFd ctl(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!ctl) return errno_text("cannot open /dev/loop-control", errno) + " (no loop devices on this host)";
  int nr = ::ioctl(ctl.get(), LOOP_CTL_GET_FREE);
  if (nr < 0) return errno_text("/dev/loop-control gives no free loop device", errno);
  std::string dev = "/dev/loop" + std::to_string(nr);
  if (::access(dev.c_str(), R_OK | W_OK) != 0) return errno_text("cannot use " + dev, errno);
  return "";
}

// The ext4 superblock's fields we read: at byte 1024 of the image.
constexpr off_t kSuperblockAt = 1024;
constexpr size_t kMagicAt = 0x38, kStateAt = 0x3A;
constexpr uint16_t kExt4Magic = 0xEF53;
constexpr uint16_t kStateValid = 0x1, kStateErrors = 0x2;

uint16_t le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// Whether the file system was last unmounted cleanly with no error recorded: an
// ext4 without a journal marks itself not clean while it is mounted, so a host
// crash (or a copy of a running box's image) leaves it so.
bool is_clean(int fd, const std::string& image) {
  unsigned char sb[kStateAt + 2];
  if (::pread(fd, sb, sizeof sb, kSuperblockAt) != static_cast<ssize_t>(sizeof sb))
    throw_errno(ErrorKind::Storage, "read the superblock of " + image);
  if (le16(sb + kMagicAt) != kExt4Magic) throw Error(ErrorKind::Storage, image + " is not an ext4 file system");
  uint16_t state = le16(sb + kStateAt);
  return (state & kStateValid) && !(state & kStateErrors);
}

// e2fsck -p repairs what is safe to repair without asking; exit 0-2 mean the file
// system is fine now.
void check_unclean_disk(int fd, const std::string& image) {
  if (is_clean(fd, image)) return;
  trace("jail: checking the disk");
  // By our descriptor (the image may have no name yet, or another one since).
  std::string path = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd);
  RunResult r = run_capture({e2fs_tool("e2fsck"), "-p", path});
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) > 2) {
    throw Error(ErrorKind::Storage, "the box's disk " + image + " has errors e2fsck -p could not repair (" +
                                        describe_status(r.status) + ": " + brief_tool_error(r.out + r.err) +
                                        "): repair it with `e2fsck -f " + image + "`");
  }
}

// A loop device of its own for `backing`, released when its last opener closes it
// (LOOP_CONFIGURE with LO_FLAGS_AUTOCLEAR): the returned fd, and its path. Another
// process may take the free device we were given first: then the next one.
UniqueFd attach_loop(int backing, bool read_only, const std::string& image, std::string& device) {
  UniqueFd ctl(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!ctl) throw_errno(ErrorKind::Engine, "open /dev/loop-control for the box's disk");
  loop_config cfg{};
  cfg.fd = static_cast<uint32_t>(backing);
  // The file system's block size: ext4's first look at its superblock then needs
  // no smaller one, which would drop the device's page cache (fill_from_template).
  cfg.block_size = 4096;
  cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | (read_only ? LO_FLAGS_READ_ONLY : 0);
  std::strncpy(reinterpret_cast<char*>(cfg.info.lo_file_name), image.c_str(), LO_NAME_SIZE - 1);
  for (int attempt = 0; attempt < 32; ++attempt) {
    int nr = ::ioctl(ctl.get(), LOOP_CTL_GET_FREE);
    if (nr < 0) throw_errno(ErrorKind::Engine, "get a free loop device for the box's disk");
    device = "/dev/loop" + std::to_string(nr);
    UniqueFd dev(::open(device.c_str(), (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC));
    if (!dev) throw_errno(ErrorKind::Engine, "open " + device + " for the box's disk");
    if (::ioctl(dev.get(), LOOP_CONFIGURE, &cfg) == 0) return dev;
    if (errno != EBUSY) throw_errno(ErrorKind::Engine, "attach " + image + " to " + device);
  }
  throw Error(ErrorKind::Engine, "attach " + image + " to a loop device: every free one was taken meanwhile");
}

// What the kernel said about a failed fsconfig (lines of the fs context's log).
std::string fs_context_log(int fs) {
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fs, buf, sizeof buf - 1)) > 0) {
    std::string line(buf, static_cast<size_t>(n));
    if (line.size() > 2 && line[1] == ' ') line.erase(0, 2);  // "e ", "w ", "i "
    out += (out.empty() ? "" : "; ") + trim(line);
  }
  return out;
}

void fs_flag(int fs, const char* key, const std::string& image) {
  if (::fsconfig(fs, FSCONFIG_SET_FLAG, key, nullptr, 0) != 0)
    throw_errno(ErrorKind::Engine, "mount the box's disk " + image + ": option " + key);
}

}  // namespace

std::string disks_unavailable() {
  static const std::string why = probe_disks();
  return why;
}

std::string disk_template_path(const std::string& dir, uint64_t bytes) {
  return dir + "/ext4-" + std::to_string(bytes >> 20) + "m-v2.img";
}

std::string ensure_disk_template(const std::string& dir, uint64_t bytes) {
  std::string path = disk_template_path(dir, bytes);
  if (path_exists(path)) return path;  // complete: it only appears by rename
  make_dirs(dir, 0700);
  std::string tmp = path + ".tmp-" + random_hex(4);
  struct Guard {
    std::string p;
    ~Guard() { ::unlink(p.c_str()); }
  } guard{tmp};
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd || ::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0)
      throw_errno(ErrorKind::Storage, "create the disk template " + tmp);
  }
  std::string mke2fs = e2fs_tool("mke2fs");
  // No journal (a box's disk is scratch or is synced at unmount; a crash is
  // repaired by e2fsck -p at the next start), no room to grow, two superblocks:
  // ~120 KiB written. Each group keeps its own metadata (flex groups of one):
  // with larger ones ext4 puts every directory's first block in the flex group's
  // first group, full of its metadata, and a box's first mkdir scans every group
  // (~1 ms of CPU). The inode tables are holes, which read as zeros: mke2fs is told
  // so, and the kernel never zeroes them in the background (which would write
  // ~1.6% of the size).
  auto make = [&](const std::string& zeroing) {
    return run_capture({mke2fs, "-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0", "-L", "boxlite-disk", "-G", "1",
                        "-O", "^has_journal,^resize_inode,sparse_super2", "-E",
                        zeroing + ",nodiscard,num_backup_sb=0,root_owner=0:0", tmp, std::to_string(bytes >> 10) + "k"});
  };
  RunResult r = make("assume_storage_prezeroed=1");
  if (!r.ok()) r = make("lazy_itable_init=1");  // e2fsprogs before 1.47 (mounts add noinit_itable)
  if (!r.ok()) {
    throw Error(ErrorKind::Storage, "mke2fs could not make the disk template " + tmp + ": " +
                                        describe_status(r.status) + ": " +
                                        brief_tool_error(r.err.empty() ? r.out : r.err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno(ErrorKind::Storage, "rename " + tmp + " to " + path);
  guard.p.clear();
  return path;
}

namespace {

// The data extents of `in` (of `size` bytes) into `out`, sized to match: the holes
// stay holes. A reflink instead where the file system makes them.
void copy_sparse(int in, int out, off_t size, const std::string& what) {
  if (::ioctl(out, FICLONE, in) == 0) return;
  if (::ftruncate(out, size) != 0) throw_errno(ErrorKind::Storage, "size " + what);
  off_t pos = 0;
  while (pos < size) {
    off_t data = ::lseek(in, pos, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;  // only a hole is left
    if (data < 0) throw_errno(ErrorKind::Storage, "copy " + what);
    off_t hole = ::lseek(in, data, SEEK_HOLE);
    if (hole < 0) throw_errno(ErrorKind::Storage, "copy " + what);
    loff_t src = data, dst = data;
    while (src < hole) {
      ssize_t n = ::copy_file_range(in, &src, out, &dst, static_cast<size_t>(hole - src), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw_errno(ErrorKind::Storage, "copy " + what, n == 0 ? EIO : errno);
    }
    pos = hole;
  }
}

UniqueFd open_image(const std::string& path, int flags, off_t& size) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) throw_errno(ErrorKind::Storage, "open the disk image " + path);
  if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::Storage, path + " is not a disk image");
  size = st.st_size;
  return fd;
}

}  // namespace

UniqueFd new_disk_image(const std::string& template_path, const std::string& dir) {
  off_t size = 0;
  UniqueFd in = open_image(template_path, O_RDONLY, size);
  UniqueFd out(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!out) throw_errno(ErrorKind::Storage, "create a disk image in " + dir);
  if (::ftruncate(out.get(), size) != 0) throw_errno(ErrorKind::Storage, "size a disk image in " + dir);
  return out;
}

namespace {

// Writes the template's data extents onto the loop device `dev` of a new (empty)
// image. They land in the device's page cache, where the file system reads its
// metadata: the loop's attach (which flushes the image's dirty pages) found none,
// and the mount and the first directories read nothing through the loop device
// (each read a round trip to its worker: milliseconds on a busy host).
void fill_from_template(int dev, const std::string& template_path) {
  off_t size = 0;
  UniqueFd in = open_image(template_path, O_RDONLY, size);
  std::vector<char> buf;
  for (off_t pos = 0; pos < size;) {
    off_t data = ::lseek(in.get(), pos, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;
    off_t hole = data < 0 ? -1 : ::lseek(in.get(), data, SEEK_HOLE);
    if (hole < 0) throw_errno(ErrorKind::Storage, "read " + template_path);
    buf.resize(static_cast<size_t>(hole - data));
    if (::pread(in.get(), buf.data(), buf.size(), data) != static_cast<ssize_t>(buf.size()))
      throw_errno(ErrorKind::Storage, "read " + template_path);
    size_t done = 0;
    while (done < buf.size()) {
      ssize_t n = ::pwrite(dev, buf.data() + done, buf.size() - done, data + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw_errno(ErrorKind::Storage, "write the new disk", n == 0 ? EIO : errno);
      done += static_cast<size_t>(n);
    }
    pos = hole;
  }
}

}  // namespace

void link_disk_image(int image, const std::string& path) {
  if (::linkat(image, "", AT_FDCWD, path.c_str(), AT_EMPTY_PATH) != 0) throw_errno(ErrorKind::Storage, "name " + path);
}

void copy_disk_image(const std::string& from, const std::string& to) {
  off_t size = 0;
  UniqueFd in = open_image(from, O_RDONLY, size);
  std::string tmp = to + ".tmp-" + random_hex(4);
  struct Guard {
    std::string p;
    ~Guard() {
      if (!p.empty()) ::unlink(p.c_str());
    }
  } guard{tmp};
  UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) throw_errno(ErrorKind::Storage, "create " + tmp);
  copy_sparse(in.get(), out.get(), size, from + " to " + tmp);
  out.reset();
  if (::rename(tmp.c_str(), to.c_str()) != 0) throw_errno(ErrorKind::Storage, "rename " + tmp + " to " + to);
  guard.p.clear();
}

UniqueFd mount_disk(const std::string& path, const DiskMountOptions& opts) {
  off_t size = 0;
  UniqueFd image = open_image(path, opts.read_only ? O_RDONLY : O_RDWR, size);
  return mount_disk(image.get(), path, opts);
}

UniqueFd mount_disk(int image_fd, const std::string& image, const DiskMountOptions& opts) {
  if (!opts.read_only && opts.fill_from.empty()) check_unclean_disk(image_fd, image);
  std::string device;
  UniqueFd loop = attach_loop(image_fd, opts.read_only, image, device);
  trace("jail: disk attached");
  if (!opts.fill_from.empty()) fill_from_template(loop.get(), opts.fill_from);
  UniqueFd fs(::fsopen("ext4", FSOPEN_CLOEXEC));
  if (!fs) throw_errno(ErrorKind::Engine, "mount the box's disk: ext4");
  if (::fsconfig(fs.get(), FSCONFIG_SET_STRING, "source", device.c_str(), 0) != 0)
    throw_errno(ErrorKind::Engine, "mount the box's disk " + image + " from " + device);
  if (opts.read_only) fs_flag(fs.get(), "ro", image);
  fs_flag(fs.get(), "noinit_itable", image);  // its inode tables are holes: zeros already
  // Nor read every group's block bitmap in the background (a thread, reads).
  fs_flag(fs.get(), "no_prefetch_block_bitmaps", image);
  // Blocks allocated as written: with delayed allocation, unmounting syncs the
  // file system once more per quota type (ext4_quota_off), a round trip to the
  // writeback worker each, even with no quota.
  fs_flag(fs.get(), "nodelalloc", image);
  if (opts.ephemeral) fs_flag(fs.get(), "nobarrier", image);  // no flush of the host's disk
  if (::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
    int err = errno;
    std::string log = fs_context_log(fs.get());
    throw Error(ErrorKind::Engine, errno_text("mount the box's disk " + image, err) + (log.empty() ? "" : ": " + log));
  }
  unsigned attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (opts.read_only ? MOUNT_ATTR_RDONLY : 0);
  UniqueFd mnt(::fsmount(fs.get(), FSMOUNT_CLOEXEC, attrs));
  if (!mnt) throw_errno(ErrorKind::Engine, "mount the box's disk " + image);
  trace("jail: disk mounted");
  return mnt;  // the loop device goes with the file system (autoclear)
}

namespace {

struct WarmDisk {
  std::string template_path;
  bool ephemeral = false;
  UniqueFd image, mount;
};

WarmDisk& warm_disk() {
  static WarmDisk w;
  return w;
}

}  // namespace

void prepare_warm_disk(const std::string& template_path, bool ephemeral) noexcept {
  try {
    if (!path_exists(template_path)) return;  // a home's first jail box makes it
    WarmDisk w{template_path, ephemeral, {}, {}};
    w.image = new_disk_image(template_path, template_path.substr(0, template_path.rfind('/')));
    w.mount = mount_disk(w.image.get(), template_path + " (a new disk)",
                         {.read_only = false, .ephemeral = ephemeral, .fill_from = template_path});
    warm_disk() = std::move(w);
    trace("jail: warm disk made");
  } catch (const std::exception&) {
    // The box's start makes its disk itself, and says why if it cannot.
  }
}

bool take_warm_disk(const std::string& template_path, bool ephemeral, UniqueFd& image, UniqueFd& mount) noexcept {
  WarmDisk& w = warm_disk();
  if (!w.mount || w.template_path != template_path || w.ephemeral != ephemeral) return false;
  image = std::move(w.image);
  mount = std::move(w.mount);
  w = WarmDisk{};
  return true;
}

void drop_warm_disk() noexcept { warm_disk() = WarmDisk{}; }

void sync_running_disk(pid_t shim_pid, const std::string& mountpoint) {
  std::string path = "/proc/" + std::to_string(shim_pid) + "/root" + mountpoint;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  struct statfs sfs {};
  if (!fd || ::fstatfs(fd.get(), &sfs) != 0) throw_errno(ErrorKind::Storage, "open the running box's disk at " + path);
  if (sfs.f_type != EXT4_SUPER_MAGIC)
    throw Error(ErrorKind::Storage, "the running box's disk is not mounted at " + path + " in its shim's namespace");
  if (::syncfs(fd.get()) != 0) throw_errno(ErrorKind::Storage, "sync the running box's disk");
}

}  // namespace boxlite::engine::jail
