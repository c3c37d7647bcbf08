// boxlite-guest: the agent inside every box. In a VM it is /init of the
// initramfs; in a jail it is PID 1 of the box's PID namespace, given its channel
// as an inherited fd (--channel-fd N).
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "guest/agent.hpp"
#include "guest/container.hpp"
#include "guest/network.hpp"

using namespace boxlite;

namespace {

constexpr const char* kPortName = "boxlite.agent";

int run_vm() {
  try {
    guest::init_vm_phase1();
    std::string port = guest::find_virtio_port(kPortName);
    UniqueFd channel(::open(port.c_str(), O_RDWR | O_CLOEXEC));
    if (!channel) throw_errno(ErrorCode::Engine, "open " + port);
    guest::Agent agent(
        std::move(channel),
        [](const proto::BoxConfig& cfg) {
          guest::setup_vm_root(cfg);
          guest::apply_box_identity(cfg);
          guest::configure_network(cfg, true);
        },
        [] { guest::vm_power_off(); });
    agent.set_proc_swap({guest::ProcSwap::Mode::kMountHere, -1}, UniqueFd());
    agent.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boxlite-guest: fatal: %s\n", e.what());
  }
  guest::vm_power_off();
}

int run_jail(int channel_fd, int proc_gate_fd) {
  // Exec'ed from an fd, the kernel named us after it ("3"): say who we are.
  ::prctl(PR_SET_NAME, "boxlite-guest");
  // The box's root shares the agent's uid: not dumpable, its memory, descriptors
  // and maps are out of that root's reach (no CAP_SYS_PTRACE) should it ever see
  // the agent (the box's /proc shows only the box's PID namespace). The commands
  // it execs are dumpable again.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  // Inherited without CLOEXEC: the box's commands must not get the host's
  // channel (they could forge the agent's frames), nor the /proc helper's gate.
  for (int fd : {channel_fd, proc_gate_fd}) {
    if (fd >= 0 && ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
      std::perror("boxlite-guest: inherited fd");
      return 1;
    }
  }
  try {
    guest::Agent agent(
        UniqueFd(channel_fd),
        [](const proto::BoxConfig& cfg) {
          guest::apply_box_identity(cfg);
          guest::configure_network(cfg, false);
        },
        [] { std::_Exit(0); });
    if (proc_gate_fd >= 0)
      agent.set_proc_swap({guest::ProcSwap::Mode::kAskHelper, proc_gate_fd}, UniqueFd(proc_gate_fd));
    agent.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boxlite-guest: fatal: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int channel_fd = -1, proc_gate_fd = -1;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--channel-fd") == 0) channel_fd = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--proc-gate-fd") == 0) proc_gate_fd = std::atoi(argv[i + 1]);
  }
  if (channel_fd >= 0) return run_jail(channel_fd, proc_gate_fd);
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("boxlite-guest %s\n", BOXLITE_VERSION);
    return 0;
  }
  if (::getpid() != 1) {
    std::fprintf(stderr, "boxlite-guest: must run as PID 1 of a box (or with --channel-fd N)\n");
    return 2;
  }
  return run_vm();
}
