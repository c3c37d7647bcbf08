#include "image/copy_archive.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"
#include "image/apply.hpp"
#include "image/libarchive.hpp"
#include "image/safe_fs.hpp"

namespace boxlite::image {

namespace {

constexpr size_t kBlock = 512;
constexpr size_t kPieceBytes = 1u << 20;
// Deep enough for real trees; bounds recursion (stack and one fd per level).
constexpr int kMaxDepth = 512;

// ---------------------------------------------------------------------------
// A minimal pax writer. libarchive's writer is not used because the static guest
// agent cannot link it alone: its pax format module pulls in the table of every
// writer format, and through xar libxml2 and ICU (megabytes in every initramfs).
// This writes what libarchive (the reader at the other end) reads: ustar headers,
// with a pax extended header before an entry whose path, link target, size, owner
// or mtime (nanoseconds) a ustar header cannot hold.

struct Header {
  std::string path;  // archive path, without the trailing '/' of a directory
  char type = '0';   // '0' file, '1' hardlink, '2' symlink, '5' directory
  mode_t mode = 0;
  uint64_t uid = 0, gid = 0;
  uint64_t size = 0;
  timespec mtime{};
  std::string link;  // symlink target or hardlink path
};

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80 && c != '\0'; });
}

// width-1 octal digits and a NUL; false when v does not fit.
bool put_octal(char* field, size_t width, uint64_t v) {
  char digits[32];
  size_t n = width - 1;
  for (size_t i = n; i-- > 0;) {
    digits[i] = static_cast<char>('0' + (v & 7));
    v >>= 3;
  }
  if (v != 0) return false;
  std::memcpy(field, digits, n);
  field[n] = '\0';
  return true;
}

// One pax record: "LEN key=value\n", where LEN counts the whole record, itself included.
void add_record(std::string& out, std::string_view key, std::string_view value) {
  size_t base = key.size() + value.size() + 3;  // ' ', '=', '\n'
  size_t len = base + 1;
  while (std::to_string(len).size() + base != len) len = std::to_string(len).size() + base;
  out += std::to_string(len);
  out += ' ';
  out += key;
  out += '=';
  out += value;
  out += '\n';
}

std::string pax_time(const timespec& t) {
  std::string s = std::to_string(t.tv_sec);
  if (t.tv_nsec != 0 && t.tv_sec >= 0) {
    char frac[16];
    std::snprintf(frac, sizeof frac, ".%09ld", t.tv_nsec);
    s += frac;
  }
  return s;
}

class PaxWriter {
 public:
  explicit PaxWriter(const std::function<void(std::string_view)>& sink) : sink_(sink) { buf_.reserve(kPieceBytes); }

  void header(const Header& h) {
    std::string name = h.type == '5' ? h.path + "/" : h.path;
    std::string pax;
    bool binary = !is_ascii(h.path) || !is_ascii(h.link);
    // Linux names are bytes, not necessarily UTF-8: BINARY makes the reader keep
    // them as they are instead of converting from UTF-8.
    if (binary) add_record(pax, "hdrcharset", "BINARY");
    std::string prefix;
    if (binary || name.size() > 100) {
      if (!binary && name.size() <= 256) {
        // ustar's prefix field holds up to 155 bytes before a '/'.
        for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
          if (slash <= 155 && name.size() - slash - 1 <= 100 && name.size() - slash - 1 > 0) {
            prefix = name.substr(0, slash);
            break;
          }
        }
      }
      if (prefix.empty()) {
        add_record(pax, "path", name);
      } else {
        name = name.substr(prefix.size() + 1);
      }
    }
    if (binary || h.link.size() > 100) add_record(pax, "linkpath", h.link);

    char block[kBlock] = {};
    bool big_size = !put_octal(block + 124, 12, h.size);
    if (big_size) add_record(pax, "size", std::to_string(h.size));
    bool exact_time = h.mtime.tv_sec >= 0 && h.mtime.tv_nsec == 0 &&
                      put_octal(block + 136, 12, static_cast<uint64_t>(h.mtime.tv_sec));
    if (!exact_time) add_record(pax, "mtime", pax_time(h.mtime));
    if (!put_octal(block + 108, 8, h.uid)) add_record(pax, "uid", std::to_string(h.uid));
    if (!put_octal(block + 116, 8, h.gid)) add_record(pax, "gid", std::to_string(h.gid));

    if (!pax.empty()) {
      char x[kBlock] = {};
      fill_common(x, "././@PaxHeader", "", 0644, 0, 0, pax.size(), h.mtime, 'x', "");
      append(std::string_view(x, kBlock));
      append(pax);
      pad(pax.size());
    }
    fill_common(block, name, prefix, h.mode, h.uid, h.gid, big_size ? 0 : h.size, h.mtime, h.type, h.link);
    append(std::string_view(block, kBlock));
  }

  // File data, as it is read; end_data pads the last block.
  void data(const char* p, size_t n) {
    if (buf_.size() + n <= kPieceBytes) {
      buf_.append(p, n);
      if (buf_.size() == kPieceBytes) flush();
      return;
    }
    flush();
    sink_(std::string_view(p, n));
  }
  void end_data(uint64_t size) { pad(size); }

  void finish() {
    buf_.append(2 * kBlock, '\0');
    flush();
  }

 private:
  // Fills a ustar header (block must be zeroed, except numeric fields already set
  // by the caller, which are rewritten here only when they fit).
  static void fill_common(char* block, const std::string& name, const std::string& prefix, mode_t mode, uint64_t uid,
                          uint64_t gid, uint64_t size, const timespec& mtime, char type, const std::string& link) {
    std::memcpy(block, name.data(), std::min<size_t>(name.size(), 100));
    put_octal(block + 100, 8, mode & 07777);
    if (!put_octal(block + 108, 8, uid)) put_octal(block + 108, 8, 0);
    if (!put_octal(block + 116, 8, gid)) put_octal(block + 116, 8, 0);
    if (!put_octal(block + 124, 12, size)) put_octal(block + 124, 12, 0);
    uint64_t secs = mtime.tv_sec > 0 ? static_cast<uint64_t>(mtime.tv_sec) : 0;
    if (!put_octal(block + 136, 12, secs)) put_octal(block + 136, 12, 0);
    block[156] = type;
    std::memcpy(block + 157, link.data(), std::min<size_t>(link.size(), 100));
    std::memcpy(block + 257, "ustar", 6);  // magic with its NUL
    std::memcpy(block + 263, "00", 2);
    put_octal(block + 329, 8, 0);
    put_octal(block + 337, 8, 0);
    std::memcpy(block + 345, prefix.data(), std::min<size_t>(prefix.size(), 155));
    std::memset(block + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < kBlock; ++i) sum += static_cast<unsigned char>(block[i]);
    std::snprintf(block + 148, 8, "%06o", sum);  // six digits, NUL, and the space left from above
    block[155] = ' ';
  }

  void pad(uint64_t size) {
    size_t rem = static_cast<size_t>(size % kBlock);
    if (rem) buf_.append(kBlock - rem, '\0');
    if (buf_.size() >= kPieceBytes) flush();
  }
  void append(std::string_view d) {
    buf_.append(d);
    if (buf_.size() >= kPieceBytes) flush();
  }
  void flush() {
    if (buf_.empty()) return;
    sink_(buf_);
    buf_.clear();
  }

  const std::function<void(std::string_view)>& sink_;
  std::string buf_;
};

// ---------------------------------------------------------------------------
// Walking the source.

bool vanished(int err) { return err == ENOENT || err == ENOTDIR || err == ELOOP; }

// The kernel's own filesystems (/proc, /sys, cgroups, ...): their files are views of
// kernel state, with sizes that lie and reads that fail, and copying "/" must not
// descend into them. Their directories are copied empty.
bool is_kernel_fs(int dir_fd) {
  struct statfs sf;
  if (::fstatfs(dir_fd, &sf) != 0) return false;
  switch (static_cast<unsigned long>(sf.f_type)) {
    case 0x9fa0:      // proc
    case 0x62656572:  // sysfs
    case 0x27e0eb:    // cgroup
    case 0x63677270:  // cgroup2
    case 0x1cd1:      // devpts
    case 0x64626720:  // debugfs
    case 0x74726163:  // tracefs
    case 0x73636673:  // securityfs
    case 0xcafe4a11:  // bpf
    case 0x6e736673:  // nsfs
      return true;
    default: return false;
  }
}

class Archiver {
 public:
  explicit Archiver(PaxWriter& w) : w_(w), buf_(kPieceBytes) {}

  void top(const std::string& src, const CopyWriteOptions& o, const std::string& name) {
    struct stat st;
    if ((o.follow_symlinks ? ::stat(src.c_str(), &st) : ::lstat(src.c_str(), &st)) != 0) {
      int err = errno;
      if (err == ENOENT || err == ENOTDIR) {
        if (err == ENOTDIR && copy_wants_dir(src)) throw Error(ErrorKind::InvalidArgument, src + ": not a directory");
        throw Error(ErrorKind::NotFound, src + ": no such file or directory");
      }
      throw_errno(ErrorKind::Storage, src, err);
    }
    int nofollow = o.follow_symlinks ? 0 : O_NOFOLLOW;
    if (S_ISDIR(st.st_mode)) {
      UniqueFd fd(::open(src.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | nofollow));
      if (!fd) throw_errno(ErrorKind::Storage, "open " + src);
      directory(fd.get(), name, 0);
    } else if (S_ISREG(st.st_mode)) {
      if (copy_wants_dir(src)) throw Error(ErrorKind::InvalidArgument, src + ": not a directory");
      UniqueFd fd(::open(src.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC | nofollow));
      if (!fd) throw_errno(ErrorKind::Storage, "open " + src);
      if (!file(fd.get(), name)) throw Error(ErrorKind::Storage, src + " changed while it was being copied");
    } else if (S_ISLNK(st.st_mode)) {
      std::string target;
      if (read_link(AT_FDCWD, src, target) < 0) throw_errno(ErrorKind::Storage, "readlink " + src);
      symlink(st, name, target);
    } else {
      throw Error(ErrorKind::InvalidArgument, src + ": cannot copy a device, fifo or socket");
    }
  }

  const CopyWriteStats& stats() const { return stats_; }

 private:
  static bool copy_wants_dir(const std::string& p) { return p.size() > 1 && (p.ends_with('/') || p.ends_with("/.")); }

  static Header base_header(const struct stat& st, std::string path, char type) {
    Header h;
    h.path = std::move(path);
    h.type = type;
    h.mode = st.st_mode & 07777;
    h.uid = st.st_uid;
    h.gid = st.st_gid;
    h.mtime = st.st_mtim;
    return h;
  }

  // The target of name in dir_fd; -1 with errno when it cannot be read.
  static ssize_t read_link(int dir_fd, const std::string& name, std::string& out) {
    out.assign(4097, '\0');
    ssize_t n = ::readlinkat(dir_fd, name.c_str(), out.data(), out.size());
    if (n < 0) return n;
    if (static_cast<size_t>(n) == out.size())
      throw Error(ErrorKind::Storage, "symlink " + name + ": target over 4096 bytes");
    out.resize(static_cast<size_t>(n));
    return n;
  }

  // dir_fd: the directory itself, opened O_RDONLY.
  void directory(int dir_fd, const std::string& path, int depth) {
    if (depth > kMaxDepth)
      throw Error(ErrorKind::Storage, path + ": deeper than " + std::to_string(kMaxDepth) + " levels");
    struct stat st;
    if (::fstat(dir_fd, &st) != 0) throw_errno(ErrorKind::Storage, "stat " + path);
    w_.header(base_header(st, path, '5'));
    ++stats_.dirs;
    if (is_kernel_fs(dir_fd)) return;
    std::vector<std::string> names = detail::list_dir(dir_fd);
    std::sort(names.begin(), names.end());  // the same tree gives the same archive
    for (const auto& n : names) child(dir_fd, n, path + "/" + n, depth);
  }

  // Everything below the source is opened with O_NOFOLLOW relative to the fd of its
  // directory: a concurrent writer can make an entry vanish or change type (it is
  // then left out), never make the walk leave the source.
  void child(int dir_fd, const std::string& name, const std::string& path, int depth) {
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (vanished(errno)) return;
      throw_errno(ErrorKind::Storage, "stat " + path);
    }
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) {
        if (vanished(errno)) return;
        throw_errno(ErrorKind::Storage, "open " + path);
      }
      directory(sub.get(), path, depth + 1);
    } else if (S_ISREG(st.st_mode)) {
      if (st.st_nlink > 1) {
        auto it = links_.find({st.st_dev, st.st_ino});
        if (it != links_.end()) {
          Header h = base_header(st, path, '1');
          h.link = it->second;
          w_.header(h);
          ++stats_.hardlinks;
          return;
        }
      }
      UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
      if (!fd) {
        if (vanished(errno)) return;
        throw_errno(ErrorKind::Storage, "open " + path);
      }
      file(fd.get(), path);
    } else if (S_ISLNK(st.st_mode)) {
      std::string target;
      if (read_link(dir_fd, name, target) < 0) {
        if (vanished(errno) || errno == EINVAL) return;  // gone, or no longer a link
        throw_errno(ErrorKind::Storage, "readlink " + path);
      }
      symlink(st, path, target);
    } else {
      ++stats_.skipped;
    }
  }

  // false when fd is no longer a regular file (swapped after the stat).
  bool file(int fd, const std::string& path) {
    struct stat st;
    if (::fstat(fd, &st) != 0) throw_errno(ErrorKind::Storage, "stat " + path);
    if (!S_ISREG(st.st_mode)) return false;
    Header h = base_header(st, path, '0');
    h.size = static_cast<uint64_t>(st.st_size);
    w_.header(h);
    uint64_t left = h.size;
    while (left > 0) {
      ssize_t n = ::read(fd, buf_.data(), std::min<uint64_t>(left, buf_.size()));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw_errno(ErrorKind::Storage, "read " + path);
      }
      if (n == 0) {  // shrank: the header promised `size` bytes
        std::fill(buf_.begin(), buf_.end(), '\0');
        while (left > 0) {
          size_t z = static_cast<size_t>(std::min<uint64_t>(left, buf_.size()));
          w_.data(buf_.data(), z);
          left -= z;
        }
        break;
      }
      w_.data(buf_.data(), static_cast<size_t>(n));
      left -= static_cast<uint64_t>(n);
    }
    w_.end_data(h.size);
    ++stats_.files;
    stats_.bytes += h.size;
    if (st.st_nlink > 1) links_.emplace(std::make_pair(st.st_dev, st.st_ino), path);
    return true;
  }

  void symlink(const struct stat& st, const std::string& path, const std::string& target) {
    Header h = base_header(st, path, '2');
    h.link = target;
    w_.header(h);
    ++stats_.symlinks;
  }

  PaxWriter& w_;
  std::vector<char> buf_;
  std::map<std::pair<dev_t, ino_t>, std::string> links_;
  CopyWriteStats stats_;
};

// ---------------------------------------------------------------------------
// Placing an archive (extract_copy_archive).

enum class DestKind { Dir, Missing, NonDir };

struct Dest {
  UniqueFd parent;  // O_PATH: the directory holding dest's last component
  std::string parent_path;
  std::string name;  // dest's last component ("" when dest is "/")
  DestKind kind = DestKind::Missing;
  UniqueFd dir;             // kind == Dir: dest itself, O_RDONLY
  bool dir_syntax = false;  // dest ended in "/" or "/.": it must be a directory
};

// dest is a path the caller named: its parents are resolved as any path is (a
// symlink among them is the caller's own); its last component is followed only to
// find out whether it leads to a directory to copy into.
Dest resolve_dest(const std::string& dest) {
  Dest d;
  std::string p = dest;
  while (p.size() > 1) {
    if (p.ends_with('/') || p.ends_with("/.")) {
      p.pop_back();  // "a/." leaves "a/", whose '/' goes next round
    } else {
      break;
    }
    d.dir_syntax = true;
  }
  if (p == "." || p == "/") d.dir_syntax = true;
  std::string parent;
  if (p == "/" || p == ".") {
    parent = p;
  } else {
    auto slash = p.rfind('/');
    parent = slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
    d.name = slash == std::string::npos ? p : p.substr(slash + 1);
    if (d.name == "..") {  // "a/.." names a directory whose name we do not know: copy into it
      parent = p;
      d.name.clear();
    }
  }
  d.parent_path = parent;
  d.parent = UniqueFd(::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!d.parent) {
    if (errno == ENOENT || errno == ENOTDIR)
      throw Error(ErrorKind::NotFound, "the directory " + parent + " does not exist");
    throw_errno(ErrorKind::Storage, "open " + parent);
  }
  if (d.name.empty()) {
    d.kind = DestKind::Dir;
    d.dir = UniqueFd(::openat(d.parent.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!d.dir) throw_errno(ErrorKind::Storage, "open " + parent);
    return d;
  }
  struct stat st;
  if (::fstatat(d.parent.get(), d.name.c_str(), &st, 0) == 0 && S_ISDIR(st.st_mode)) {
    d.kind = DestKind::Dir;
    d.dir = UniqueFd(::openat(d.parent.get(), d.name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!d.dir) throw_errno(ErrorKind::Storage, "open " + dest);
  } else if (::fstatat(d.parent.get(), d.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    d.kind = DestKind::NonDir;  // a file, or a symlink to one (replaced, never written through)
  } else if (errno == ENOENT) {
    d.kind = DestKind::Missing;
  } else {
    throw_errno(ErrorKind::Storage, "stat " + dest);
  }
  return d;
}

// The directory `name` in dir_fd, created (0700 until its metadata is applied) when
// missing; never through a symlink.
UniqueFd make_top_dir(int dir_fd, const std::string& name, const std::string& what) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      throw Error(ErrorKind::AlreadyExists, "cannot overwrite the non-directory " + what + " with a directory");
    }
  } else if (errno != ENOENT) {
    throw_errno(ErrorKind::Storage, "stat " + what);
  } else if (::mkdirat(dir_fd, name.c_str(), 0700) != 0) {
    throw_errno(ErrorKind::Storage, "mkdir " + what);
  }
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) throw_errno(ErrorKind::Storage, "open " + what);
  return fd;
}

std::string join(const std::string& dir, const std::string& name) {
  return dir.ends_with('/') ? dir + name : dir + "/" + name;
}

}  // namespace

std::string copy_top_name(const std::string& path) {
  detail::Components c = detail::clean_path(path);
  return c.empty() ? "root" : c.back();
}

bool copy_wants_contents(const std::string& path) {
  return path == "." || path.ends_with("/.") || detail::clean_path(path).empty();
}

CopyWriteStats write_copy_archive(const std::string& src, const CopyWriteOptions& opts,
                                  const std::function<void(std::string_view)>& sink) {
  if (src.empty()) throw Error(ErrorKind::InvalidArgument, "copy: the source path is empty");
  std::string name = opts.top_name.empty() ? copy_top_name(src) : opts.top_name;
  if (name.find('/') != std::string::npos || name == "." || name == "..") {
    throw Error(ErrorKind::InvalidArgument, "copy: invalid archive name '" + name + "'");
  }
  PaxWriter w(sink);
  Archiver a(w);
  a.top(src, opts, name);
  w.finish();
  return a.stats();
}

UnpackStats extract_copy_archive(struct archive* reader, const std::string& dest, const CopyExtractOptions& opts) {
  std::string label = "copy to " + dest;
  if (dest.empty()) throw Error(ErrorKind::InvalidArgument, "copy: the destination path is empty");
  archive_entry* first = nullptr;
  int r = la::archive_read_next_header(reader, &first);
  if (r == ARCHIVE_EOF) throw Error(ErrorKind::Storage, label + ": the copy archive is empty");
  if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
    throw Error(ErrorKind::Storage, label + ": read the copy archive: " + detail::archive_error_text(reader));
  }
  std::string raw = detail::entry_path(first);
  detail::Components top = detail::clean_path(raw);
  if (top.size() != 1)
    throw Error(ErrorKind::Storage,
                label + ": the archive's first entry '" + detail::shorten(raw) + "' is not one name");
  if (detail::entry_hardlink(first))
    throw Error(ErrorKind::Storage, label + ": the archive's first entry is a hardlink");
  if (!opts.expected_top.empty() && top[0] != opts.expected_top) {
    throw Error(ErrorKind::Storage, label + ": the archive holds '" + detail::shorten(top[0]) + "' where '" +
                                        detail::shorten(opts.expected_top) + "' was asked for");
  }
  auto type = la::archive_entry_filetype(first);
  if (type != AE_IFDIR && type != AE_IFREG && type != AE_IFLNK) {
    throw Error(ErrorKind::Storage, label + ": the archive's first entry has unsupported type " + std::to_string(type));
  }

  Dest d = resolve_dest(dest);
  detail::CopyMode mode;
  mode.top = top[0];
  mode.overwrite = opts.overwrite;
  mode.strip_setid = opts.strip_setid;
  UniqueFd root;
  if (type == AE_IFDIR) {
    switch (d.kind) {
      case DestKind::NonDir:
        throw Error(ErrorKind::InvalidArgument, "cannot copy a directory onto the non-directory " + dest);
      case DestKind::Missing:
        root = make_top_dir(d.parent.get(), d.name, dest);
        mode.top_meta = true;
        mode.root_display = dest;
        break;
      case DestKind::Dir:
        if (opts.include_parent) {
          mode.root_display = join(dest, mode.top);
          root = make_top_dir(d.dir.get(), mode.top, mode.root_display);
          mode.top_meta = true;
        } else {
          root = std::move(d.dir);  // contents only: dest keeps its own mode and times
          mode.root_display = dest;
        }
        break;
    }
  } else {
    switch (d.kind) {
      case DestKind::Dir:
        root = std::move(d.dir);
        mode.single_name = mode.top;
        mode.root_display = dest;
        break;
      case DestKind::NonDir:
        if (d.dir_syntax) throw Error(ErrorKind::InvalidArgument, dest + " is not a directory");
        root = std::move(d.parent);
        mode.single_name = d.name;
        mode.root_display = d.parent_path;
        break;
      case DestKind::Missing:
        if (d.dir_syntax) throw Error(ErrorKind::NotFound, "the directory " + dest + " does not exist");
        root = std::move(d.parent);
        mode.single_name = d.name;
        mode.root_display = d.parent_path;
        break;
    }
  }
  return detail::apply_archive(std::move(root), reader, label, detail::ApplyMode{std::nullopt, mode}, first);
}

}  // namespace boxlite::image
