// The guest agent's event loop: one thread, one epoll set. It serves the host on
// one channel (virtio-serial port in a VM, an inherited socket in a jail) and runs
// each exec's process, moving its stdio under per-stream credit.
#pragma once

#include <sys/epoll.h>
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "boxlite.pb.h"
#include "common/fd.hpp"
#include "guest/spawn.hpp"
#include "protocol/frame.hpp"

namespace boxlite::guest {

struct Exec;

class Agent {
 public:
  // configure: runs phase 2 for this engine when the host sends BoxConfig.
  Agent(UniqueFd channel, std::function<void(const proto::BoxConfig&)> configure, std::function<void()> power_off);
  ~Agent();
  // Returns when the host asks for shutdown or the channel closes.
  void run();
  // How the box's first process gets its /proc (spawn.hpp): a VM's.
  void set_proc_swap(ProcSwap swap);
  // A jail's: the init made it already, and it waits on `socket` for its plan.
  void set_waiting_first_process(pid_t pid, UniqueFd socket);

 private:
  enum Source : uint32_t { kChannel = 1, kSignal, kStdin, kStdout, kStderr, kTimer };

  void watch(int fd, Source src, uint32_t stream, uint32_t events);
  void rewatch(int fd, Source src, uint32_t stream, uint32_t events);
  void unwatch(int fd);

  void on_channel_readable();
  void on_channel_writable();
  void dispatch(const protocol::Frame& f);
  void send(uint32_t stream, protocol::FrameType type, std::string_view payload);
  template <typename Msg>
  void send_msg(uint32_t stream, protocol::FrameType type, const Msg& m) {
    send(stream, type, m.SerializeAsString());
  }
  void send_output(uint32_t stream, protocol::FrameType type, std::string_view payload);
  void send_error(uint32_t stream, const Error& e);
  size_t queued() const { return outbuf_.size() - outbuf_sent_; }
  void update_channel_interest();

  void handle_hello(const protocol::Frame& f);
  void handle_configure(const protocol::Frame& f);
  void handle_exec(const protocol::Frame& f);
  void start_exec(uint32_t stream, const proto::ExecRequest& req, bool main);
  void handle_stdin(Exec& e, const protocol::Frame& f);
  void handle_stdin_eof(Exec& e);
  void handle_credit(Exec& e, const protocol::Frame& f);
  void handle_signal(Exec& e, const protocol::Frame& f);
  void handle_resize(Exec& e, const protocol::Frame& f);

  int wait_events(::epoll_event* events, int max);
  void resume_batched_output();
  void on_output(Exec& e, Source src);
  void deepen_pipe(Exec& e, Source src);
  void on_stdin_writable(Exec& e);
  void on_timer(Exec& e);
  void on_sigchld();
  void update_output_interest(Exec& e);
  void close_stdin(Exec& e);
  void maybe_finish(Exec& e);

  UniqueFd epoll_;
  UniqueFd channel_;
  UniqueFd sigfd_;
  protocol::FrameDecoder decoder_;
  std::unique_ptr<char[]> read_buf_ = std::make_unique<char[]>(protocol::kMaxChunk);  // on_output's
  std::string outbuf_;  // frames for the host; the first outbuf_sent_ bytes have gone
  size_t outbuf_sent_ = 0;
  bool channel_wants_out_ = false;
  bool hello_done_ = false;
  // How the first process started, whichever it is, gets its /proc, or (a jail's)
  // the process waiting to be it; its socket is closed once it has its plan.
  struct FirstProcess {
    ProcSwap swap;
    pid_t waiting_pid = -1;
    UniqueFd waiting_socket;
    WaitingFirstProcess waiting() const { return {waiting_pid, waiting_socket.get()}; }
  };
  void start_holder_init();

  FirstProcess first_;
  bool configured_ = false;
  bool main_exited_ = false;
  bool running_ = true;
  proto::BoxConfig config_;
  std::map<uint32_t, std::unique_ptr<Exec>> execs_;
  std::map<pid_t, uint32_t> pids_;
  int waiting_reads_ = 0;  // output pipes whose next read waits (on_output)
  std::function<void(const proto::BoxConfig&)> configure_;
  std::function<void()> power_off_;
};

}  // namespace boxlite::guest
