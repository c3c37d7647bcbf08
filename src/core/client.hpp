// A host client's connection to one box's shim: framing, the handshake, and a
// reader thread that hands each exec stream its frames.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "boxlite.pb.h"
#include "boxlite/options.hpp"
#include "common/error.hpp"
#include "common/fd.hpp"
#include "protocol/frame.hpp"

namespace boxlite::core {

struct ExecStream {
  uint32_t id = 0;
  std::condition_variable cv;
  bool started = false;
  int pid = -1;
  std::optional<Error> error;
  std::optional<proto::ExecExit> exit;
  std::deque<OutputChunk> output;
  uint64_t stdin_credit = protocol::kInitialWindow;
  // Output taken by the application whose credit is not sent back yet (execution.cpp).
  uint32_t stdout_consumed = 0, stderr_consumed = 0;
  uint64_t history_bytes = 0;  // attach: leading output bytes replayed from the log
  bool stdin_closed = false;
  bool finished() const { return exit.has_value() || error.has_value(); }
};

class ShimClient {
 public:
  // Connects and handshakes; throws Error(RpcTransport/Rpc) naming the box.
  static std::shared_ptr<ShimClient> connect(const std::string& socket_path, const std::string& box_id);
  // A client of a box that is not running: every send fails with Stopped. It lets
  // a finished stream (a stopped box's main command) be read like a live one.
  static std::shared_ptr<ShimClient> offline(const std::string& box_id);
  ~ShimClient();
  ShimClient(const ShimClient&) = delete;
  ShimClient& operator=(const ShimClient&) = delete;

  // Sends Exec and waits for Started (returns the stream) or Error (throws it).
  std::shared_ptr<ExecStream> start_exec(const proto::ExecRequest& req);
  // Sends Attach (follow the main command) and waits for Started or Error.
  std::shared_ptr<ExecStream> start_attach(const proto::AttachRequest& req);
  void send(uint32_t stream, protocol::FrameType type, std::string_view payload);
  void request_shutdown();
  // Asks the shim for this run's counters and usage.
  proto::BoxStats stats();
  void close();

  std::mutex& mutex() { return mu_; }
  bool closed();
  // The shim said the box stopped and then hung up: its engine is gone, only the
  // shim's own exit remains. (closed() alone may also mean a broken connection.)
  bool box_down();
  // Waits until the shim hangs up (it does once the box is down); false on timeout.
  bool wait_closed(int timeout_ms);

 private:
  ShimClient(UniqueFd fd, std::string box_id);
  std::shared_ptr<ExecStream> open_stream(protocol::FrameType type, const std::string& payload);
  void reader_loop();
  void fail_all(const Error& why);

  UniqueFd fd_;
  std::string box_id_;
  std::thread reader_;
  std::mutex write_mu_;
  std::mutex mu_;
  std::map<uint32_t, std::shared_ptr<ExecStream>> streams_;
  uint32_t next_stream_ = 1;
  std::mutex stats_mu_;  // one stats request in flight per connection
  std::condition_variable stats_cv_;
  std::optional<proto::BoxStats> stats_reply_;
  bool closed_ = false;
  bool box_down_ = false;
};

}  // namespace boxlite::core
