#include "shim/shim.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>
#include <system_error>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/trace.hpp"
#include "protocol/main_log.hpp"

namespace boxlite::shim {

using protocol::Frame;
using protocol::FrameType;

Shim::Shim(engine::ShimSpec spec, std::unique_ptr<engine::Engine> engine)
    : spec_(std::move(spec)), engine_(std::move(engine)), router_(*this, spec_.box_id) {}

Shim::~Shim() {
  trace("shim: destructor");
  if (tap_closer_.joinable()) tap_closer_.join();
  if (process_.valid()) process_.kill_now();
  engine_->release();
  trace("shim: cgroups retired");
  ::unlink(engine::shim_socket_path(spec_.box_dir).c_str());
  ::unlink(engine::agent_socket_path(spec_.box_dir).c_str());
  ::unlink(engine::net_socket_path(spec_.box_dir).c_str());
}

void Shim::drain_engine_logs() {
  console_log_.drain();
  engine_log_.drain();
  net_log_.drain();
}

// ---------------------------------------------------------------- to the guest

void Shim::send_guest(uint32_t stream, FrameType type, std::string_view payload) {
  protocol::append_frame(guest_out_, stream, type, payload);
}

void Shim::to_guest(uint32_t stream, FrameType type, std::string_view payload) { send_guest(stream, type, payload); }

void Shim::flush_guest() {
  while (!guest_out_.empty()) {
    ssize_t n = ::write(guest_.get(), guest_out_.data(), guest_out_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      begin_stop(errno_text("write guest channel"));
      guest_out_.clear();
      return;
    }
    guest_out_.erase(0, static_cast<size_t>(n));
  }
}

void Shim::on_guest_readable() {
  ssize_t n = guest_decoder_.read_from(guest_.get());
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return;
    begin_stop(errno_text("read guest channel"));
    return;
  }
  if (n == 0) {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, guest_.get(), nullptr);
    guest_.reset();
    router_.set_accepting(false);
    begin_stop(kGuestClosed);
    return;
  }
  try {
    while (auto f = guest_decoder_.next()) router_.on_guest_frame(*f);
  } catch (const Error& e) {
    stop_listening_to_guest(e.what());
  }
}

// A hostile or broken guest: nothing more it says is read, and the box stops.
void Shim::stop_listening_to_guest(const std::string& why) {
  std::fprintf(stderr, "boxlite-shim: %s\n", why.c_str());
  if (guest_ && epoll_) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, guest_.get(), nullptr);
  guest_.reset();
  router_.set_accepting(false);
  stopping_ = true;
  stop_reason_ = "guest protocol violation: " + why;
  stop_engine();
}

// What the guest says goes to shim.log only a few times: it may say it forever.
void Shim::guest_error(const Error& e) {
  if (++guest_errors_logged_ > kMaxGuestErrorsLogged) return;
  std::fprintf(stderr, "boxlite-shim: guest error: %.512s%s\n", e.what(),
               guest_errors_logged_ == kMaxGuestErrorsLogged ? " (further guest errors are not logged)" : "");
}

// ---------------------------------------------------------------- to clients

void Shim::to_client(uint64_t client, uint32_t stream, FrameType type, std::string_view payload) {
  auto c = clients_.find(client);
  if (c == clients_.end()) return;
  if (c->second->out.empty() && payload.size() >= kDirectSendBytes && payload.size() <= protocol::kMaxPayload) {
    send_now(*c->second, stream, type, payload);
    return;
  }
  protocol::append_frame(c->second->out, stream, type, payload);
}

// Output with nothing queued before it goes from where it is: only what the
// socket does not take now is copied into the client's queue.
void Shim::send_now(Client& c, uint32_t stream, FrameType type, std::string_view payload) {
  char header[protocol::kHeaderSize];
  protocol::put_header(header, stream, type, payload.size());
  iovec iov[2] = {{header, sizeof header}, {const_cast<char*>(payload.data()), payload.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  ssize_t n;
  while ((n = ::sendmsg(c.fd.get(), &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (n < 0 && errno != EAGAIN) return;  // the client is gone: its read side drops it
  auto done = static_cast<size_t>(std::max<ssize_t>(n, 0));
  if (done < sizeof header) c.out.append(header + done, sizeof header - done);
  c.out.append(payload.substr(done > sizeof header ? done - sizeof header : 0));
}

void Shim::flush_client(Client& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      c.out.clear();
      return;
    }
    c.out.erase(0, static_cast<size_t>(n));
  }
}

void Shim::flush_all() {
  flush_guest();
  for (auto& [id, c] : clients_) flush_client(*c);
  for (auto it = clients_.begin(); it != clients_.end();) {
    auto next = std::next(it);
    if (it->second->out.size() > kClientOutLimit) drop_client(it->first);
    it = next;
  }
}

void Shim::on_client_readable(Client& c) {
  ssize_t n = c.decoder.read_from(c.fd.get());
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    drop_client(c.id);
    return;
  }
  uint64_t id = c.id;
  try {
    while (router_.has_client(id)) {
      auto f = c.decoder.next();
      if (!f) break;
      router_.on_client_frame(id, *f);
    }
  } catch (const Error& e) {
    protocol::append_frame(c.out, 0, FrameType::Error, protocol::error_payload(e));
    flush_client(c);
    drop_client(id);
  }
}

void Shim::drop_client(uint64_t id) {
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  router_.drop_client(id);
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second->fd.get(), nullptr);
  clients_.erase(it);
}

void Shim::update_interest() {
  // Changed only when it changes: this runs on every turn of the loop.
  if (bool want = !guest_out_.empty(); want != guest_wants_out_) {
    guest_wants_out_ = want;
    epoll_event ev{};
    ev.events = EPOLLIN | (want ? uint32_t{EPOLLOUT} : 0u);
    ev.data.u64 = kGuestKey;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, guest_.get(), &ev);
  }
  for (auto& [id, c] : clients_) {
    bool want = !c->out.empty();
    if (want == c->wants_out) continue;
    c->wants_out = want;
    epoll_event cev{};
    cev.events = EPOLLIN | (want ? uint32_t{EPOLLOUT} : 0u);
    cev.data.u64 = id;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c->fd.get(), &cev);
  }
}

// ---------------------------------------------------------------- stopping

void Shim::begin_stop(const std::string& why) {
  if (stopping_) return;
  stopping_ = true;
  router_.set_accepting(false);
  trace("shim: begin stop");
  stop_reason_ = why;
  stop_deadline_ms_ = now_ms() + kStopTimeoutMs;
  if (guest_) {
    proto::Shutdown s;
    send_guest(0, FrameType::Shutdown, s.SerializeAsString());
    flush_guest();
  }
  // The box needs no network to shut down: end boxlite-net alongside the guest's
  // shutdown; the process is reaped when the shim ends.
  if (net_.child.valid()) ::kill(net_.child.pid(), SIGKILL);
  // The TAP we watched for the box's first frame: closing it waits for an RCU grace
  // period (the kernel detaches its queue), so on a thread while the box goes down,
  // not at our exit, which the box's removal waits for. The device stays (persistent)
  // and goes with the box's network namespace.
  if (tap_) {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, tap_.get(), nullptr);
    try {
      tap_closer_ = std::thread([fd = std::move(tap_)]() mutable { fd.reset(); });
    } catch (const std::system_error&) {
      // No thread to be had: the lambda's copy closed it here.
    }
  }
}

void Shim::stop_engine() {
  engine_killed_by_us_ = true;
  if (process_.valid()) process_.kill_now();
}

// ---------------------------------------------------------------- metrics

proto::BoxStats Shim::usage() {
  proto::BoxStats s;
  engine::Usage u = engine_->usage(process_.pid());
  double now = now_ms();
  if (now > cpu_sampled_ms_ && u.cpu_ns >= cpu_sampled_ns_) {
    s.set_cpu_percent(static_cast<double>(u.cpu_ns - cpu_sampled_ns_) / 1e6 / (now - cpu_sampled_ms_) * 100.0);
  }
  cpu_sampled_ms_ = now;
  cpu_sampled_ns_ = u.cpu_ns;
  s.set_memory_bytes(u.memory_bytes);
  return s;
}

// ---------------------------------------------------------------- the main command's log

// Appends to what earlier runs of the box logged.
bool Shim::open_main_log() {
  std::string path = protocol::main_log_path(spec_.box_dir);
  main_log_.fd = UniqueFd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!main_log_.fd) {
    // Logged once; the box and its followers go on without its log.
    std::fprintf(stderr, "boxlite-shim: %s\n", errno_text("open " + path).c_str());
    main_log_.failed = true;
    return false;
  }
  struct stat st {};
  if (::fstat(main_log_.fd.get(), &st) == 0) main_log_.bytes = static_cast<uint64_t>(st.st_size);
  return true;
}

void Shim::log_main(const Frame& f) {
  if (!main_log_.fd && (main_log_.failed || !open_main_log())) return;
  if (main_log_.bytes > protocol::kMainLogRotateBytes) {
    std::string path = protocol::main_log_path(spec_.box_dir);
    if (::rename(path.c_str(), protocol::main_log_old_path(spec_.box_dir).c_str()) == 0) {
      main_log_.fd = UniqueFd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600));
      main_log_.bytes = 0;
      if (!main_log_.fd) return;
    }
  }
  std::string rec = protocol::encode_frame(0, f.type, f.payload);
  try {
    write_all(main_log_.fd.get(), rec.data(), rec.size());
    main_log_.bytes += rec.size();
  } catch (const Error& e) {
    // A full disk loses log lines, never the box.
    std::fprintf(stderr, "boxlite-shim: main.log: %s\n", e.what());
  }
}

std::vector<Frame> Shim::main_history() { return protocol::read_main_log(spec_.box_dir); }

}  // namespace boxlite::shim
