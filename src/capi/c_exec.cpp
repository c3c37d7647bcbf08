// Executions through the C API: start, output pump, stdin, wait, signals.
#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "errors.hpp"
#include "state.hpp"

namespace boxlite::capi {

void ExecState::release(size_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lk(mu);
  queued_bytes -= std::min(queued_bytes, bytes);
  cv.notify_all();
}

void ExecState::add_waiter(std::function<void(int, const Error*)> w) {
  std::unique_lock lk(mu);
  if (!done) {
    waiters.push_back(std::move(w));
    return;
  }
  int code = exit_code;
  std::optional<Error> err = error;
  rt->post({[w, code, err] { w(code, err ? &*err : nullptr); }, token, nullptr, 0});
}

namespace {

// The output event of one chunk: the callback registered when it is dispatched.
Event output_event(const std::shared_ptr<ExecState>& st, OutputChunk chunk) {
  size_t n = chunk.data.size();
  bool out = chunk.stream == StreamKind::Stdout;
  auto data = std::make_shared<std::string>(std::move(chunk.data));
  Event ev{[st, out, data] {
             std::unique_lock lk(st->mu);
             auto cb = out ? st->out_cb : st->err_cb;
             void* ud = out ? st->out_ud : st->err_ud;
             lk.unlock();
             if (cb) cb(reinterpret_cast<const uint8_t*>(data->data()), data->size(), ud);
           },
           st->token, st, n};
  return ev;
}

// Waits until the chunk fits in the execution's window. False: discard it (the
// handle or the runtime was freed).
// After a kill, a chunk that does not fit is dropped rather than waited for: the
// output of an acked execution nobody reads must not keep the kill from completing.
bool reserve_window(ExecState& st, size_t n) {
  std::unique_lock lk(st.mu);
  auto fits = [&] { return st.queued_bytes + n <= kOutputWindow || st.queued_bytes == 0; };
  st.cv.wait(lk, [&] { return fits() || st.discard || st.token->cancelled || st.rt->freed; });
  if (st.token->cancelled || st.rt->freed || !fits()) return false;
  st.queued_bytes += n;
  return true;
}

}  // namespace

void pump_output(const std::shared_ptr<ExecState>& st) {
  int code = -1;
  bool timed_out = false;
  Outcome o = capture([&] {
    while (auto chunk = st->exec->next_output()) {
      if (!reserve_window(*st, chunk->data.size())) continue;
      st->rt->post(output_event(st, std::move(*chunk)));
    }
    ExecResult r = st->exec->wait();
    code = r.exit_code;
    timed_out = r.timed_out;
  });
  std::optional<Error> err;
  if (!o.ok()) err = o.error;
  // Posted under the lock, so a wait registered right after `done` is set still
  // fires after the exit event.
  std::lock_guard lk(st->mu);
  st->done = true;
  st->exit_code = code;
  st->timed_out = timed_out;
  st->error = err;
  std::vector<std::function<void(int, const Error*)>> waiters;
  waiters.swap(st->waiters);
  st->rt->post({[st, code, err, waiters] {
                  std::unique_lock elk(st->mu);
                  CBoxExitCb cb = st->exit_cb;
                  void* ud = st->exit_ud;
                  elk.unlock();
                  if (cb) cb(code, ud);
                  for (const auto& w : waiters) w(code, err ? &*err : nullptr);
                },
                st->token, nullptr, 0});
}

namespace {

ExecOptions exec_options(const BoxliteCommand& c) {
  require_str(c.command, "cmd->command");
  ExecOptions o;
  o.argv.emplace_back(c.command);
  if (c.argc < 0) invalid("cmd->argc is negative");
  if (c.argc > 0) require(c.args, "cmd->args (with argc > 0)");
  for (int i = 0; i < c.argc; ++i) {
    if (!c.args[i]) invalid("cmd->args[" + std::to_string(i) + "] is NULL");
    o.argv.emplace_back(c.args[i]);
  }
  if (c.env_pairs) {
    if (c.env_count < 0) invalid("cmd->env_count is negative");
    for (int i = 0; i + 1 < c.env_count; i += 2) {  // an odd trailing entry is ignored
      if (!c.env_pairs[i] || !c.env_pairs[i + 1]) {
        invalid("cmd->env_pairs[" + std::to_string(i) + "] or its value is NULL");
      }
      o.env.emplace_back(c.env_pairs[i], c.env_pairs[i + 1]);
    }
  }
  if (c.workdir) o.cwd = c.workdir;
  if (c.user) o.user = c.user;
  if (!(c.timeout_secs >= 0) || std::isinf(c.timeout_secs)) {
    invalid("cmd->timeout_secs must be a finite number >= 0 (0 = no timeout)");
  }
  o.timeout_secs = c.timeout_secs;
  o.tty = c.tty != 0;
  o.stdin_open = true;  // boxlite_execution_stdin_write may come at any time
  return o;
}

ExecState& checked(CExecutionHandle* e) {
  require(e, "execution");
  return *e->st;
}

// boxlite_execution_on_stdout/stderr/exit: sets one callback slot of the execution.
template <class Cb>
BoxliteErrorCode set_callback(CExecutionHandle* execution, Cb cb, void* user_data, CBoxliteError* out_error,
                              Cb ExecState::*cb_slot, void* ExecState::*ud_slot) {
  return guard(out_error, [&] {
    ExecState& st = checked(execution);
    require_cb(cb);
    std::lock_guard lk(st.mu);
    st.*cb_slot = cb;
    st.*ud_slot = user_data;
  });
}

// Posts cb(err) for an operation on an execution.
template <class Cb>
void post_done(ExecState& st, const Outcome& o, Cb cb, void* user_data) {
  st.rt->post({[o, cb, user_data] { o.deliver([&](CBoxliteError* e) { cb(e, user_data); }); }, st.token, nullptr, 0});
}

// `verb` says what the call does to the command ("signal"), for "cannot signal
// the command: ...".
void check_runtime(ExecState& st, const char* verb) {
  if (st.rt->freed)
    throw Error(ErrorKind::InvalidState, std::string("cannot ") + verb + " the command: the runtime has been freed");
}

// Starts what `start` starts on the box (a command, or the attachment to its main
// command); `setup` sees the execution before its output pump runs. `verb` is
// what it does to the box ("exec in"), for "cannot exec in box <id>: ...".
template <class Setup, class Start>
void start_execution(CBoxHandle* handle, CExecutionHandle** out_execution, const char* verb, bool tty, Setup setup,
                     Start start) {
  require(out_execution, "out_execution");
  *out_execution = nullptr;
  require(handle, "handle");
  auto rt = handle->rt;
  rt->check_open(std::string(verb) + " box " + handle->box->id());
  auto st = std::make_shared<ExecState>();
  st->rt = rt;
  st->tty = tty;
  setup(*st);
  st->exec.emplace(start());
  {
    std::lock_guard lk(rt->execs_mu);
    std::erase_if(rt->execs, [](const auto& w) { return w.expired(); });
    rt->execs.push_back(st);
  }
  try {
    rt->pool.submit([st] { pump_output(st); });
  } catch (...) {
    st->exec->kill();
    throw;
  }
  *out_execution = new CExecutionHandle{st};
}

template <class Setup>
void start_exec(CBoxHandle* handle, const BoxliteCommand* cmd, CExecutionHandle** out_execution, Setup setup) {
  require(cmd, "cmd");
  ExecOptions o = exec_options(*cmd);
  start_execution(handle, out_execution, "exec in", o.tty, setup, [&] { return handle->box->exec(o); });
}

// The output callbacks of _streamed and _acked, set before the pump starts, so a
// drain running on another thread never dispatches (and drops) a chunk ahead of
// its callback.
auto with_output_callbacks(CBoxStdoutCb on_stdout, CBoxStderrCb on_stderr, void* user_data, bool manual_ack) {
  require_cb(on_stdout, "on_stdout");
  require_cb(on_stderr, "on_stderr");
  return [=](ExecState& st) {
    st.out_cb = on_stdout;
    st.out_ud = user_data;
    st.err_cb = on_stderr;
    st.err_ud = user_data;
    st.manual_ack = manual_ack;
  };
}

// The C enum is the core's SpawnFailure, number for number.
static_assert(BoxliteSpawnFailureNone == static_cast<int>(SpawnFailure::None) &&
              BoxliteSpawnFailureNotFound == static_cast<int>(SpawnFailure::NotFound) &&
              BoxliteSpawnFailureNotExecutable == static_cast<int>(SpawnFailure::NotExecutable) &&
              BoxliteSpawnFailureBadWorkingDir == static_cast<int>(SpawnFailure::BadWorkingDir) &&
              BoxliteSpawnFailureUnknownUser == static_cast<int>(SpawnFailure::UnknownUser) &&
              BoxliteSpawnFailureSetup == static_cast<int>(SpawnFailure::Setup));

}  // namespace
}  // namespace boxlite::capi

using namespace boxlite;
using namespace boxlite::capi;

extern "C" {

BoxliteErrorCode boxlite_box_exec(CBoxHandle* handle, const BoxliteCommand* cmd, CExecutionHandle** out_execution,
                                  CBoxliteError* out_error) {
  return guard(out_error, [&] { start_exec(handle, cmd, out_execution, [](ExecState&) {}); });
}

BoxliteErrorCode boxlite_box_exec_streamed(CBoxHandle* handle, const BoxliteCommand* cmd, CBoxStdoutCb on_stdout,
                                           CBoxStderrCb on_stderr, void* user_data, CExecutionHandle** out_execution,
                                           CBoxliteError* out_error) {
  return guard(out_error, [&] {
    start_exec(handle, cmd, out_execution, with_output_callbacks(on_stdout, on_stderr, user_data, false));
  });
}

BoxliteErrorCode boxlite_box_exec_acked(CBoxHandle* handle, const BoxliteCommand* cmd, CBoxStdoutCb on_stdout,
                                        CBoxStderrCb on_stderr, void* user_data, CExecutionHandle** out_execution,
                                        CBoxliteError* out_error) {
  return guard(out_error, [&] {
    start_exec(handle, cmd, out_execution, with_output_callbacks(on_stdout, on_stderr, user_data, true));
  });
}

BoxliteErrorCode boxlite_box_exec_acked_ex(CBoxHandle* handle, const BoxliteCommand* cmd, CBoxStdoutCb on_stdout,
                                           CBoxStderrCb on_stderr, void* user_data, CExecutionHandle** out_execution,
                                           BoxliteSpawnFailure* out_spawn_failure, CBoxliteError* out_error) {
  if (out_spawn_failure) *out_spawn_failure = BoxliteSpawnFailureNone;
  try {
    start_exec(handle, cmd, out_execution, with_output_callbacks(on_stdout, on_stderr, user_data, true));
    return Ok;
  } catch (...) {
    Error e = current_error();
    if (out_spawn_failure) *out_spawn_failure = static_cast<BoxliteSpawnFailure>(e.spawn_failure());
    return fill_error(out_error, e);
  }
}

int boxlite_spawn_failure_exit_code(BoxliteSpawnFailure failure) {
  // A C caller may pass any int; reading it as the C++ enum would be undefined.
  int raw = 0;
  static_assert(sizeof raw == sizeof failure);
  std::memcpy(&raw, &failure, sizeof raw);
  if (raw <= BoxliteSpawnFailureNone || raw > BoxliteSpawnFailureSetup) return 0;
  return spawn_failure_exit_code(static_cast<SpawnFailure>(raw));
}

BoxliteErrorCode boxlite_box_attach_acked(CBoxHandle* handle, CBoxStdoutCb on_stdout, CBoxStderrCb on_stderr,
                                          void* user_data, CExecutionHandle** out_execution, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    auto setup = with_output_callbacks(on_stdout, on_stderr, user_data, true);
    require(handle, "handle");
    start_execution(handle, out_execution, "attach to", handle->box->main_tty(), setup,
                    [&] { return handle->box->attach(/*with_stdin=*/false); });
  });
}

BoxliteErrorCode boxlite_execution_ack_output(CExecutionHandle* execution, size_t bytes, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    ExecState& st = checked(execution);
    if (st.manual_ack) st.release(bytes);
  });
}

BoxliteErrorCode boxlite_execution_on_stdout(CExecutionHandle* execution, CBoxStdoutCb cb, void* user_data,
                                             CBoxliteError* out_error) {
  return set_callback(execution, cb, user_data, out_error, &ExecState::out_cb, &ExecState::out_ud);
}

BoxliteErrorCode boxlite_execution_on_stderr(CExecutionHandle* execution, CBoxStderrCb cb, void* user_data,
                                             CBoxliteError* out_error) {
  return set_callback(execution, cb, user_data, out_error, &ExecState::err_cb, &ExecState::err_ud);
}

BoxliteErrorCode boxlite_execution_on_exit(CExecutionHandle* execution, CBoxExitCb cb, void* user_data,
                                           CBoxliteError* out_error) {
  return set_callback(execution, cb, user_data, out_error, &ExecState::exit_cb, &ExecState::exit_ud);
}

BoxliteErrorCode boxlite_execution_stdin_write(CExecutionHandle* execution, const uint8_t* data, size_t len,
                                               CBoxliteError* out_error) {
  return guard(out_error, [&] {
    ExecState& st = checked(execution);
    if (len > 0) require(data, "data");
    check_runtime(st, "write to");
    if (len == 0) return;
    st.exec->write_stdin(std::string_view(reinterpret_cast<const char*>(data), len));
  });
}

BoxliteErrorCode boxlite_execution_stdin_close(CExecutionHandle* execution, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    ExecState& st = checked(execution);
    st.exec->close_stdin();
  });
}

BoxliteErrorCode boxlite_execution_wait(CExecutionHandle* execution, CExecutionWaitCb cb, void* user_data,
                                        CBoxliteError* out_error) {
  return guard(out_error, [&] {
    ExecState& st = checked(execution);
    require_cb(cb);
    check_runtime(st, "wait for");
    st.add_waiter([cb, user_data](int code, const Error* err) {
      if (!err) return cb(code, nullptr, user_data);
      CallbackError e(*err);
      cb(code, e.get(), user_data);
    });
  });
}

BoxliteErrorCode boxlite_execution_kill(CExecutionHandle* execution, CExecutionKillCb cb, void* user_data,
                                        CBoxliteError* out_error) {
  return guard(out_error, [&] {
    ExecState& st = checked(execution);
    require_cb(cb);
    check_runtime(st, "kill");
    {
      std::lock_guard lk(st.mu);
      st.discard = true;
      st.cv.notify_all();
    }
    Outcome sent = capture([&] { st.exec->kill(); });
    if (!sent.ok()) return post_done(st, sent, cb, user_data);
    // Done once the process is reaped: its exit follows its last output.
    st.add_waiter([cb, user_data](int, const Error*) { cb(nullptr, user_data); });
  });
}

BoxliteErrorCode boxlite_execution_signal(CExecutionHandle* execution, int sig, CExecutionSignalCb cb, void* user_data,
                                          CBoxliteError* out_error) {
  return guard(out_error, [&] {
    ExecState& st = checked(execution);
    require_cb(cb);
    if (sig <= 0 || sig >= NSIG)
      invalid("sig " + std::to_string(sig) + " is not a signal number (1.." + std::to_string(NSIG - 1) + ")");
    check_runtime(st, "signal");
    post_done(st, capture([&] { st.exec->signal(sig); }), cb, user_data);
  });
}

BoxliteErrorCode boxlite_execution_tty_resize(CExecutionHandle* execution, int rows, int cols, CExecutionResizeCb cb,
                                              void* user_data, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    ExecState& st = checked(execution);
    require_cb(cb);
    if (rows < 1 || cols < 1 || rows > 65535 || cols > 65535) {
      invalid("rows and cols must be 1..65535, got " + std::to_string(rows) + "x" + std::to_string(cols));
    }
    if (!st.tty)
      throw Error(ErrorKind::InvalidState, "cannot resize the terminal: the command has no TTY (start it with tty=1)");
    check_runtime(st, "resize the terminal of");
    post_done(st, capture([&] { st.exec->resize(static_cast<unsigned>(rows), static_cast<unsigned>(cols)); }), cb,
              user_data);
  });
}

int boxlite_execution_timed_out(CExecutionHandle* execution) {
  if (!execution) return 0;
  std::lock_guard lk(execution->st->mu);
  return execution->st->done && execution->st->timed_out ? 1 : 0;
}

void boxlite_execution_free(CExecutionHandle* execution) {
  if (!execution) return;
  try {
    auto& st = *execution->st;
    st.token->cancelled = true;
    {
      std::lock_guard lk(st.mu);
      st.cv.notify_all();  // the pump stops waiting for window and discards
    }
    try {
      st.exec->close_stdin();
    } catch (...) {
    }
    delete execution;
  } catch (...) {
  }
}

}  // extern "C"
