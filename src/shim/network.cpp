#include "shim/network.hpp"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/netif.hpp"
#include "common/trace.hpp"

namespace boxlite::shim {
namespace {

constexpr int kLinkFd = 3, kReadyFd = 4;

// fork+exec with PDEATHSIG (the shim is single-threaded, so fork is safe here).
Child spawn_netd(const engine::ShimSpec& spec, const char* link_kind, int link_fd, int ready_fd, int log_fd) {
  std::string bin = spec.net.binary, spec_path = engine::spec_path(spec.box_dir);
  std::string lfd = std::to_string(kLinkFd), rfd = std::to_string(kReadyFd);
  const char* argv[] = {bin.c_str(), "--spec",    spec_path.c_str(), "--link",    link_kind,
                        "--link-fd", lfd.c_str(), "--ready-fd",      rfd.c_str(), nullptr};
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw_errno(ErrorKind::Network, "fork for boxlite-net");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    // Move the two fds out of the way first, then into place (dup2 clears CLOEXEC).
    int l = ::fcntl(link_fd, F_DUPFD, 10), r = ::fcntl(ready_fd, F_DUPFD, 10);
    int null = ::open("/dev/null", O_RDONLY);
    if (l < 0 || r < 0 || null < 0) ::_exit(127);
    ::dup2(null, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::dup2(l, kLinkFd);
    ::dup2(r, kReadyFd);
    // The moved copies and /dev/null above; the shim's own are close-on-exec.
    for (int fd : {l, r, null}) {
      if (fd > kReadyFd) ::close(fd);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(argv[0], const_cast<char* const*>(argv));
    std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  return Child(pid);
}

NetProcess start_netd(const engine::ShimSpec& spec, const char* link_kind, int link_fd) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw_errno(ErrorKind::Network, "pipe");
  UniqueFd ready_r(p[0]), ready_w(p[1]);
  NetProcess net;
  // What the guest's traffic makes boxlite-net say goes through the shim's cap.
  LogPipe log = make_log_pipe();
  net.child = spawn_netd(spec, link_kind, link_fd, ready_w.get(), log.write.get());
  net.ready = std::move(ready_r);
  net.log = std::move(log.read);
  return net;
}

// In the current network namespace (sysctls under /proc/sys/net are the opener's).
// A kernel without IPv6 has no such file, which is as good.
void disable_ipv6(const char* ifname) {
  std::string path = std::string("/proc/sys/net/ipv6/conf/") + ifname + "/disable_ipv6";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return;
    throw_errno(ErrorKind::Network, "open " + path);
  }
  if (::write(fd.get(), "1", 1) != 1) throw_errno(ErrorKind::Network, "turn off IPv6 on " + std::string(ifname));
}

// Runs fn in the network namespace `theirs`, then returns to ours.
template <typename Fn>
void in_netns(int theirs, Fn fn) {
  UniqueFd ours(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!ours) throw_errno(ErrorKind::Network, "open the shim's network namespace");
  if (::setns(theirs, CLONE_NEWNET) != 0) throw_errno(ErrorKind::Network, "enter the box's network namespace");
  try {
    fn();
  } catch (...) {
    if (::setns(ours.get(), CLONE_NEWNET) != 0) std::abort();  // never continue in the box's namespace
    throw;
  }
  if (::setns(ours.get(), CLONE_NEWNET) != 0) std::abort();
}

}  // namespace

void wait_ready(NetProcess& net, const engine::ShimSpec& spec, double deadline_ms) {
  struct CloseListener {
    UniqueFd& fd;
    ~CloseListener() { fd.reset(); }
  } close_listener{net.listener};
  std::string said;
  for (;;) {
    int wait = static_cast<int>(std::max(0.0, deadline_ms - now_ms()));
    pollfd pfd{net.ready.get(), POLLIN, 0};
    int n = ::poll(&pfd, 1, wait);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(ErrorKind::Network, "the box's network (boxlite-net) did not start in time");
    char buf[512];
    ssize_t r = ::read(net.ready.get(), buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    said.append(buf, static_cast<size_t>(r));
    if (said == "ok\n") {
      net.ready.reset();
      return;
    }
  }
  net.child.wait();
  std::string why = trim(said);
  if (why.empty()) why = "boxlite-net exited without a reason (see " + spec.box_dir + "/net.log)";
  throw Error(ErrorKind::Network, why);
}

NetProcess start_net_listening(const engine::ShimSpec& spec) {
  // Bound before QEMU starts, so its connect lands in the backlog at once.
  std::string path = engine::net_socket_path(spec.box_dir);
  UniqueFd listener = unix_listen(path, 1);
  NetProcess net = start_netd(spec, "stream", listener.get());
  net.listener = std::move(listener);
  return net;
}

UniqueFd make_box_tap(int box_netns) {
  UniqueFd tap;
  in_netns(box_netns, [&] {
    tap = UniqueFd(::open("/dev/net/tun", O_RDWR | O_CLOEXEC));
    if (!tap) throw_errno(ErrorKind::Network, "open /dev/net/tun");
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, net::kGuestInterface, IFNAMSIZ - 1);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    if (::ioctl(tap.get(), TUNSETIFF, &ifr) != 0) throw_errno(ErrorKind::Network, "create the box's TAP device");
    // Closing the last fd of a non-persistent TAP unregisters it there and then
    // (15-25 ms of RCU waits, which the box's stop would wait for). A persistent one
    // goes with the box's network namespace instead, which the kernel dismantles in
    // the background once the box's last process is gone. Only the shim, then
    // boxlite-net, holds it
    // (the box has no /dev/net/tun and no CAP_NET_ADMIN).
    if (::ioctl(tap.get(), TUNSETPERSIST, 1) != 0)
      throw_errno(ErrorKind::Network, "make the box's TAP device persistent");
    // Left on, IPv6 would send its own frames (DAD, router solicitations) as the
    // link comes up, which only start boxlite-net early for nothing.
    disable_ipv6(net::kGuestInterface);
    configure_ipv4_interface(net::kGuestInterface, net::kGuestAddress, net::kPrefixLength, net::kGatewayAddress);
  });
  trace("shim: tap made");
  return tap;
}

NetProcess start_net_on_tap(const engine::ShimSpec& spec, int tap_fd) { return start_netd(spec, "tap", tap_fd); }

}  // namespace boxlite::shim
