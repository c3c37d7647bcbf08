#include "guest/lookup.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/io.hpp"

namespace boxlite::guest {

std::string path_in_dir(const std::string& dir, const std::string& path) {
  if (path.starts_with('/')) return path;
  return dir.ends_with('/') ? dir + path : dir + "/" + path;
}

std::string find_in_path(const std::string& file, const std::string& path_var, const std::string& dir) {
  auto executable = [&dir](const std::string& path) {
    struct stat st;
    std::string at = path_in_dir(dir, path);
    return ::stat(at.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
  };
  if (file.find('/') != std::string::npos) return executable(file) ? file : "";
  for (const auto& entry : split(path_var, ':')) {
    std::string candidate = entry.empty() ? file : path_in_dir(entry, file);
    if (executable(candidate)) return candidate;
  }
  return "";
}

bool ids_mapped(uid_t uid, gid_t gid) {
  static const int probe = ::memfd_create("boxlite-id-probe", MFD_CLOEXEC);
  return probe < 0 || ::fchown(probe, uid, gid) == 0 || errno != EINVAL;
}

}  // namespace boxlite::guest
