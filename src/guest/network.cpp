#include "guest/network.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/etc_files.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"
#include "common/netif.hpp"

namespace boxlite::guest {
namespace {

// /etc as a directory: the image's own, or where it links to one (inside the box's
// root: the agent runs in it). Anything else there (a file, a dangling link: an
// image can ship either) is replaced by an empty directory, which is what a jail
// box sees there too (engine/jail's /etc layer hides it).
void ensure_etc_directory() {
  struct stat st;
  if (::stat("/etc", &st) == 0 && S_ISDIR(st.st_mode)) return;
  if (::lstat("/etc", &st) == 0 && ::unlink("/etc") != 0) throw_errno(ErrorKind::Network, "remove the image's /etc");
  if (::mkdir("/etc", 0755) != 0 && errno != EEXIST) throw_errno(ErrorKind::Network, "mkdir /etc");
}

// Replaces the file (never writing through a symlink the image put there).
void replace_file(const std::string& path, const std::string& text) {
  ensure_etc_directory();
  std::string tmp = path + ".boxlite-tmp";
  ::unlink(tmp.c_str());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd) throw_errno(ErrorKind::Network, "create " + tmp);
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw_errno(ErrorKind::Network, "write " + tmp);
  ::fchmod(fd.get(), 0644);
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno(ErrorKind::Network, "replace " + path);
}

// The secrets proxy's CA joins whatever trust stores the image has (Debian/Ubuntu,
// Fedora/RHEL, Alpine); with none, the Debian path is created.
void trust_ca(const std::string& pem) {
  static const char* const kBundles[] = {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                                         "/etc/ssl/cert.pem"};
  bool any = false;
  for (const char* path : kBundles) {
    struct stat st;
    if (::stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    any = true;
    try {
      if (read_file(path).find(pem) != std::string::npos) continue;  // a restart: already there
    } catch (const Error&) {
    }
    UniqueFd fd(::open(path, O_WRONLY | O_APPEND | O_CLOEXEC));
    if (!fd) throw_errno(ErrorKind::Network, std::string("open ") + path);
    std::string text = "\n" + pem;
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
      throw_errno(ErrorKind::Network, std::string("append to ") + path);
  }
  if (any) return;
  ::mkdir("/etc/ssl", 0755);
  ::mkdir("/etc/ssl/certs", 0755);
  replace_file(kBundles[0], pem);
}

}  // namespace

void configure_network(const proto::BoxConfig& cfg, bool vm) {
  if (vm) {
    if (int err = bring_interface_up("lo"); err != 0) throw_errno(ErrorKind::Network, "bring lo up", err);
  }
  if (!cfg.has_network()) return;
  const auto& n = cfg.network();
  if (n.configure_link()) {
    configure_ipv4_interface(n.interface(), n.address(), static_cast<int>(n.prefix_len()), n.gateway());
  }
  if (!n.etc_files_bound()) {  // a jail's shim has bound its own over them
    replace_file("/etc/resolv.conf", resolv_conf_text(n.dns()));
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    replace_file("/etc/hosts", hosts_file_text(n.address(), host, n.host_alias(), n.host_alias_name()));
  }
  if (!n.trusted_ca_pem().empty()) trust_ca(n.trusted_ca_pem());
}

}  // namespace boxlite::guest
