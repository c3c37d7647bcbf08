#include "image/digest.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"
#include "common/sha256.hpp"

namespace boxlite::image::detail {

namespace {

bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::string digest_hex(const std::string& digest, const std::string& where) {
  constexpr std::string_view kPrefix = "sha256:";
  if (!digest.starts_with(kPrefix)) {
    throw Error(ErrorKind::Image,
                "unsupported digest '" + digest.substr(0, 80) + "' in " + where + " (only sha256:<hex> is supported)");
  }
  std::string hex = digest.substr(kPrefix.size());
  bool ok = hex.size() == 64;
  for (char c : hex) ok = ok && is_lower_hex(c);
  if (!ok) throw Error(ErrorKind::Image, "malformed digest '" + digest.substr(0, 80) + "' in " + where);
  return hex;
}

std::string sha256_fd(int fd, const std::string& what) {
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(ErrorKind::Image, "read " + what);
    }
    if (n == 0) break;
    h.update({buf.data(), static_cast<size_t>(n)});
  }
  return h.finish();
}

}  // namespace boxlite::image::detail
