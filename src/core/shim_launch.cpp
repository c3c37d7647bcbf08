#include "core/shim_launch.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/trace.hpp"
#include "core/paths.hpp"
#include "engine/jail/disk.hpp"

namespace boxlite::core {

namespace {

constexpr size_t kCmdlineRoom = 512;

struct Pipe {
  UniqueFd read, write;
};
Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno(ErrorKind::Internal, "pipe for the box shim");
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

}  // namespace

ShimLaunch ShimLaunch::spawn(bool detached, const WarmDisk& warm) {
  // The box directory goes over a socket, not a pipe: a shim that died first is
  // then an error on send (MSG_NOSIGNAL), not a SIGPIPE in the caller.
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw_errno(ErrorKind::Internal, "socketpair for the box shim");
  UniqueFd box_dir_w(sv[0]), box_dir_r(sv[1]);
  Pipe ready = make_pipe();
  // The go-ahead too: a shim that died first must not SIGPIPE the caller.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw_errno(ErrorKind::Internal, "socketpair for the box shim");
  Pipe go{UniqueFd(sv[1]), UniqueFd(sv[0])};
  Pipe lifeline = detached ? Pipe{} : make_pipe();
  SpawnOptions so;
  so.argv = {libexec_dir() + "/boxlite-shim", "--box-dir-fd", "3", "--ready-fd", "4", "--go-fd", "5"};
  so.fds = {{box_dir_r.get(), 3}, {ready.write.get(), 4}, {go.read.get(), 5}};
  // A detached box has no lifeline: it outlives this process. (Numbered last: no
  // gap may be left below the highest, spawn.hpp.)
  if (!detached) {
    so.argv.insert(so.argv.end(), {"--lifeline-fd", "6"});
    so.fds.emplace_back(lifeline.read.get(), 6);
  }
  if (!warm.template_path.empty()) {
    so.argv.insert(so.argv.end(),
                   {"--warm-disk", warm.template_path, "--warm-disk-ephemeral", warm.ephemeral ? "1" : "0"});
  }
  // Room for the shim to name its box in its command line once it knows it: state
  // reconciliation (Runtime::reconcile) recognises a box's shim by it, and ps and
  // pgrep -f show it. Box directories are far shorter (their sockets' paths must
  // fit in 108 bytes).
  so.argv.insert(so.argv.end(), {"--cmdline-room", std::string(kCmdlineRoom, ' ')});
  // Until it knows its box (and so its log), the shim has nothing to say.
  so.stdout_path = so.stderr_path = "/dev/null";
  // A detached box outlives this terminal; one that dies with its owner needs no
  // session of its own.
  so.new_session = detached;
  so.new_process_group = !detached;
  ShimLaunch l;
  l.process_ = boxlite::spawn(so);
  l.box_dir_ = std::move(box_dir_w);
  l.ready_ = std::move(ready.read);
  l.lifeline_ = std::move(lifeline.write);
  l.go_ = std::move(go.write);
  l.detached_ = detached;
  return l;
}

void ShimLaunch::go() {
  if (!go_) return;
  (void)!::send(go_.get(), "g", 1, MSG_NOSIGNAL);  // a shim that is gone says so on ready()
}

void ShimLaunch::commit() {
  if (!go_) return;
  (void)!::send(go_.get(), "c", 1, MSG_NOSIGNAL);  // one that is gone is recorded stopped later
  go_.reset();
}

ShimLaunch::~ShimLaunch() {
  if (process_.valid() && box_dir_) {
    box_dir_.reset();
    process_.wait_for(1000);
  }
}

void ShimLaunch::hand_box_dir(const std::string& box_dir) {
  // A shim that is gone says so on ready() (EOF) and in its exit status.
  size_t off = 0;
  while (off < box_dir.size()) {
    ssize_t n = ::send(box_dir_.get(), box_dir.data() + off, box_dir.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  box_dir_.reset();
}

WarmDisk warm_disk_for(const std::string& home, uint64_t disk_size_gb, bool ephemeral) {
  if (disk_size_gb == 0 || disk_size_gb > (uint64_t{1} << 34)) return {};
  std::string path = engine::jail::disk_template_path(HomeLayout{home}.jail_disk_templates(), disk_size_gb << 30);
  if (!path_exists(path)) return {};
  return {path, ephemeral};
}

bool is_shim_of(pid_t pid, const std::string& box_dir) {
  if (pid <= 0 || !process_alive(pid)) return false;
  auto cmdline = read_file_if_present("/proc/" + std::to_string(pid) + "/cmdline");
  return cmdline && cmdline->find(box_dir) != std::string::npos;
}

std::optional<ShimLaunch> EarlyShimSlot::take(bool detached) {
  std::lock_guard lk(mu_);
  if (!launch_ || launch_->detached() != detached) return std::nullopt;
  std::optional<ShimLaunch> l(std::move(*launch_));
  launch_.reset();
  return l;
}

HandedShim::HandedShim(ShimLaunch launch, FileLock lock, std::function<void()> after_stop)
    : launch_(std::move(launch)), lock_(std::move(lock)), after_stop_(std::move(after_stop)), handed_at_ms_(now_ms()) {}

HandedShim::~HandedShim() {
  if (!launch_) return;
  Child shim = launch_->take_process();
  if (!shim.valid()) return;  // moved from
  shim.terminate(2000);
  try {
    if (after_stop_) after_stop_();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boxlite: warning: cleaning up after an unstarted box's shim: %s\n", e.what());
  }
}

ShimLaunch HandedShim::take_launch() {
  ShimLaunch l = std::move(*launch_);
  launch_.reset();
  return l;
}

namespace {

std::mutex handed_mu;
// By box directory. Destroyed at exit, which stops a shim whose box was never started.
std::map<std::string, HandedShim> handed;

}  // namespace

void hand_and_keep(const std::string& box_dir, ShimLaunch launch, FileLock lock, std::function<void()> after_stop) {
  launch.hand_box_dir(box_dir);
  trace("core: shim handed its box");
  HandedShim h(std::move(launch), std::move(lock), std::move(after_stop));
  std::lock_guard lk(handed_mu);
  handed.erase(box_dir);
  handed.emplace(box_dir, std::move(h));
}

std::optional<HandedShim> take_handed_shim(const std::string& box_dir) {
  std::lock_guard lk(handed_mu);
  auto it = handed.find(box_dir);
  if (it == handed.end()) return std::nullopt;
  std::optional<HandedShim> h(std::move(it->second));
  handed.erase(it);
  return h;
}

FileLock lock_box_directory(const std::string& box_dir) {
  take_handed_shim(box_dir);  // dropped here: stopped
  // Removed before or while we waited (another process's `rm`, a `run --rm` that
  // finished): the box is gone, which is what the caller is told, as the reference
  // does, not that a directory could not be locked.
  auto gone = [&] { return Error(ErrorKind::NotFound, "No such box: " + box_dir.substr(box_dir.rfind('/') + 1)); };
  FileLock lock;
  try {
    lock = FileLock::acquire_directory(box_dir);
  } catch (const Error&) {
    if (!path_exists(box_dir)) throw gone();
    throw;
  }
  if (lock.removed()) throw gone();
  return lock;
}

}  // namespace boxlite::core

namespace boxlite {

EarlyShim EarlyShim::start(bool detached, const EarlyShimGuess& guess) {
  core::WarmDisk warm;
  std::optional<EngineKind> engine = guess.engine;
  if (!engine) {
    const char* env = std::getenv("BOXLITE_ENGINE");
    if (env != nullptr) engine = engine_kind_from_name(env);
  }
  if (engine == EngineKind::Jail) {
    warm = core::warm_disk_for(guess.home_dir.empty() ? core::default_home() : guess.home_dir,
                               guess.disk_size_gb ? guess.disk_size_gb : kDefaultDiskSizeGb, guess.auto_remove);
  }
  EarlyShim e;
  e.launch_ = std::make_shared<core::ShimLaunch>(core::ShimLaunch::spawn(detached, warm));
  return e;
}

}  // namespace boxlite
