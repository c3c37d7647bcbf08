// The per-box shim: owns the engine's process, the one channel to the guest agent,
// and the box's host clients on shim.sock. What it does, in order:
//   boot.cpp    start the engine, the handshake and phase 2 (the box's configuration)
//   serve.cpp   the epoll loop: guest, clients, logs, signals, the box's network
//   shim.cpp    the descriptors and buffers the router's frames go through
//   router.cpp  which frame goes where (pure: no descriptors, no system calls)
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.hpp"
#include "common/process.hpp"
#include "engine/engine.hpp"
#include "engine/spec.hpp"
#include "protocol/frame.hpp"
#include "shim/capped_log.hpp"
#include "shim/network.hpp"
#include "shim/router.hpp"

namespace boxlite::shim {

class Shim final : private RouterSink {
 public:
  Shim(engine::ShimSpec spec, std::unique_ptr<engine::Engine> engine);
  ~Shim() override;
  // Boots the box through phase 2. Throws Error naming the failed stage, with
  // the console tail, when it does not come up.
  void boot();
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
  // epoll keys: clients are numbered from kFirstClient.
  static constexpr uint64_t kGuestKey = 1, kListenKey = 2, kSignalKey = 3, kLifelineKey = 4, kConsoleKey = 5,
                            kEngineLogKey = 6, kNetLogKey = 7, kNetReadyKey = 8, kFirstFrameKey = 9, kGoKey = 10,
                            kFirstClient = 16;
  // What the guest's console (and the engine's own messages) may keep on disk: twice this.
  static constexpr uint64_t kEngineLogBytes = 1u << 20;
  static constexpr int kMaxGuestErrorsLogged = 20;
  // A client that lets this much pile up unread is dropped rather than buffered further.
  static constexpr size_t kClientOutLimit = 64u << 20;
  // Payloads at least this large go to a client without a copy into its queue (send_now).
  static constexpr size_t kDirectSendBytes = 16u << 10;
  // A client's socket holds four of the largest chunks, so that one send takes a whole one.
  static constexpr int kClientSendBuffer = 4 * static_cast<int>(protocol::kMaxChunk);
  static constexpr double kStopTimeoutMs = 10000;
  static constexpr const char* kGuestClosed = "the guest closed its channel";

  struct Client {
    uint64_t id = 0;
    UniqueFd fd;
    protocol::FrameDecoder decoder;
    std::string out;
    bool wants_out = false;
  };

  // boot.cpp
  void start_engine(double deadline);
  void start_box_network_before_engine();
  void on_box_netns(int box_netns);
  void send_hello_and_config();
  proto::BoxConfig box_config();
  void wait_for_go();
  void await_configured(double deadline);
  [[noreturn]] void boot_failed(const std::string& stage, const std::string& why);
  protocol::Frame read_guest_frame_blocking(double deadline_ms, const std::string& stage);

  // serve.cpp
  void add_to_epoll(int fd, uint64_t key);
  void accept_client();
  void on_signal();
  void on_go_readable();
  void on_lifeline_gone(int lifeline_fd);
  void on_first_frame();
  void on_net_ready_readable();
  void start_net_now();
  void say_why_the_engine_went();
  void record_exit();

  // shim.cpp: the guest and clients, through the router.
  void send_guest(uint32_t stream, protocol::FrameType type, std::string_view payload);
  void flush_guest();
  void flush_client(Client& c);
  void send_now(Client& c, uint32_t stream, protocol::FrameType type, std::string_view payload);
  void flush_all();
  void on_guest_readable();
  void stop_listening_to_guest(const std::string& why);
  void on_client_readable(Client& c);
  void drop_client(uint64_t id);
  void update_interest();
  void begin_stop(const std::string& why);
  void stop_engine();
  void drain_engine_logs();
  bool open_main_log();

  // RouterSink
  void to_guest(uint32_t stream, protocol::FrameType type, std::string_view payload) override;
  void to_client(uint64_t client, uint32_t stream, protocol::FrameType type, std::string_view payload) override;
  void stop_box(const std::string& why) override { begin_stop(why); }
  proto::BoxStats usage() override;
  void log_main(const protocol::Frame& f) override;
  std::vector<protocol::Frame> main_history() override;
  void guest_error(const Error& e) override;

  engine::ShimSpec spec_;
  std::unique_ptr<engine::Engine> engine_;
  Router router_;
  Child process_;   // the engine's: QEMU, or the jail's init
  NetProcess net_;  // boxlite-net, when the box has a network
  UniqueFd go_;
  // A jail box's TAP until its first frame: boxlite-net starts then (start_net_now).
  UniqueFd tap_;
  std::thread tap_closer_;  // begin_stop's
  UniqueFd guest_;
  UniqueFd listen_;
  UniqueFd epoll_;
  UniqueFd sigfd_;
  protocol::FrameDecoder guest_decoder_;
  std::string guest_out_;
  bool guest_wants_out_ = false;  // its epoll registration asks for EPOLLOUT
  std::map<uint64_t, std::unique_ptr<Client>> clients_;
  uint64_t next_client_ = 1;
  // The main command's log: opened at its first output (a silent command leaves no file).
  struct MainLog {
    UniqueFd fd;
    bool failed = false;
    uint64_t bytes = 0;
  } main_log_;
  bool stopping_ = false;
  double stop_deadline_ms_ = 0;
  std::string stop_reason_;
  std::string net_said_;  // boxlite-net's ready pipe so far, when the boot did not wait for it
  std::vector<std::string> warnings_;
  bool etc_files_bound_ = false;  // jail: /etc/hosts and /etc/resolv.conf bound by its start
  std::optional<int> engine_status_;
  // The guest's serial console and the engine's stderr (vm), boxlite-net's output.
  CappedLog console_log_, engine_log_, net_log_;
  int guest_errors_logged_ = 0;
  bool engine_killed_by_us_ = false;
  engine::BootStages stages_;
  double cpu_sampled_ms_ = 0;
  uint64_t cpu_sampled_ns_ = 0;
};

}  // namespace boxlite::shim
