// The machinery behind the C API: the per-runtime event queue (post-and-drain),
// the worker pool that runs asynchronous operations, and the state shared between
// a handle, its pending operations and the drain loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "boxlite.h"
#include "boxlite/error.hpp"
#include "boxlite/runtime.hpp"

namespace boxlite::capi {

// Cancelled when the handle an operation belongs to is freed: its undispatched
// callbacks are dropped, because their user_data may be gone with it.
struct Token {
  std::atomic<bool> cancelled{false};
};

struct ExecState;

// One queued callback invocation. `exec`/`bytes`: output still counted against
// its execution's window until dispatched or dropped.
struct Event {
  std::function<void()> run;
  std::shared_ptr<Token> token;
  std::shared_ptr<ExecState> exec;
  size_t bytes = 0;
};

class EventQueue {
 public:
  // Drops the event once the queue is closed (the runtime was freed).
  void post(Event ev);
  // Waits per drain's timeout_ms rule; false when nothing arrived.
  bool wait(int timeout_ms);
  std::deque<Event> take_all();
  // Closes the queue and returns what was pending (to be dropped by the caller).
  std::deque<Event> close();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool closed_ = false;
};

// Threads for blocking operations (boots, waits, output pumps). A task never waits
// for a free thread: when none is idle, a new one is started, so a long wait can
// never starve a short operation. Idle threads are kept until join().
class TaskPool {
 public:
  ~TaskPool() { join(); }
  // Throws InvalidState after join().
  void submit(std::function<void()> task);
  // Runs what is queued, then stops and joins every thread.
  void join();

 private:
  void worker();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

struct RuntimeState {
  std::shared_ptr<Runtime> core;
  EventQueue queue;
  TaskPool pool;
  std::mutex dispatch_mu;              // one thread runs callbacks at a time, in order
  std::atomic<bool> shut_down{false};  // boxlite_runtime_shutdown was called
  std::atomic<bool> freed{false};      // boxlite_runtime_free was called
  std::atomic<bool> free_deferred{false};

  // Boxes handed out, by id: a second handle to a box shares its core Box, so two
  // handles never boot the same box twice.
  std::mutex boxes_mu;
  std::map<std::string, std::weak_ptr<Box>> boxes;
  std::shared_ptr<Box> cached_box(const std::string& id);
  void remember_box(const std::shared_ptr<Box>& box);
  // The box by id, name or unique id prefix (the cached one when this runtime
  // already handed it out); nullptr when there is none.
  std::shared_ptr<Box> lookup(const std::string& id_or_name);
  std::mutex lookup_mu;

  std::mutex execs_mu;
  std::vector<std::weak_ptr<ExecState>> execs;

  // Throws unless the runtime still takes new work: "cannot <op>: the runtime has
  // been freed" (InvalidState) or "... shut down" (Stopped).
  void check_open(std::string_view op) const;
  void post(Event ev) { queue.post(std::move(ev)); }
};

// An execution: the core Execution, the registered callbacks, and its outcome.
struct ExecState {
  std::shared_ptr<RuntimeState> rt;
  std::optional<Execution> exec;
  bool tty = false;
  std::shared_ptr<Token> token = std::make_shared<Token>();

  std::mutex mu;
  std::condition_variable cv;
  CBoxStdoutCb out_cb = nullptr;
  void* out_ud = nullptr;
  CBoxStderrCb err_cb = nullptr;
  void* err_ud = nullptr;
  CBoxExitCb exit_cb = nullptr;
  void* exit_ud = nullptr;
  size_t queued_bytes = 0;  // output posted but not yet dispatched (or acked)
  // boxlite_box_exec_acked: dispatched output keeps its window until acked.
  bool manual_ack = false;
  // boxlite_execution_kill was called: output that has to wait for window is dropped.
  bool discard = false;
  bool done = false;
  int exit_code = -1;
  bool timed_out = false;  // stopped by its timeout_secs
  std::optional<Error> error;
  std::vector<std::function<void(int, const Error*)>> waiters;

  // Output dispatched or dropped: frees window for the pump.
  void release(size_t bytes);
  // Runs `w` (on the drain thread) once the command has ended and all its output
  // was posted.
  void add_waiter(std::function<void(int, const Error*)> w);
};

// The pump: moves the command's output to the queue (bounded by a window per
// execution, so a command nobody drains pauses instead of filling memory), then
// posts the exit.
void pump_output(const std::shared_ptr<ExecState>& st);

// Per-execution output allowed in the queue before the pump stops reading.
inline constexpr size_t kOutputWindow = 1u << 20;

}  // namespace boxlite::capi

// The C handles. Their layouts are private to the library.
struct CBoxliteRuntime {
  std::shared_ptr<boxlite::capi::RuntimeState> st;
};

struct CBoxHandle {
  std::shared_ptr<boxlite::capi::RuntimeState> rt;
  std::shared_ptr<boxlite::Box> box;
  std::shared_ptr<boxlite::capi::Token> token = std::make_shared<boxlite::capi::Token>();
};

struct CExecutionHandle {
  std::shared_ptr<boxlite::capi::ExecState> st;
};

struct CAdvancedBoxOptions {
  bool security_enabled = true;
  boxlite::SecurityOptions security;  // seccomp and limits (boxlite/options.hpp)
};

struct CBoxliteOptions {
  boxlite::BoxOptions core;
  std::string name;
  std::vector<std::string> invalid;      // bad values given to void setters
  std::vector<std::string> unsupported;  // documented options the core cannot honour yet
  bool security_disabled = false;
};

struct CBoxliteSimple {
  std::unique_ptr<boxlite::Runtime> rt;
  std::shared_ptr<boxlite::Box> box;
};

struct CBoxliteImageHandle {
  std::shared_ptr<boxlite::capi::RuntimeState> rt;
};
