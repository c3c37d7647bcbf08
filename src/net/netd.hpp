// boxlite-net: the user-mode network of one box (libslirp), between the engine's
// Ethernet link and the host. A separate process from the shim: libslirp (and
// glib) exist only as shared libraries in Debian while the shim is static, and a
// process of its own keeps the code that parses hostile guest frames apart.
#pragma once

#include <string>

#include "net/config.hpp"

namespace boxlite::net {

enum class LinkKind {
  Stream,  // QEMU -netdev stream: frames prefixed by a 4-byte big-endian length
  Tap,     // a TAP fd: one read or write per frame
};

struct NetdOptions {
  NetConfig config;
  std::string box_dir;
  LinkKind link = LinkKind::Stream;
  int link_fd = -1;   // Stream: a listening unix socket QEMU connects to; Tap: the TAP fd
  int ready_fd = -1;  // "ok\n" once serving, or the reason it could not start
};

// Runs until the link closes. Setup errors are reported on ready_fd and thrown.
void run_netd(const NetdOptions& o);

}  // namespace boxlite::net
