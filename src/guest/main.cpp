// boxlite-guest: the agent inside every box. In a VM it is /init of the
// initramfs; for a jail it is the zygote (--jail-zygote FD) the shim starts, whose
// clone, the box's init, runs the agent in place (engine/jail/box_init.hpp).
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "engine/jail/box_init.hpp"
#include "guest/agent.hpp"
#include "guest/container.hpp"
#include "guest/jail_agent.hpp"
#include "guest/network.hpp"

using namespace boxlite;

namespace {

constexpr const char* kPortName = "boxlite.agent";

int run_vm() {
  try {
    guest::init_vm_phase1();
    std::string port = guest::find_virtio_port(kPortName);
    UniqueFd channel(::open(port.c_str(), O_RDWR | O_CLOEXEC));
    if (!channel) throw_errno(ErrorKind::Engine, "open " + port);
    guest::Agent agent(
        std::move(channel),
        [](const proto::BoxConfig& cfg) {
          guest::setup_vm_root(cfg);
          guest::limit_vm_box_processes(cfg);
          guest::apply_box_identity(cfg);
          guest::configure_network(cfg, true);
        },
        [] { guest::vm_power_off(); });
    agent.set_proc_swap({guest::ProcSwap::Mode::kMountHere});
    agent.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boxlite-guest: fatal: %s\n", e.what());
  }
  guest::vm_power_off();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--jail-zygote") == 0) {
    engine::jail::serve_zygote(std::atoi(argv[2]), {&guest::run_jail_agent, &guest::serve_first_process});
  }
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("boxlite-guest %s\n", BOXLITE_VERSION);
    return 0;
  }
  if (::getpid() != 1) {
    std::fprintf(stderr, "boxlite-guest: must run as PID 1 of a VM box (or as a jail's zygote)\n");
    return 2;
  }
  return run_vm();
}
