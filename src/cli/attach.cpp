// Running one command in a box with this terminal attached: live output, stdin
// (-i), a PTY in raw mode (-t) that follows window resizes, and signals to the CLI
// forwarded to the command. Shared by `run` and `exec`.
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <thread>

#include "boxlite/error.hpp"
#include "boxlite/trace.hpp"
#include "commands.hpp"
#include "output.hpp"

namespace boxlite::cli {
namespace {

constexpr double kInterruptGraceMs = 10000;

// Restores the terminal however the command ends.
class RawTerminal {
 public:
  RawTerminal() {
    if (::tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(0, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(0, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

}  // namespace

EnvList parse_env(const std::vector<std::string>& items) {
  EnvList out;
  for (const auto& item : items) {
    auto eq = item.find('=');
    if (eq == 0) throw Error(ErrorKind::InvalidArgument, "invalid -e value '" + item + "': expected KEY=VALUE or KEY");
    if (eq == std::string::npos) {
      // A bare KEY takes its value from this environment (and is skipped if unset).
      if (const char* v = std::getenv(item.c_str())) out.emplace_back(item, v);
      continue;
    }
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return out;
}

void enable_debug_output() {
  ::setenv("BOXLITE_TRACE", "/dev/stderr", 0);
  ::setenv("BOXLITE_DEBUG", "1", 1);
  trace_reopen();  // the trace reads BOXLITE_TRACE again
}

int report_error(const Error& e) {
  if (std::getenv("BOXLITE_DEBUG")) {  // --debug
    std::string_view code = error_kind_name(e.kind());
    std::fprintf(stderr, "Error [%.*s]: %s\n", static_cast<int>(code.size()), code.data(), e.what());
  } else {
    std::fprintf(stderr, "Error: %s\n", e.what());
  }
  return exit_code_for_error(e);
}

int exit_code_for_error(const Error& e) {
  // As docker exec reports a command it could not start (common/error.hpp,
  // SpawnFailure): 127 when there is no such file, 126 when it cannot be run,
  // and boxlite's own failures (a fork in the box among them) 125.
  if (e.spawn_failure() == SpawnFailure::None) return kExitRuntimeError;
  return spawn_failure_exit_code(e.spawn_failure());
}

int exit_code_for_result(const ExecResult& r) { return r.exit_code >= 0 ? r.exit_code : 128 - r.exit_code; }

void terminal_size(unsigned& rows, unsigned& cols) {
  winsize ws{};
  if (::ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
    rows = ws.ws_row;
    cols = ws.ws_col;
  }
}

ExecResult run_attached(Box& box, ExecOptions e, bool interactive, bool tty) {
  e.tty = tty;
  e.stdin_open = interactive;
  if (tty) terminal_size(e.rows, e.cols);
  return follow(
      box, [&] { return box.exec(e); }, interactive, tty);
}

ExecResult follow(Box& /*box*/, const std::function<Execution()>& open, bool interactive, bool tty) {
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGWINCH}) sigaddset(&sigs, s);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  Execution exec = open();
  std::optional<RawTerminal> raw;
  if (tty && ::isatty(0)) raw.emplace();
  std::atomic<bool> done{false};
  std::thread signals([&] {
    int interrupts = 0;
    double kill_at_ms = 0;  // set by the first interrupt
    for (;;) {
      int sig = 0;
      if (kill_at_ms > 0) {
        double left = kill_at_ms - now_ms();
        if (left <= 0) {
          kill_at_ms = 0;
          try {
            exec.kill();
          } catch (const Error&) {
          }
          continue;
        }
        timespec ts{static_cast<time_t>(left / 1000), static_cast<long>(std::fmod(left, 1000.0) * 1e6)};
        sig = sigtimedwait(&sigs, nullptr, &ts);
        if (sig < 0) continue;  // the grace period is over (or EINTR): checked above
      } else if (sigwait(&sigs, &sig) != 0) {
        return;
      }
      if (done) return;
      try {
        if (sig == SIGWINCH) {
          unsigned rows = 0, cols = 0;
          terminal_size(rows, cols);
          if (tty && rows > 0) exec.resize(rows, cols);
        } else if (++interrupts >= 2) {
          // A command that ignores the signal (PID 1 of its box ignores any it has
          // no handler for) must not hold the terminal hostage: the second one kills.
          exec.kill();
        } else {
          // Forwarded; as `docker stop` does, a command still running after the
          // grace period is killed, so a script's SIGTERM always ends `boxlite run`.
          exec.signal(sig);
          kill_at_ms = now_ms() + kInterruptGraceMs;
        }
      } catch (const Error&) {
      }
    }
  });
  if (interactive) {
    std::thread([&exec] {
      char buf[65536];
      try {
        for (;;) {
          ssize_t n = ::read(0, buf, sizeof buf);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) break;
          exec.write_stdin(std::string_view(buf, static_cast<size_t>(n)));
        }
        exec.close_stdin();
      } catch (const Error&) {
        // The command ended first.
      }
    }).detach();  // a blocking read of our stdin cannot be interrupted; it ends with the process
  }
  std::optional<ExecResult> result;
  std::optional<Error> failure;
  try {
    while (auto chunk = exec.next_output()) {
      write_out(chunk->stream == StreamKind::Stdout ? 1 : 2, chunk->data.data(), chunk->data.size());
    }
    result = exec.wait();
  } catch (const Error& err) {
    failure = err;
  }
  done = true;
  pthread_kill(signals.native_handle(), SIGWINCH);  // wake the signal thread so it sees `done`
  signals.join();
  raw.reset();
  if (failure) throw *failure;
  return *result;
}

}  // namespace boxlite::cli
