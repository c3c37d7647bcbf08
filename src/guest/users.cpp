#include "guest/users.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <optional>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"

namespace boxlite::guest {
namespace {

std::optional<unsigned long> parse_id(const std::string& s) {
  unsigned long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty() || v > 0xfffffffeUL) return std::nullopt;
  return v;
}

// More than any real passwd or group file; the image is hostile and the agent must
// not read /dev/zero (a symlink to it) into memory until the box is OOM-killed.
constexpr off_t kMaxDbBytes = 16 << 20;

// `names_needed`: a name is to be looked up in it. Otherwise one too large is as
// good as none: numeric users still run (without a home from it).
std::vector<std::vector<std::string>> read_db(const std::string& path, bool names_needed) {
  std::vector<std::vector<std::string>> rows;
  // O_NONBLOCK: a FIFO there must not hang the agent.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat st {};
  // An image without /etc/passwd (or with a device or FIFO there) still runs numeric users.
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return rows;
  if (st.st_size > kMaxDbBytes) {
    if (!names_needed) return rows;
    throw Error(ErrorKind::InvalidArgument, "the box's " + path + " is " + std::to_string(st.st_size) +
                                                " bytes, over the " + std::to_string(kMaxDbBytes >> 20) +
                                                " MiB a user database may have");
  }
  std::string text = read_up_to(fd.get(), static_cast<size_t>(st.st_size), path);
  for (const auto& line : split(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    rows.push_back(split(line, ':'));
  }
  return rows;
}

}  // namespace

Identity resolve_identity(const std::string& spec, const std::string& passwd_path, const std::string& group_path) {
  Identity id;
  std::string user = spec, group;
  if (auto colon = spec.find(':'); colon != std::string::npos) {
    user = spec.substr(0, colon);
    group = spec.substr(colon + 1);
  }
  if (user.empty()) user = "0";
  bool user_by_name = !parse_id(user), group_by_name = !group.empty() && !parse_id(group);
  auto passwd = read_db(passwd_path, user_by_name);
  auto groups = read_db(group_path, user_by_name || group_by_name);

  bool found = false;
  auto numeric_user = parse_id(user);
  for (const auto& row : passwd) {
    if (row.size() < 7) continue;
    bool match = numeric_user ? (parse_id(row[2]) == numeric_user) : (row[0] == user);
    if (!match) continue;
    auto uid = parse_id(row[2]);
    auto gid = parse_id(row[3]);
    if (!uid || !gid) continue;
    id.uid = static_cast<uid_t>(*uid);
    id.gid = static_cast<gid_t>(*gid);
    id.home = row[5].empty() ? "/" : row[5];
    id.name = row[0];
    found = true;
    break;
  }
  if (!found) {
    if (!numeric_user) {
      throw Error(ErrorKind::InvalidArgument, "unable to find user " + user + ": no matching entries in passwd file");
    }
    id.uid = static_cast<uid_t>(*numeric_user);
    id.gid = id.uid;
  }
  if (!group.empty()) {
    auto numeric_group = parse_id(group);
    bool gfound = false;
    for (const auto& row : groups) {
      if (row.size() < 3) continue;
      if (numeric_group ? parse_id(row[2]) == numeric_group : row[0] == group) {
        if (auto gid = parse_id(row[2])) {
          id.gid = static_cast<gid_t>(*gid);
          gfound = true;
          break;
        }
      }
    }
    if (!gfound) {
      if (!numeric_group) {
        throw Error(ErrorKind::InvalidArgument,
                    "unable to find group " + group + ": no matching entries in group file");
      }
      id.gid = static_cast<gid_t>(*numeric_group);
    }
  }
  id.groups.push_back(id.gid);
  if (!id.name.empty()) {
    for (const auto& row : groups) {
      if (row.size() < 4) continue;
      for (const auto& member : split(row[3], ',')) {
        if (member != id.name) continue;
        if (auto gid = parse_id(row[2]); gid && static_cast<gid_t>(*gid) != id.gid)
          id.groups.push_back(static_cast<gid_t>(*gid));
      }
    }
  }
  return id;
}

}  // namespace boxlite::guest
