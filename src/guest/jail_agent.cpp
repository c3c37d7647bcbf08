#include "guest/jail_agent.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <exception>

#include "common/error.hpp"
#include "guest/agent.hpp"
#include "guest/container.hpp"
#include "guest/network.hpp"

namespace boxlite::guest {

int run_jail_agent(int channel_fd, int first_process_fd, int first_process_pid) {
  // A copy of the shim's zygote until now: say who we are.
  ::prctl(PR_SET_NAME, "boxlite-guest");
  // The box's root shares the agent's uid: not dumpable, its memory, descriptors
  // and maps are out of that root's reach (no CAP_SYS_PTRACE) should it ever see
  // the agent (the box's /proc shows only the box's PID namespace). The commands
  // it execs are dumpable again.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  // The box's commands must not get the host's channel (they could forge the
  // agent's frames), nor the first process's socket.
  for (int fd : {channel_fd, first_process_fd}) {
    if (fd >= 0 && ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
      std::perror("boxlite-guest: inherited fd");
      return 1;
    }
  }
  try {
    Agent agent(
        UniqueFd(channel_fd),
        [](const proto::BoxConfig& cfg) {
          apply_box_identity(cfg);
          configure_network(cfg, false);
        },
        [] { std::_Exit(0); });
    agent.set_waiting_first_process(first_process_pid, UniqueFd(first_process_fd));
    agent.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boxlite-guest: fatal: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace boxlite::guest
