// boxlite-shim: one process per box. Usage:
//   boxlite-shim BOX_DIR [--ready-fd N] [--lifeline-fd N]
//   boxlite-shim --probe-kvm
// It reads BOX_DIR/shim.json, boots the box, writes "OK\n" (or "ERR <code>\n<message>")
// to the ready fd, then serves BOX_DIR/shim.sock until the box stops.
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <cstring>
#include <string>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/trace.hpp"
#include "engine/jail/jail.hpp"
#include "engine/vm/qemu.hpp"
#include "shim/shim.hpp"

using namespace boxlite;

namespace {

void report(int fd, const std::string& text) {
  if (fd < 0) return;
  try {
    write_all(fd, text.data(), text.size());
  } catch (const Error&) {
  }
  ::close(fd);
}

}  // namespace

namespace {
// A box that dies with its owner keeps the owner's session (a session of its own
// costs a scheduler autogroup), so it would inherit the terminal the owner runs in:
// a box could then print to it, read what the user types, or stop on SIGTTIN. The
// shim lets go of it before anything of the box exists.
void drop_controlling_terminal() {
  int fd = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return;  // none (ENXIO): the usual case
  ::ioctl(fd, TIOCNOTTY);
  ::close(fd);
}
}  // namespace

int main(int argc, char** argv) {
  boxlite::trace("shim: main");
  drop_controlling_terminal();
  // A guest or client that hangs up is an error on that channel, not our death.
  ::signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && std::strcmp(argv[1], "--probe-kvm") == 0) {
    auto r = engine::vm::probe_kvm_inprocess();
    std::printf("%s %.1f %s\n", r.usable ? "usable" : "unusable", r.probe_ms, r.reason.c_str());
    return r.usable ? 0 : 1;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: boxlite-shim BOX_DIR [--ready-fd N] [--lifeline-fd N]\n");
    return 2;
  }
  std::string box_dir = argv[1];
  int ready_fd = -1, lifeline_fd = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ready-fd") == 0) ready_fd = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--lifeline-fd") == 0) lifeline_fd = std::atoi(argv[i + 1]);
  }
  try {
    // QEMU must not inherit these: the runtime waits for EOF on the ready pipe.
    if (ready_fd >= 0) set_cloexec(ready_fd);
    if (lifeline_fd >= 0) set_cloexec(lifeline_fd);
    engine::ShimSpec spec = engine::spec_from_json(read_file(box_dir + "/shim.json"));
    // The jail's overlay and every mount under it live and die with this process.
    if (spec.engine == "jail") engine::jail::enter_private_mount_namespace();
    shim::Shim s(std::move(spec));
    s.boot();
    boxlite::trace("shim: booted");
    s.listen();
    std::string ok = "OK\n";
    const auto& st = s.boot_stages();
    ok += "STAGES " + std::to_string(st.box_spawn_ms) + " " + std::to_string(st.guest_boot_ms) + " " +
          std::to_string(st.container_init_ms) + "\n";
    for (const auto& w : s.warnings()) ok += "WARN " + w + "\n";
    report(ready_fd, ok);
    ready_fd = -1;
    s.serve(lifeline_fd);
  } catch (const Error& e) {
    std::fprintf(stderr, "boxlite-shim: %s\n", e.what());
    report(ready_fd, "ERR " + std::to_string(static_cast<int>(e.code())) + "\n" + e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boxlite-shim: %s\n", e.what());
    report(ready_fd, std::string("ERR 1\n") + e.what());
    return 1;
  }
  boxlite::trace("shim: exiting");
  return 0;
}
