#include "core/volumes.hpp"

#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <set>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite {
namespace {

// Mounting over these would hide or replace what the box's own system needs
// (the documented list).
const char* const kSystemDirs[] = {"/proc", "/sys", "/dev", "/boot", "/etc", "/bin", "/sbin", "/lib", "/lib64"};

[[noreturn]] void bad_mount_path(const std::string& path, const std::string& why) {
  throw Error(ErrorKind::InvalidArgument, "Invalid mount path '" + path + "' (" + why + ")");
}

void validate_guest_path(const std::string& g) {
  if (g.empty() || g[0] != '/') bad_mount_path(g, "must be absolute");
  if (g.find_first_not_of('/') == std::string::npos) bad_mount_path(g, "cannot mount to the root directory");
  if (g.find("//") != std::string::npos) bad_mount_path(g, "cannot contain consecutive slashes");
  if (g.find('\0') != std::string::npos || g.find(',') != std::string::npos || g.find(':') != std::string::npos) {
    bad_mount_path(g, "cannot contain NUL, ',' or ':'");
  }
  for (const auto& part : split(g.substr(1), '/')) {
    if (part == "." || part == "..") bad_mount_path(g, "cannot contain relative path components");
  }
  std::string trimmed = g.back() == '/' ? g.substr(0, g.size() - 1) : g;
  for (const char* sys : kSystemDirs) {
    std::string d = sys;
    if (trimmed == d || trimmed.rfind(d + "/", 0) == 0) bad_mount_path(g, "cannot mount to system directory");
  }
}

}  // namespace

void validate_volume(const VolumeSpec& v) {
  const std::string& h = v.host_path;
  if (h.empty() || h[0] != '/')
    throw Error(ErrorKind::InvalidArgument, "Invalid host path '" + h + "' (must be absolute)");
  struct stat st;
  if (::stat(h.c_str(), &st) != 0)
    throw_errno(ErrorKind::InvalidArgument, "volume host path '" + h + "' does not exist");
  if (!S_ISDIR(st.st_mode)) throw Error(ErrorKind::InvalidArgument, "volume host path '" + h + "' is not a directory");
  if (h.find(',') != std::string::npos) {
    // QEMU's -fsdev option syntax has no escape that survives every version.
    throw Error(ErrorKind::InvalidArgument, "volume host path '" + h + "' contains ',' which cannot be shared");
  }
  validate_guest_path(v.guest_path);
}

void validate_volumes(const std::vector<VolumeSpec>& volumes) {
  std::set<std::string> seen;
  for (const auto& v : volumes) {
    validate_volume(v);
    std::string g = v.guest_path.size() > 1 && v.guest_path.back() == '/'
                        ? v.guest_path.substr(0, v.guest_path.size() - 1)
                        : v.guest_path;
    if (!seen.insert(g).second) throw Error(ErrorKind::InvalidArgument, "two volumes are mounted at '" + g + "'");
  }
}

VolumeSpec parse_volume_flag(const std::string& flag) {
  auto parts = split(flag, ':');
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty() || parts[1].empty()) {
    throw Error(ErrorKind::InvalidArgument, "invalid volume '" + flag + "': expected HOST:GUEST[:ro|:rw]");
  }
  VolumeSpec v{parts[0], parts[1], false};
  if (parts.size() == 3) {
    if (parts[2] == "ro") {
      v.read_only = true;
    } else if (parts[2] != "rw") {
      throw Error(ErrorKind::InvalidArgument,
                  "invalid volume mode '" + parts[2] + "' in '" + flag + "': expected ro or rw");
    }
  }
  return v;
}

namespace {

bool read_only_flag(const nlohmann::json& j) {
  if (j.is_boolean()) return j.get<bool>();
  std::string type = j.is_string()           ? "str"
                     : j.is_number_integer() ? "int"
                     : j.is_number()         ? "float"
                     : j.is_null()           ? "NoneType"
                                             : "object";
  throw Error(ErrorKind::InvalidArgument, "argument 'volumes': '" + type + "' object cannot be cast as 'bool'");
}

std::string path_field(const nlohmann::json& j, const char* what) {
  if (!j.is_string()) throw Error(ErrorKind::InvalidArgument, std::string("volume ") + what + " path must be a string");
  return j.get<std::string>();
}

}  // namespace

VolumeSpec volume_from_json(const nlohmann::json& j) {
  VolumeSpec v;
  if (j.is_array()) {
    if (j.size() < 2 || j.size() > 3)
      throw Error(ErrorKind::InvalidArgument, "volumes tuples must be (host, guest[, read_only])");
    v.host_path = path_field(j[0], "host");
    v.guest_path = path_field(j[1], "guest");
    if (j.size() == 3) v.read_only = read_only_flag(j[2]);
    return v;
  }
  if (!j.is_object()) throw Error(ErrorKind::InvalidArgument, "volumes entries must be tuple or dict");
  auto pick = [&](const char* a, const char* b) -> const nlohmann::json* {
    if (j.contains(a)) return &j.at(a);
    if (j.contains(b)) return &j.at(b);
    return nullptr;
  };
  const auto* host = pick("host", "host_path");
  if (!host) throw Error(ErrorKind::InvalidArgument, "volume dict missing host/host_path");
  const auto* guest = pick("guest", "guest_path");
  if (!guest) throw Error(ErrorKind::InvalidArgument, "volume dict missing guest/guest_path");
  v.host_path = path_field(*host, "host");
  v.guest_path = path_field(*guest, "guest");
  if (const auto* ro = pick("read_only", "ro")) v.read_only = read_only_flag(*ro);
  return v;
}

}  // namespace boxlite
