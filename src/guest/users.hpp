// Resolves "user[:group]" against the container's /etc/passwd and /etc/group.
// The guest is static, so NSS is not available: the files are parsed directly.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace boxlite::guest {

struct Identity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary
  std::string home = "/";
  std::string name;
};

// Throws Error(InvalidArgument) for an unknown user or group name.
Identity resolve_identity(const std::string& spec, const std::string& passwd_path = "/etc/passwd",
                          const std::string& group_path = "/etc/group");

}  // namespace boxlite::guest
