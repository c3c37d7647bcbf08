// The shim's frame router: pure frames in, frames out. It fans the one guest
// channel out to the box's host clients: remaps stream ids, enforces the guest's
// output credit, follows the main command, and answers the control stream. It owns
// no descriptor and makes no system call; what it does to the world goes through a
// RouterSink, so a unit test and a fuzzer drive it as the shim does.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/frame.hpp"

namespace boxlite::shim {

class RouterSink {
 public:
  virtual ~RouterSink() = default;
  virtual void to_guest(uint32_t stream, protocol::FrameType type, std::string_view payload) = 0;
  virtual void to_client(uint64_t client, uint32_t stream, protocol::FrameType type, std::string_view payload) = 0;
  // A client asked for the box to stop, or its main command exited.
  virtual void stop_box(const std::string& why) = 0;
  // The engine's share of a Metrics answer: CPU and memory (the router adds its counters).
  virtual proto::BoxStats usage() = 0;
  // The main command's output, for its log; what the log holds, for an attach.
  virtual void log_main(const protocol::Frame& f) = 0;
  virtual std::vector<protocol::Frame> main_history() = 0;
  // An error the guest reported on its control stream (for the shim's log).
  virtual void guest_error(const Error& e) = 0;
};

class Router {
 public:
  Router(RouterSink& sink, std::string box_id);
  // The box has a main command, on guest stream kMainStream.
  void set_main_present() {
    main_.present = true;
    main_.out_credit = main_.err_credit = protocol::kInitialWindow;
  }
  // Frames the main command's start may bring before serving begins.
  void set_main_pid(int pid) { main_.pid = pid; }
  bool main_present() const { return main_.present; }
  // Whether new execs are taken: not once the box is stopping or its guest is gone.
  void set_accepting(bool accepting) { accepting_ = accepting; }

  void add_client(uint64_t client);
  // The client is gone: its execs end (or, detached, run on unread), its follow stops.
  void drop_client(uint64_t client);
  bool has_client(uint64_t client) const { return clients_.count(client) != 0; }

  // A guest frame. Throws Error(Rpc) for a protocol violation: the shim then stops
  // listening to the guest and stops the box.
  void on_guest_frame(protocol::Frame& f);
  // A client frame. Throws Error for the client's violation: the shim then answers
  // it with that error on stream 0 and drops it.
  void on_client_frame(uint64_t client, protocol::Frame& f);

  // The box is down: every client's streams, and its control stream, get `why`.
  void box_stopped(const Error& why);

  // The main command's exit status, once it exited.
  const std::optional<proto::ExecExit>& main_exit() const { return main_.exit; }
  uint64_t commands_executed() const { return commands_executed_; }
  uint64_t exec_errors() const { return exec_errors_; }

 private:
  struct Route {
    uint64_t client = 0;  // 0: the client is gone, frames are dropped
    uint32_t client_stream = 0;
    uint64_t out_credit = 0, err_credit = 0;  // what the guest may still send
    bool detached = false;                    // outlives its client (exec -d)
  };
  struct Client {
    bool hello = false;
    std::map<uint32_t, uint32_t> streams;  // client stream -> guest stream
  };
  // The box's main command: who follows it, who writes its stdin, its exit.
  struct Main {
    bool present = false;
    int pid = 0;
    std::optional<proto::ExecExit> exit;
    std::vector<std::pair<uint64_t, uint32_t>> followers;  // (client, client stream)
    uint64_t stdin_client = 0;
    uint32_t stdin_stream = 0;
    uint64_t out_credit = 0, err_credit = 0;
  };

  void on_control_frame(uint64_t client, protocol::Frame& f);
  void on_exec_request(uint64_t client, Client& c, protocol::Frame& f);
  void on_exec_stream_frame(uint32_t guest_stream, protocol::Frame& f);
  void on_main_frame(protocol::Frame& f);
  void on_main_exit(protocol::Frame& f);
  void attach_main(uint64_t client, Client& c, protocol::Frame& f);
  void on_main_client_frame(uint64_t client, protocol::Frame& f);
  void refuse(uint64_t client, uint32_t stream, ErrorKind kind, const std::string& why);
  void give_back_credit(uint32_t guest_stream, Route& r);

  RouterSink& sink_;
  std::string box_id_;
  bool accepting_ = true;
  std::map<uint64_t, Client> clients_;
  std::map<uint32_t, Route> routes_;  // guest stream -> client stream
  uint32_t next_stream_ = protocol::kMainStream + 1;
  Main main_;
  uint64_t commands_executed_ = 0, exec_errors_ = 0;
};

}  // namespace boxlite::shim
