#include "net/netd.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include <slirp/libslirp.h>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"
#include "common/trace.hpp"
#include "net/dns.hpp"
#include "net/packet.hpp"
#include "net/policy.hpp"
#include "net/secrets.hpp"
#include "net/stats.hpp"

namespace boxlite::net {
namespace {

constexpr size_t kStreamOutLimit = 4u << 20;  // like a NIC ring: beyond it, frames are dropped
constexpr size_t kTapQueueLimit = 1024;
constexpr size_t kMaxPendingDns = 1024;
constexpr int64_t kDnsTimeoutMs = 10000;
constexpr size_t kMaxInboundFlows = 65536;

int64_t clock_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

struct Timer {
  SlirpTimerCb cb = nullptr;
  void* cb_opaque = nullptr;
  int64_t expire_ms = -1;  // -1: not armed
};

// Where to send DNS queries: the configured resolver, else the host's first nameserver.
sockaddr_in upstream_resolver(const std::string& configured) {
  std::string host = configured, port = "53";
  if (host.empty()) {
    try {
      for (const auto& line : split(read_file("/etc/resolv.conf"), '\n')) {
        auto words = split(trim(line), ' ');
        if (words.size() >= 2 && words[0] == "nameserver" && ipv4_from_string(words[1].c_str()) != 0) {
          host = words[1];
          break;
        }
      }
    } catch (const Error&) {
    }
    if (host.empty()) host = "127.0.0.1";
  } else if (auto colon = host.rfind(':'); colon != std::string::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
  if (::inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    throw Error(ErrorKind::Config, "invalid DNS resolver '" + configured + "': expected ip[:port]");
  }
  return sa;
}

class Netd {
 public:
  explicit Netd(const NetdOptions& o)
      : opts_(o),
        policy_(o.config),
        stats_(stats_path(o.box_dir)),
        resolver_(upstream_resolver(o.config.dns_upstream)) {
    for (const auto& p : o.config.ports) forwarded_.insert({p.guest_port, p.udp});
    if (!o.config.secrets.empty()) proxy_ = std::make_unique<SecretsProxy>(o.config);
    dns_ = UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!dns_) throw_errno(ErrorKind::Network, "create the DNS forwarding socket");
    if (::connect(dns_.get(), reinterpret_cast<sockaddr*>(&resolver_), sizeof resolver_) != 0) {
      throw_errno(ErrorKind::Network, "connect to DNS resolver " + ipv4_to_string(ntohl(resolver_.sin_addr.s_addr)));
    }
    if (o.link == LinkKind::Stream) {
      listen_fd_ = o.link_fd;
    } else {
      link_ = UniqueFd(o.link_fd);
      set_nonblocking(link_.get());
    }
    start_slirp();
  }
  ~Netd() {
    if (slirp_) slirp_cleanup(slirp_);
  }
  Netd(const Netd&) = delete;
  Netd& operator=(const Netd&) = delete;

  void run();

 private:
  void start_slirp();
  void publish_ports();
  void from_guest(std::string_view frame);
  void to_guest(std::string_view frame);
  void answer_dns(std::string_view frame, const Ipv4View& ip);
  void on_dns_reply();
  void on_link_readable();
  void flush_link();
  void run_timers();
  int64_t next_timer_ms() const;
  bool inbound_flow(const Ipv4View& p) const { return inbound_.count({p.dst, p.dport, p.sport, p.proto}) != 0; }
  void note_inbound(const Ipv4View& p);
  bool redirect_to_proxy(std::string& frame, const Ipv4View& ip);
  void restore_from_proxy(std::string& frame, const Ipv4View& ip);

  static ssize_t cb_send(const void* buf, size_t len, void* opaque) {
    static_cast<Netd*>(opaque)->to_guest({static_cast<const char*>(buf), len});
    return static_cast<ssize_t>(len);
  }
  static void cb_guest_error(const char* msg, void*) { std::fprintf(stderr, "boxlite-net: guest error: %s\n", msg); }
  static int64_t cb_clock(void*) { return clock_ns(); }
  static void* cb_timer_new(SlirpTimerCb cb, void* cb_opaque, void* opaque) {
    auto* self = static_cast<Netd*>(opaque);
    self->timers_.push_back(std::make_unique<Timer>(Timer{cb, cb_opaque, -1}));
    return self->timers_.back().get();
  }
  static void cb_timer_free(void* timer, void* opaque) {
    auto& timers = static_cast<Netd*>(opaque)->timers_;
    timers.erase(std::remove_if(timers.begin(), timers.end(), [&](const auto& t) { return t.get() == timer; }),
                 timers.end());
  }
  static void cb_timer_mod(void* timer, int64_t expire_ms, void*) { static_cast<Timer*>(timer)->expire_ms = expire_ms; }
  static void cb_register(int, void*) {}
  static void cb_unregister(int, void*) {}
  static void cb_notify(void*) {}
  static int cb_add_poll(int fd, int events, void* opaque) {
    auto* self = static_cast<Netd*>(opaque);
    short ev = 0;
    if (events & SLIRP_POLL_IN) ev |= POLLIN;
    if (events & SLIRP_POLL_OUT) ev |= POLLOUT;
    if (events & SLIRP_POLL_PRI) ev |= POLLPRI;
    self->pfds_.push_back(pollfd{fd, ev, 0});
    return static_cast<int>(self->pfds_.size() - 1);
  }
  static int cb_get_revents(int idx, void* opaque) {
    auto* self = static_cast<Netd*>(opaque);
    if (idx < 0 || static_cast<size_t>(idx) >= self->pfds_.size()) return 0;
    short r = self->pfds_[static_cast<size_t>(idx)].revents;
    int out = 0;
    if (r & POLLIN) out |= SLIRP_POLL_IN;
    if (r & POLLOUT) out |= SLIRP_POLL_OUT;
    if (r & POLLPRI) out |= SLIRP_POLL_PRI;
    if (r & POLLERR) out |= SLIRP_POLL_ERR;
    if (r & POLLHUP) out |= SLIRP_POLL_HUP;
    return out;
  }

  struct PendingDns {
    uint16_t guest_id;
    std::string query;  // the guest's message (header and question)
    DnsQuestion question;
    std::string request;  // the guest's frame, to address the reply
    Ipv4View ip;
    int64_t sent_ms;
  };

  NetdOptions opts_;
  EgressPolicy policy_;
  StatsFile stats_;
  sockaddr_in resolver_;
  Slirp* slirp_ = nullptr;
  SlirpCb callbacks_{};
  int listen_fd_ = -1;
  UniqueFd link_;
  std::string in_buf_;               // stream: partial frames from the guest
  std::string stream_out_;           // stream: framed bytes to the guest
  std::deque<std::string> tap_out_;  // tap: whole frames to the guest
  UniqueFd dns_;
  std::map<uint16_t, PendingDns> pending_dns_;
  uint16_t next_dns_id_ = 1;
  std::vector<std::unique_ptr<Timer>> timers_;
  std::vector<pollfd> pfds_;
  std::set<std::pair<uint16_t, bool>> forwarded_;  // guest port, udp
  // Flows a port forward opened towards the guest: (peer, peer port, guest port, proto).
  std::set<std::tuple<uint32_t, uint16_t, uint16_t, uint8_t>> inbound_;
  std::deque<std::tuple<uint32_t, uint16_t, uint16_t, uint8_t>> inbound_order_;
  bool done_ = false;
  // HTTPS the secrets proxy intercepts: the box's flow (its port, where it was going)
  // is sent to a one-connection listener on the host's loopback instead.
  std::unique_ptr<SecretsProxy> proxy_;
  struct Redirect {
    uint16_t guest_port;
    uint32_t orig_ip;
    uint16_t orig_port;
  };
  std::map<std::tuple<uint16_t, uint32_t, uint16_t>, uint16_t> redirect_by_flow_;
  std::map<uint16_t, Redirect> redirect_by_proxy_port_;
  std::deque<std::tuple<uint16_t, uint32_t, uint16_t>> redirect_order_;
};

bool Netd::redirect_to_proxy(std::string& frame, const Ipv4View& ip) {
  auto key = std::make_tuple(ip.sport, ip.dst, ip.dport);
  auto it = redirect_by_flow_.find(key);
  if (it == redirect_by_flow_.end()) {
    bool syn = (ip.tcp_flags & kTcpSyn) && !(ip.tcp_flags & kTcpAck);
    if (!syn) return false;
    UniqueFd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (!l || ::bind(l.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l.get(), 1) != 0 ||
        ::getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return false;
    }
    uint16_t port = ntohs(a.sin_port);
    it = redirect_by_flow_.emplace(key, port).first;
    redirect_by_proxy_port_[port] = Redirect{ip.sport, ip.dst, ip.dport};
    redirect_order_.push_back(key);
    if (redirect_order_.size() > 4096) {  // old flows are long done
      auto old = redirect_by_flow_.find(redirect_order_.front());
      if (old != redirect_by_flow_.end()) {
        redirect_by_proxy_port_.erase(old->second);
        redirect_by_flow_.erase(old);
      }
      redirect_order_.pop_front();
    }
    proxy_->serve(std::move(l), ip.dst, ip.dport);
  }
  set_tcp_endpoint(frame, ip, true, ipv4_from_string(kHostAlias), it->second);
  return true;
}

void Netd::restore_from_proxy(std::string& frame, const Ipv4View& ip) {
  if (ip.src != ipv4_from_string(kHostAlias)) return;
  auto it = redirect_by_proxy_port_.find(ip.sport);
  if (it == redirect_by_proxy_port_.end() || it->second.guest_port != ip.dport) return;
  set_tcp_endpoint(frame, ip, false, it->second.orig_ip, it->second.orig_port);
}

void Netd::start_slirp() {
  SlirpConfig cfg{};
  cfg.version = 4;
  cfg.restricted = 0;
  cfg.in_enabled = true;
  ::inet_pton(AF_INET, "192.168.127.0", &cfg.vnetwork);
  ::inet_pton(AF_INET, "255.255.255.0", &cfg.vnetmask);
  // libslirp maps its "host" address to the host's loopback: that is the documented
  // alias .254. The gateway .1 is its nameserver address, which answers ARP; the
  // filter handles DNS there itself and lets nothing else through to it.
  ::inet_pton(AF_INET, kHostAlias, &cfg.vhost);
  ::inet_pton(AF_INET, kGatewayAddress, &cfg.vnameserver);
  ::inet_pton(AF_INET, "192.168.127.15", &cfg.vdhcp_start);
  cfg.in6_enabled = false;
  // The filter decides who reaches .254; the secrets proxy listens on the host's
  // loopback, so libslirp must be able to connect there when there are secrets.
  cfg.disable_host_loopback = !policy_.host_allowed() && !proxy_;
  cfg.disable_dns = true;
  cfg.disable_dhcp = true;  // the agent configures the guest statically
  cfg.if_mtu = 1500;
  cfg.if_mru = 1500;
  callbacks_.send_packet = &Netd::cb_send;
  callbacks_.guest_error = &Netd::cb_guest_error;
  callbacks_.clock_get_ns = &Netd::cb_clock;
  callbacks_.timer_new = &Netd::cb_timer_new;
  callbacks_.timer_free = &Netd::cb_timer_free;
  callbacks_.timer_mod = &Netd::cb_timer_mod;
  callbacks_.register_poll_fd = &Netd::cb_register;
  callbacks_.unregister_poll_fd = &Netd::cb_unregister;
  callbacks_.notify = &Netd::cb_notify;
  slirp_ = slirp_new(&cfg, &callbacks_, this);
  if (!slirp_) throw Error(ErrorKind::Network, "libslirp could not create the box's network");
  publish_ports();
}

void Netd::publish_ports() {
  in_addr guest{};
  ::inet_pton(AF_INET, kGuestAddress, &guest);
  for (const auto& p : opts_.config.ports) {
    in_addr host{};
    ::inet_pton(AF_INET, p.host_ip.c_str(), &host);
    errno = 0;
    if (slirp_add_hostfwd(slirp_, p.udp ? 1 : 0, host, p.host_port, guest, p.guest_port) < 0) {
      int err = errno;
      std::string proto = p.udp ? "udp" : "tcp";
      throw Error(
          ErrorKind::Network,
          "cannot publish host port " + p.host_ip + ":" + std::to_string(p.host_port) + "/" + proto + " (guest port " +
              std::to_string(p.guest_port) + "): " +
              (err == EADDRINUSE || err == 0 ? std::string("the host port is already in use") : std::strerror(err)));
    }
  }
}

void Netd::note_inbound(const Ipv4View& p) {
  auto key = std::make_tuple(p.src, p.sport, p.dport, p.proto);
  if (!inbound_.insert(key).second) return;
  inbound_order_.push_back(key);
  if (inbound_order_.size() > kMaxInboundFlows) {
    inbound_.erase(inbound_order_.front());
    inbound_order_.pop_front();
  }
}

// Every frame the guest sends passes here before libslirp.
void Netd::from_guest(std::string_view frame) {
  stats_.add_sent(frame.size());
  uint16_t type = ether_type(frame);
  if (type == kEtherArp) {
    slirp_input(slirp_, reinterpret_cast<const uint8_t*>(frame.data()), static_cast<int>(frame.size()));
    return;
  }
  auto ip = parse_ipv4(frame);
  if (!ip) {
    stats_.add_dropped();  // IPv6 (the box has none), other types, malformed
    return;
  }
  Verdict v = policy_.classify(*ip);
  // Replies on a connection a port forward opened are the guest answering the host.
  if (v == Verdict::Refuse && !ip->fragment && (ip->proto == kProtoTcp || ip->proto == kProtoUdp) &&
      forwarded_.count({ip->sport, ip->proto == kProtoUdp}) && inbound_flow(*ip)) {
    v = Verdict::Pass;
  }
  if (v == Verdict::Resolver) return answer_dns(frame, *ip);
  bool syn = ip->proto == kProtoTcp && (ip->tcp_flags & kTcpSyn) && !(ip->tcp_flags & kTcpAck);
  if (v == Verdict::Refuse) {
    stats_.add_dropped();
    if (syn) {
      stats_.add_tcp_error();
      to_guest(build_tcp_reset(frame, *ip));
    }
    return;
  }
  if (syn) stats_.add_connection();
  if (proxy_ && ip->proto == kProtoTcp && !ip->fragment && ip->dport == 443) {
    std::string redirected(frame);
    if (redirect_to_proxy(redirected, *ip)) {
      slirp_input(slirp_, reinterpret_cast<const uint8_t*>(redirected.data()), static_cast<int>(redirected.size()));
      return;
    }
  }
  slirp_input(slirp_, reinterpret_cast<const uint8_t*>(frame.data()), static_cast<int>(frame.size()));
}

void Netd::to_guest(std::string_view original) {
  if (original.size() > kMaxFrame) return;
  std::string restored;
  std::string_view frame = original;
  if (proxy_) {
    if (auto ip = parse_ipv4(original); ip && ip->proto == kProtoTcp && !ip->fragment) {
      restored.assign(original);
      restore_from_proxy(restored, *ip);
      frame = restored;
    }
  }
  if (auto ip = parse_ipv4(frame); ip && ip->proto == kProtoTcp) {
    if ((ip->tcp_flags & kTcpSyn) && !(ip->tcp_flags & kTcpAck)) {
      stats_.add_connection();
      if (forwarded_.count({ip->dport, false})) note_inbound(*ip);
    }
    if (ip->tcp_flags & kTcpRst) stats_.add_tcp_error();
  } else if (ip && ip->proto == kProtoUdp && !ip->fragment && forwarded_.count({ip->dport, true})) {
    note_inbound(*ip);
  }
  if (!link_) {
    stats_.add_dropped();
    return;
  }
  if (opts_.link == LinkKind::Stream) {
    if (stream_out_.size() > kStreamOutLimit) {
      stats_.add_dropped();
      return;
    }
    uint32_t len = htonl(static_cast<uint32_t>(frame.size()));
    stream_out_.append(reinterpret_cast<const char*>(&len), 4);
    stream_out_.append(frame);
  } else {
    if (tap_out_.size() >= kTapQueueLimit) {
      stats_.add_dropped();
      return;
    }
    tap_out_.emplace_back(frame);
  }
  stats_.add_received(frame.size());
  flush_link();
}

void Netd::answer_dns(std::string_view frame, const Ipv4View& ip) {
  std::string_view msg = frame.substr(ip.payload_offset, ip.payload_size);
  auto q = parse_dns_query(msg);
  if (!q) {
    stats_.add_dropped();
    return;
  }
  // The host alias is answered here; everything not allowed is sinkholed to 0.0.0.0.
  if (q->name == kHostAliasName || !policy_.name_allowed(q->name)) {
    uint32_t addr = q->name == kHostAliasName && policy_.host_allowed() ? ipv4_from_string(kHostAlias) : 0;
    to_guest(build_udp_reply(frame, ip, build_dns_answer(msg, *q, addr)));
    return;
  }
  int64_t now = clock_ns() / 1000000;
  for (auto it = pending_dns_.begin(); it != pending_dns_.end();) {
    it = now - it->second.sent_ms > kDnsTimeoutMs ? pending_dns_.erase(it) : std::next(it);
  }
  if (pending_dns_.size() >= kMaxPendingDns) {
    stats_.add_dropped();
    return;
  }
  uint16_t id = next_dns_id_++;
  if (next_dns_id_ == 0) next_dns_id_ = 1;
  std::string upstream(msg);
  upstream[0] = static_cast<char>(id >> 8);
  upstream[1] = static_cast<char>(id & 0xff);
  if (::send(dns_.get(), upstream.data(), upstream.size(), 0) < 0) {
    stats_.add_dropped();
    return;
  }
  pending_dns_[id] = PendingDns{q->id, std::string(msg.substr(0, q->end)), *q, std::string(frame), ip, now};
}

void Netd::on_dns_reply() {
  // The largest answer the guest is sent as is; a larger one (up to UDP's limit, read
  // whole) becomes an empty answer with TC set.
  constexpr size_t kMaxGuestDnsReply = 4096;
  std::vector<char> buf(65536);
  for (;;) {
    ssize_t n = ::recv(dns_.get(), buf.data(), buf.size(), 0);
    if (n < 0) return;  // EAGAIN, or ECONNREFUSED from a resolver that is down: the guest times out
    if (n < 12) continue;
    std::string reply(buf.data(), static_cast<size_t>(n));
    uint16_t id = static_cast<uint16_t>((static_cast<uint8_t>(reply[0]) << 8) | static_cast<uint8_t>(reply[1]));
    auto it = pending_dns_.find(id);
    if (it == pending_dns_.end()) continue;
    PendingDns p = std::move(it->second);
    pending_dns_.erase(it);
    // Only names that passed the allowlist reach here: what they resolve to is reachable.
    if (policy_.filtering()) {
      for (uint32_t a : dns_answer_addresses(reply)) policy_.learn(a);
    }
    reply[0] = static_cast<char>(p.guest_id >> 8);
    reply[1] = static_cast<char>(p.guest_id & 0xff);
    if (reply.size() > kMaxGuestDnsReply) reply = build_truncated_dns_reply(p.query, p.question, reply);
    to_guest(build_udp_reply(p.request, p.ip, reply));
  }
}

void Netd::on_link_readable() {
  char buf[kMaxFrame + 4];
  for (int budget = 0; budget < 64; ++budget) {
    ssize_t n = ::read(link_.get(), buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      done_ = true;  // the engine is gone
      return;
    }
    if (opts_.link == LinkKind::Tap) {
      from_guest({buf, static_cast<size_t>(n)});
      continue;
    }
    in_buf_.append(buf, static_cast<size_t>(n));
    auto used = split_stream_frames(in_buf_, [&](std::string_view frame) { from_guest(frame); });
    if (!used) {
      std::fprintf(stderr, "boxlite-net: guest sent a frame over %zu bytes; closing the link\n", kMaxFrame);
      done_ = true;
      return;
    }
    in_buf_.erase(0, *used);
  }
}

void Netd::flush_link() {
  if (!link_) return;
  if (opts_.link == LinkKind::Stream) {
    while (!stream_out_.empty()) {
      ssize_t n = ::send(link_.get(), stream_out_.data(), stream_out_.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN) done_ = true;
        return;
      }
      stream_out_.erase(0, static_cast<size_t>(n));
    }
    return;
  }
  while (!tap_out_.empty()) {
    ssize_t n = ::write(link_.get(), tap_out_.front().data(), tap_out_.front().size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    tap_out_.pop_front();  // written, or refused (interface down): a NIC drops it too
  }
}

int64_t Netd::next_timer_ms() const {
  int64_t next = -1;
  for (const auto& t : timers_) {
    if (t->expire_ms >= 0 && (next < 0 || t->expire_ms < next)) next = t->expire_ms;
  }
  return next;
}

void Netd::run_timers() {
  int64_t now = clock_ns() / 1000000;
  // A callback may free or re-arm timers: collect the due ones first.
  std::vector<Timer*> due;
  for (const auto& t : timers_) {
    if (t->expire_ms >= 0 && t->expire_ms <= now) due.push_back(t.get());
  }
  for (Timer* t : due) {
    bool alive = std::any_of(timers_.begin(), timers_.end(), [&](const auto& x) { return x.get() == t; });
    if (!alive || t->expire_ms < 0 || t->expire_ms > now) continue;
    t->expire_ms = -1;
    t->cb(t->cb_opaque);
  }
}

void Netd::run() {
  while (!done_) {
    pfds_.clear();
    bool out_pending = opts_.link == LinkKind::Stream ? !stream_out_.empty() : !tap_out_.empty();
    if (link_) {
      pfds_.push_back(pollfd{link_.get(), static_cast<short>(POLLIN | (out_pending ? POLLOUT : 0)), 0});
    } else {
      pfds_.push_back(pollfd{listen_fd_, POLLIN, 0});
    }
    pfds_.push_back(pollfd{dns_.get(), POLLIN, 0});
    uint32_t timeout = 1000;
    slirp_pollfds_fill(slirp_, &timeout, &Netd::cb_add_poll, this);
    int64_t next = next_timer_ms();
    if (next >= 0) {
      int64_t wait = std::max<int64_t>(0, next - clock_ns() / 1000000);
      timeout = static_cast<uint32_t>(std::min<int64_t>(timeout, wait));
    }
    int n = ::poll(pfds_.data(), pfds_.size(), static_cast<int>(timeout));
    if (n < 0 && errno != EINTR) throw_errno(ErrorKind::Network, "poll");
    slirp_pollfds_poll(slirp_, n < 0, &Netd::cb_get_revents, this);
    if (n > 0) {
      short link_ev = pfds_[0].revents, dns_ev = pfds_[1].revents;
      if (!link_ && (link_ev & POLLIN)) {
        link_ = UniqueFd(::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (link_) {
          ::close(listen_fd_);  // one engine, one link
          listen_fd_ = -1;
        }
      } else if (link_) {
        if (link_ev & POLLOUT) flush_link();
        if (link_ev & (POLLIN | POLLHUP | POLLERR)) on_link_readable();
      }
      if (dns_ev & POLLIN) on_dns_reply();
    }
    run_timers();
  }
}

}  // namespace

void run_netd(const NetdOptions& o) {
  auto netd = std::make_unique<Netd>(o);  // a setup error reaches ready_fd through main
  if (o.ready_fd >= 0) {
    trace("net: ready");
    (void)!::write(o.ready_fd, "ok\n", 3);
    ::close(o.ready_fd);
  }
  netd->run();
}

}  // namespace boxlite::net
