// boxlite-shim's program, which main.cpp runs. Usage:
//   boxlite-shim --box-dir-fd N [--ready-fd N] [--go-fd N] [--lifeline-fd N]
//                [--warm-disk TEMPLATE --warm-disk-ephemeral 0|1]
//   boxlite-shim --probe-kvm
// It is started before its box exists (core/shim_launch.hpp): it reads the box
// directory BOX_DIR from fd N up to EOF (nothing: exit quietly), writes its output
// to BOX_DIR/shim.log, reads BOX_DIR/shim.json, boots the box, writes "OK\n" (or
// "ERR " and the error, encode_error's) to the ready fd, then serves BOX_DIR/shim.sock until the
// box stops. With --go-fd, it configures the box (which starts its main command)
// only once the runtime writes "g" there (ShimLaunch::go).
#include "shim/shim_main.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <cstring>
#include <filesystem>
#include <string>

#include "common/error.hpp"
#include "common/file_lock.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "common/trace.hpp"
#include "engine/jail/disk.hpp"
#include "engine/jail/jail.hpp"
#include "engine/vm/qemu.hpp"
#include "shim/shim.hpp"

using namespace boxlite;

namespace {

std::string failed(const Error& e) { return engine::encode_ready_report({e, {}, {}}); }

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
// stdout and stderr into the box's shim log, as the runtime used to open them.
bool redirect_output_to(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = ::dup2(fd, 1) == 1 && ::dup2(fd, 2) == 2;
  ::close(fd);
  return ok;
}

// A shim started before its box was exec'd without the box directory, which ps
// and pgrep -f (and our tests' leak checks) look for. The runtime passed an
// argument of spaces as room for it: the command line becomes one title naming
// the box, written over the whole argument area as setproctitle(3) does (the
// kernel then shows it up to its NUL, since the area's last byte is not one).
// prctl(PR_SET_MM_ARG_START) would need CAP_SYS_RESOURCE, which hosts may not give.
void name_box_in_cmdline(const std::string& box_dir, int argc, char** argv) {
  char* area = argv[0];
  char* last = argv[argc - 1] + std::strlen(argv[argc - 1]);  // the area's final NUL
  std::string title = std::string(argv[0]) + " " + box_dir;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--box-dir-fd") == 0 || std::strcmp(argv[i], "--cmdline-room") == 0) {
      ++i;  // neither means anything to a reader any more
      continue;
    }
    title += std::string(" ") + argv[i];
  }
  auto room = static_cast<size_t>(last - area);  // bytes before the final NUL
  if (title.size() > room) title.resize(room);   // cosmetic only
  std::memcpy(area, title.c_str(), title.size() + 1);
  if (title.size() < room) std::memset(area + title.size() + 1, ' ', room - title.size());
}

// The lifeline's other end is held by the process that owns an attached box for as
// long as it does: EOF means it exited (or dropped the box) without removing it.
bool owner_is_gone(int lifeline_fd) {
  if (lifeline_fd < 0) return false;
  pollfd p{lifeline_fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

// An auto_remove box whose owner is gone has nobody else to remove it: its
// directory goes here (the jail's overlay, mounted in our namespace, first), and
// the runtime forgets its row when it next sees it (Runtime::reconcile). Not while
// another process works on the box (`rm`, `clone`, `snapshot` hold its lock: they
// decide), nor, as destroy refuses too, while clones stand on it (a vm box's clone
// is backed by a frozen disk in the source's snapshots/): it then stays, stopped.
bool clones_depend_on(const std::string& box_dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(box_dir + "/snapshots", ec)) {
    if (e.path().filename().string().rfind(engine::kCloneBackingPrefix, 0) == 0) return true;
  }
  return false;
}

void remove_abandoned_box(const std::string& box_dir, const std::string& jail_root) {
  try {
    FileLock lock = FileLock::try_acquire_directory(box_dir);
    if (!lock.held() || clones_depend_on(box_dir)) return;
    boxlite::trace("shim: removing the abandoned box");
    // A jail's root, mounted in our namespace only (not under box_dir unless the box
    // predates the shared mount point): nothing of it is removed through the mount.
    if (!jail_root.empty()) ::umount2(jail_root.c_str(), MNT_DETACH);
    remove_tree(box_dir);
  } catch (const Error& e) {
    std::fprintf(stderr, "boxlite-shim: could not remove the abandoned box: %s\n", e.what());
  }
}

// The box directory from the runtime, up to EOF; "" when it went away instead.
std::string receive_box_dir(int fd) {
  std::string dir;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    dir.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return dir;
}

}  // namespace

namespace boxlite::shim {

int shim_main(int argc, char** argv, const std::string& guest_dir) {
  drop_controlling_terminal();
  // A guest or client that hangs up is an error on that channel, not our death.
  ::signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && std::strcmp(argv[1], "--probe-kvm") == 0) {
    auto r = engine::vm::probe_kvm_inprocess();
    std::printf("%s %.1f %s\n", r.usable ? "usable" : "unusable", r.probe_ms, r.reason.c_str());
    return r.usable ? 0 : 1;
  }
  int box_dir_fd = -1, ready_fd = -1, lifeline_fd = -1, go_fd = -1;
  std::string warm_disk_template;
  bool warm_disk_ephemeral = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--warm-disk") == 0) warm_disk_template = argv[i + 1];
    if (std::strcmp(argv[i], "--warm-disk-ephemeral") == 0) warm_disk_ephemeral = std::strcmp(argv[i + 1], "1") == 0;
    if (std::strcmp(argv[i], "--box-dir-fd") == 0) box_dir_fd = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--ready-fd") == 0) ready_fd = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--lifeline-fd") == 0) lifeline_fd = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--go-fd") == 0) go_fd = std::atoi(argv[i + 1]);
    // --cmdline-room SPACES: see name_box_in_cmdline
  }
  if (box_dir_fd < 0) {
    std::fprintf(stderr, "usage: boxlite-shim --box-dir-fd N [--ready-fd N] [--go-fd N] [--lifeline-fd N]\n");
    return 2;
  }
  // Started now, its exec and start overlap everything before the box's init
  // (engine/jail/jail.hpp); boxlite-guest is installed beside us. A VM box lets it
  // go unused (~1 ms of CPU against a boot of a second).
  engine::jail::Zygote zygote = engine::jail::Zygote::start(guest_dir);
  boxlite::trace("shim: main");
  // While the box directory is on its way: the jail box's disk (engine/jail/disk.hpp),
  // in the namespace it will be mounted in (its image, unnamed yet, is linked into
  // the box directory later, which only works within the mount it was made on).
  if (!warm_disk_template.empty()) {
    try {
      engine::jail::enter_private_mount_namespace();  // the engine's call later does nothing
      engine::jail::prepare_warm_disk(warm_disk_template, warm_disk_ephemeral);
    } catch (const Error&) {
      // Said again, to the box's log, when the box needs it.
    }
  }
  std::string box_dir = receive_box_dir(box_dir_fd);
  if (box_dir.empty()) return 0;  // started early for a box that never came
  name_box_in_cmdline(box_dir, argc, argv);
  if (!redirect_output_to(engine::shim_log_path(box_dir))) {
    report(ready_fd,
           failed(Error(ErrorKind::Internal, errno_text("open the shim log " + engine::shim_log_path(box_dir)))));
    return 1;
  }
  boxlite::trace("shim: has its box");
  bool ephemeral = false;
  std::string jail_root;  // mounted in our namespace
  int status = 0;
  try {
    // QEMU must not inherit these: the runtime waits for EOF on the ready pipe.
    if (ready_fd >= 0) set_cloexec(ready_fd);
    if (lifeline_fd >= 0) set_cloexec(lifeline_fd);
    engine::ShimSpec spec = engine::read_spec(box_dir);
    ephemeral = spec.ephemeral;
    std::unique_ptr<engine::Engine> engine = engine::make_engine(spec, std::move(zygote));
    jail_root = engine->mounted_root();
    engine->prepare_shim_process();
    // A warm disk the box will not take (a wrong guess: engine/jail/disk.hpp) goes now.
    if (!engine->takes_warm_disk()) engine::jail::drop_warm_disk();
    shim::Shim s(std::move(spec), std::move(engine));
    if (go_fd >= 0) {
      set_cloexec(go_fd);
      s.set_go_fd(UniqueFd(go_fd));
    }
    s.boot();
    boxlite::trace("shim: booted");
    s.listen();
    report(ready_fd, engine::encode_ready_report({std::nullopt, s.boot_stages(), s.warnings()}));
    ready_fd = -1;
    s.serve(lifeline_fd);
  } catch (const Error& e) {
    std::fprintf(stderr, "boxlite-shim: %s\n", e.what());
    report(ready_fd, failed(e));
    status = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boxlite-shim: %s\n", e.what());
    report(ready_fd, failed(Error(ErrorKind::Internal, e.what())));
    status = 1;
  }
  if (ephemeral && owner_is_gone(lifeline_fd)) remove_abandoned_box(box_dir, jail_root);
  boxlite::trace("shim: exiting");
  return status;
}

}  // namespace boxlite::shim
