#include "core/paths.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/process.hpp"

namespace boxlite::core {

namespace {

// The home directory of `uid` in /etc/passwd. Not getpwuid: in the static CLI that
// would dlopen glibc's NSS modules, whose version need not match the libc linked in.
std::string passwd_home(uid_t uid) {
  auto text = read_file_if_present("/etc/passwd");
  if (!text) return "";
  for (const auto& line : split(*text, '\n')) {
    auto f = split(line, ':');
    if (f.size() >= 7 && f[2] == std::to_string(uid)) return f[5];
  }
  return "";
}

}  // namespace

std::string default_home() {
  if (const char* h = std::getenv("BOXLITE_HOME"); h && *h) return h;
  std::string home;
  if (const char* h = std::getenv("HOME"); h && *h) home = h;
  if (home.empty()) home = passwd_home(::getuid());
  if (home.empty()) {
    throw Error(ErrorKind::Config, "cannot find the home directory: HOME is unset and uid " +
                                       std::to_string(::getuid()) + " has no /etc/passwd entry; set BOXLITE_HOME");
  }
  return home + "/.boxlite";
}

void HomeLayout::create() const {
  for (const auto& d : {root, boxes(), images(), kernel_cache(), tmp(), locks()}) make_dirs(d, 0700);
  // Boxes come and go by the hundred: packed into one block group of an ext4 without
  // a journal, each new inode there skips every one freed in the last minute.
  spread_subdirectories(boxes());
}

HomeLayout HomeLayout::of_box_dir(const std::string& box_dir) {
  std::string boxes = box_dir.substr(0, box_dir.rfind('/'));
  return HomeLayout{boxes.substr(0, boxes.rfind('/'))};
}

std::string libexec_dir() {
  if (const char* d = std::getenv("BOXLITE_LIBEXEC_DIR"); d && *d) return d;
  if (std::string dir = own_executable_dir(); !dir.empty() && path_exists(dir + "/boxlite-shim")) return dir;
  // Linked into libboxlite.so: the shim sits beside it in the build tree, or in
  // <libdir>/boxlite once installed.
  Dl_info self{};
  if (::dladdr(reinterpret_cast<void*>(&libexec_dir), &self) != 0 && self.dli_fname) {
    std::string lib = self.dli_fname;
    std::string dir = lib.rfind('/') == std::string::npos ? "." : lib.substr(0, lib.rfind('/'));
    if (path_exists(dir + "/boxlite/boxlite-shim")) return dir + "/boxlite";
    if (path_exists(dir + "/boxlite-shim")) return dir;
  }
  return BOXLITE_BUILD_DIR;
}

}  // namespace boxlite::core
