// The per-box shim: owns the engine process (QEMU), the one channel to the
// guest agent, and fans it out to any number of host clients on shim.sock.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.hpp"
#include "common/process.hpp"
#include "engine/jail/jail.hpp"
#include "engine/spec.hpp"
#include "protocol/frame.hpp"
#include "shim/capped_log.hpp"
#include "shim/network.hpp"

namespace boxlite::shim {

class Shim {
 public:
  // `zygote`: what a jail box's init is cloned from (engine/jail/jail.hpp).
  Shim(engine::ShimSpec spec, engine::jail::Zygote zygote);
  ~Shim();
  // Boots the box through phase 2. Throws Error naming the failed stage, with
  // the console tail, when it does not come up.
  void boot();
  void send_hello_and_config();
  // The runtime's word that the box is started (core/shim_launch.hpp, ShimLaunch::go),
  // read before the configuration, which starts the main command, is sent.
  void set_go_fd(UniqueFd fd) { go_ = std::move(fd); }
  // Binds shim.sock; done before reporting ready so a client can connect at once.
  void listen();
  // How long each boot stage took (ms): the engine's start, the guest kernel and
  // agent up to its Hello, and the box's setup in the guest (phase 2 and the main
  // command's start).
  const engine::BootStages& boot_stages() const { return stages_; }
  // Limits that could not be enforced, for the runtime to show.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Serves clients until the box stops. lifeline: EOF on it stops the box (-1: none).
  void serve(int lifeline_fd);

 private:
  struct Client;
  struct Route {
    uint64_t client = 0;  // 0: the client is gone, frames are dropped
    uint32_t client_stream = 0;
    uint64_t out_credit = 0, err_credit = 0;  // what the guest may still send
    bool detached = false;                    // outlives its client (exec -d)
  };

  void start_vm(double deadline);
  void start_jail();
  [[noreturn]] void boot_failed(const std::string& stage, const std::string& why);
  protocol::Frame read_guest_frame_blocking(double deadline_ms, const std::string& stage);
  void send_guest(uint32_t stream, protocol::FrameType type, std::string_view payload);
  void flush_guest();
  void flush_client(Client& c);
  void on_guest_readable();
  void on_guest_frame(protocol::Frame& f);
  void on_client_readable(Client& c);
  void on_client_frame(Client& c, protocol::Frame& f);
  void send_client(Client& c, uint32_t stream, protocol::FrameType type, std::string_view payload);
  void drop_client(uint64_t id);
  void update_interest();
  void on_main_frame(protocol::Frame& f);
  void attach_main(Client& c, protocol::Frame& f);
  void on_main_client_frame(Client& c, protocol::Frame& f);
  void log_main_output(const protocol::Frame& f);
  bool open_main_log();
  void begin_stop(const std::string& why);
  void on_net_ready_readable();
  void start_net_now();
  void on_first_frame();
  void add_to_epoll(int fd, uint64_t key);
  void drain_engine_logs();
  proto::BoxStats stats();
  // The engine's CPU time so far, and its memory in use.
  std::pair<uint64_t, uint64_t> engine_usage();
  void stop_engine();
  void record_exit();

  engine::ShimSpec spec_;
  engine::jail::Zygote zygote_;  // a jail box's init is cloned from it
  Child engine_;
  NetProcess net_;  // boxlite-net, when the box has a network
  // A jail box's TAP until its first frame: boxlite-net starts then (start_net_now).
  void wait_for_go();
  void on_go_readable();
  UniqueFd go_;
  UniqueFd tap_;
  std::thread tap_closer_;  // begin_stop's
  UniqueFd agent_listen_;
  UniqueFd guest_;
  UniqueFd listen_;
  UniqueFd epoll_;
  UniqueFd sigfd_;
  protocol::FrameDecoder guest_decoder_;
  std::string guest_out_;
  std::map<uint64_t, std::unique_ptr<Client>> clients_;
  std::map<uint32_t, Route> routes_;  // guest stream -> client stream
  uint64_t next_client_ = 1;
  uint32_t next_stream_ = protocol::kMainStream + 1;
  // The box's main command: who follows it, who writes its stdin, its log and exit.
  struct Main {
    bool present = false;
    int pid = 0;
    std::optional<proto::ExecExit> exit;
    std::vector<std::pair<uint64_t, uint32_t>> followers;  // (client, client stream)
    uint64_t stdin_client = 0;
    uint32_t stdin_stream = 0;
    uint64_t out_credit = 0, err_credit = 0;
    UniqueFd log;  // opened at its first output: a silent command leaves no file
    bool log_failed = false;
    uint64_t log_bytes = 0;
  } main_;
  bool stopping_ = false;
  double stop_deadline_ms_ = 0;
  std::string stop_reason_;
  std::string net_said_;  // boxlite-net's ready pipe so far, when the boot did not wait for it
  std::vector<std::string> warnings_;
  bool etc_files_bound_ = false;  // jail: /etc/hosts and /etc/resolv.conf bound by start()
  std::optional<int> engine_status_;
  // The guest's serial console and QEMU's stderr (vm), boxlite-net's output.
  CappedLog console_log_, engine_log_, net_log_;
  int guest_errors_logged_ = 0;
  bool engine_killed_by_us_ = false;
  engine::BootStages stages_;
  uint64_t commands_executed_ = 0, exec_errors_ = 0;
  double cpu_sampled_ms_ = 0;
  uint64_t cpu_sampled_ns_ = 0;
};

}  // namespace boxlite::shim
