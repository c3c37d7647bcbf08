// boxlite-net: started by the shim, one per box with a network.
//   boxlite-net --spec <box_dir>/shim.json --link stream|tap --link-fd N --ready-fd N
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/trace.hpp"
#include "net/netd.hpp"

int main(int argc, char** argv) {
  using namespace boxlite;
  boxlite::trace("net: main");
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the network goes with the box's shim
  ::signal(SIGPIPE, SIG_IGN);
  // Every flow the guest opens is a host socket here, with its buffers, outside the
  // box's memory cgroup: a box holds at most this many at once (a VM's QEMU, whose
  // libslirp does the same, runs under the usual 1024 too). Past it, a new
  // connection is refused (libslirp resets it) and a new UDP flow dropped.
  constexpr rlim_t kMaxOpenFiles = 1024;
  rlimit nofile{kMaxOpenFiles, kMaxOpenFiles};
  if (::setrlimit(RLIMIT_NOFILE, &nofile) != 0) std::perror("boxlite-net: setrlimit(RLIMIT_NOFILE)");
  net::NetdOptions o;
  std::string spec_path;
  try {
    for (int i = 1; i + 1 < argc; i += 2) {
      std::string k = argv[i], v = argv[i + 1];
      if (k == "--spec") {
        spec_path = v;
      } else if (k == "--link") {
        o.link = v == "tap" ? net::LinkKind::Tap : net::LinkKind::Stream;
      } else if (k == "--link-fd") {
        o.link_fd = std::stoi(v);
      } else if (k == "--ready-fd") {
        o.ready_fd = std::stoi(v);
      } else {
        throw Error(ErrorKind::InvalidArgument, "unknown option " + k);
      }
    }
    if (spec_path.empty() || o.link_fd < 0)
      throw Error(ErrorKind::InvalidArgument,
                  "usage: boxlite-net --spec FILE --link stream|tap --link-fd N --ready-fd N");
    auto spec = nlohmann::json::parse(read_file(spec_path));
    o.config = net::config_from_json(spec.at("net").dump());
    o.box_dir = spec.at("box_dir");
    net::run_netd(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boxlite-net: %s\n", e.what());
    if (o.ready_fd >= 0) (void)!::write(o.ready_fd, e.what(), std::strlen(e.what()));
    return 1;
  }
  return 0;
}
