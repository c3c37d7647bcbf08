#include "core/client.hpp"

#include <chrono>

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "common/io.hpp"

namespace boxlite::core {

using protocol::Frame;
using protocol::FrameType;

namespace {

constexpr int kHandshakeTimeoutSecs = 10;

Frame read_frame_blocking(int fd, protocol::FrameDecoder& dec, const std::string& box_id) {
  for (;;) {
    if (auto f = dec.next()) return std::move(*f);
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      throw Error(ErrorKind::RpcTransport, "box " + box_id + ": its shim did not answer within " +
                                               std::to_string(kHandshakeTimeoutSecs) +
                                               " s (stopped with SIGSTOP, or hung)");
    }
    if (n <= 0)
      throw Error(ErrorKind::RpcTransport, "box " + box_id + ": shim closed the connection during the handshake");
    dec.feed(buf, static_cast<size_t>(n));
  }
}

Error error_from_reply(const Frame& f) { return protocol::error_from_frame(f, "the box's shim"); }

}  // namespace

ShimClient::ShimClient(UniqueFd fd, std::string box_id) : fd_(std::move(fd)), box_id_(std::move(box_id)) {}

std::shared_ptr<ShimClient> ShimClient::connect(const std::string& socket_path, const std::string& box_id) {
  UniqueFd fd = unix_connect(socket_path);
  timeval tv{kHandshakeTimeoutSecs, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  proto::Hello hello;
  hello.set_version(protocol::kProtocolVersion);
  hello.set_peer("client");
  std::string out = protocol::encode_message(0, FrameType::Hello, hello);
  send_all(fd.get(), out.data(), out.size());
  protocol::FrameDecoder dec;
  Frame reply = read_frame_blocking(fd.get(), dec, box_id);
  if (reply.type == FrameType::Error) throw error_from_reply(reply);
  if (reply.type != FrameType::Hello)
    throw Error(ErrorKind::Rpc,
                "box " + box_id + ": shim answered the handshake with " + protocol::frame_type_name(reply.type));
  auto theirs = protocol::parse_message<proto::Hello>(reply);
  if (theirs.version() != protocol::kProtocolVersion) {
    throw Error(ErrorKind::Rpc, "box " + box_id + ": protocol version mismatch (shim " +
                                    std::to_string(theirs.version()) + ", client " +
                                    std::to_string(protocol::kProtocolVersion) + ")");
  }
  timeval none{0, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  std::shared_ptr<ShimClient> c(new ShimClient(std::move(fd), box_id));
  if (dec.buffered() > 0) throw Error(ErrorKind::Rpc, "box " + box_id + ": unexpected data after the handshake");
  c->reader_ = std::thread([raw = c.get()] { raw->reader_loop(); });
  return c;
}

ShimClient::~ShimClient() { close(); }

void ShimClient::close() {
  {
    std::lock_guard lk(mu_);
    if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
  }
  if (reader_.joinable()) reader_.join();
}

bool ShimClient::closed() {
  std::lock_guard lk(mu_);
  return closed_;
}

bool ShimClient::box_down() {
  std::lock_guard lk(mu_);
  return box_down_;
}

bool ShimClient::wait_closed(int timeout_ms) {
  std::unique_lock lk(mu_);
  return stats_cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return closed_; });
}

void ShimClient::send(uint32_t stream, FrameType type, std::string_view payload) {
  if (!fd_) throw Error(ErrorKind::Stopped, "box " + box_id_ + " is not running");
  std::string out = protocol::encode_frame(stream, type, payload);
  std::lock_guard lk(write_mu_);
  ssize_t off = 0;
  while (static_cast<size_t>(off) < out.size()) {
    ssize_t n = ::send(fd_.get(), out.data() + off, out.size() - static_cast<size_t>(off), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::Stopped, errno_text("box " + box_id_ + " is not reachable (send to shim)"));
    }
    off += n;
  }
}

std::shared_ptr<ShimClient> ShimClient::offline(const std::string& box_id) {
  auto c = std::shared_ptr<ShimClient>(new ShimClient(UniqueFd(), box_id));
  c->closed_ = true;
  return c;
}

std::shared_ptr<ExecStream> ShimClient::start_exec(const proto::ExecRequest& req) {
  return open_stream(FrameType::Exec, req.SerializeAsString());
}

std::shared_ptr<ExecStream> ShimClient::start_attach(const proto::AttachRequest& req) {
  return open_stream(FrameType::Attach, req.SerializeAsString());
}

std::shared_ptr<ExecStream> ShimClient::open_stream(FrameType type, const std::string& payload) {
  auto s = std::make_shared<ExecStream>();
  {
    std::lock_guard lk(mu_);
    if (closed_) throw Error(ErrorKind::Stopped, "box " + box_id_ + " is stopped");
    s->id = next_stream_++;
    streams_[s->id] = s;
  }
  send(s->id, type, payload);
  std::unique_lock lk(mu_);
  s->cv.wait(lk, [&] { return s->started || s->error; });
  if (!s->started) throw *s->error;
  return s;
}

proto::BoxStats ShimClient::stats() {
  std::lock_guard one(stats_mu_);
  {
    std::lock_guard lk(mu_);
    stats_reply_.reset();
  }
  send(0, FrameType::Metrics, {});
  std::unique_lock lk(mu_);
  if (!stats_cv_.wait_for(lk, std::chrono::seconds(10), [&] { return stats_reply_.has_value() || closed_; })) {
    throw Error(ErrorKind::Rpc, "box " + box_id_ + ": the shim did not answer a metrics request");
  }
  if (!stats_reply_) throw Error(ErrorKind::Stopped, "box " + box_id_ + " stopped");
  return *stats_reply_;
}

void ShimClient::request_shutdown() { send(0, FrameType::Shutdown, proto::Shutdown{}.SerializeAsString()); }

void ShimClient::fail_all(const Error& why) {
  std::lock_guard lk(mu_);
  closed_ = true;
  stats_cv_.notify_all();
  for (auto& [id, s] : streams_) {
    if (!s->finished()) s->error = why;
    s->cv.notify_all();
  }
  streams_.clear();
}

void ShimClient::reader_loop() {
  // A library thread takes no process signals: they belong to the application.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  protocol::FrameDecoder dec;
  std::optional<Error> last_error;
  bool said_down = false;
  try {
    for (;;) {
      ssize_t n = dec.read_from(fd_.get());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // A shim that closes with our unread requests queued resets the connection.
        if (said_down && (n == 0 || errno == ECONNRESET)) {
          std::lock_guard lk(mu_);
          box_down_ = true;
        }
        break;
      }
      while (auto f = dec.next()) {
        if (f->stream == 0) {
          if (f->type == FrameType::Error) {
            last_error = error_from_reply(*f);
            // Only the shim speaks on stream 0 (it forwards nothing of the guest's there).
            said_down = last_error->kind() == ErrorKind::Stopped;
          }
          if (f->type == FrameType::Metrics) {
            std::lock_guard lk(mu_);
            stats_reply_ = protocol::parse_message<proto::BoxStats>(*f);
            stats_cv_.notify_all();
          }
          continue;
        }
        std::lock_guard lk(mu_);
        auto it = streams_.find(f->stream);
        if (it == streams_.end()) continue;
        auto keep = it->second;  // erase() below must not free it under us
        ExecStream& s = *keep;
        switch (f->type) {
          case FrameType::Started: {
            auto st = protocol::parse_message<proto::ExecStarted>(*f);
            s.started = true;
            s.pid = st.pid();
            s.history_bytes = st.history_bytes();
            break;
          }
          case FrameType::Stdout:
          case FrameType::Stderr:
            s.output.push_back(OutputChunk{f->type == FrameType::Stdout ? StreamKind::Stdout : StreamKind::Stderr,
                                           std::move(f->payload)});
            break;
          case FrameType::Credit: {
            auto c = protocol::parse_message<proto::Credit>(*f);
            if (c.channel() == proto::STDIN) s.stdin_credit += c.bytes();
            break;
          }
          case FrameType::Exit:
            s.exit = protocol::parse_message<proto::ExecExit>(*f);
            streams_.erase(it);
            break;
          case FrameType::Error:
            s.error = error_from_reply(*f);
            streams_.erase(it);
            break;
          default: break;
        }
        s.cv.notify_all();
      }
    }
  } catch (const Error& e) {
    last_error = e;
  }
  fail_all(last_error ? *last_error : Error(ErrorKind::Stopped, "box " + box_id_ + " stopped"));
}

}  // namespace boxlite::core
