// boxlite run IMAGE [CMD...]: create a box, run CMD in it with live output, exit
// with CMD's exit code.
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/io.hpp"
#include "core/runtime.hpp"

namespace boxlite::cli {
namespace {

struct RunFlags {
  std::string image;
  std::vector<std::string> cmd;
  std::vector<std::string> env;
  std::string workdir, user, entrypoint, name, engine, kernel;
  int cpus = 0, memory = 0;
  bool rm = false, interactive = false, tty = false;
};

EnvList parse_env(const std::vector<std::string>& items) {
  EnvList out;
  for (const auto& item : items) {
    auto eq = item.find('=');
    if (eq == 0) throw Error(ErrorCode::InvalidArgument, "invalid -e value '" + item + "': expected KEY=VALUE or KEY");
    if (eq == std::string::npos) {
      // A bare KEY takes its value from this environment (and is skipped if unset).
      if (const char* v = std::getenv(item.c_str())) out.emplace_back(item, v);
      continue;
    }
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return out;
}

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

 private:
  termios saved_{};
  bool active_ = false;
};

int exit_code_for(const ExecResult& r) { return r.exit_code >= 0 ? r.exit_code : 128 - r.exit_code; }

int run_box(const GlobalFlags& g, const RunFlags& f) {
  BoxOptions o;
  o.image = f.image;
  if (f.cpus > 255) {
    std::fprintf(stderr, "boxlite: warning: --cpus %d is over the maximum of 255; using 255\n", f.cpus);
    o.cpus = 255;
  } else if (f.cpus != 0) {
    o.cpus = f.cpus;
  }
  if (f.memory != 0) o.memory_mib = f.memory;
  o.env = parse_env(f.env);
  o.working_dir = f.workdir;
  o.user = f.user;
  if (!f.entrypoint.empty()) o.entrypoint = {f.entrypoint};
  o.cmd = f.cmd;
  o.engine = f.engine;
  o.kernel = f.kernel;
  o.auto_remove = f.rm;

  Runtime rt(RuntimeOptions{g.home});
  auto box = rt.create(o, f.name);
  ExecOptions e;
  e.argv = box->default_command();
  e.tty = f.tty;
  e.stdin_open = f.interactive;
  if (f.tty) {
    winsize ws{};
    if (::ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
      e.rows = ws.ws_row;
      e.cols = ws.ws_col;
    }
  }
  // Signals to the CLI go to the command, as with docker run.
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGWINCH}) sigaddset(&sigs, s);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  Execution exec = box->exec(e);
  std::optional<RawTerminal> raw;
  if (f.tty && ::isatty(0)) raw.emplace();
  std::atomic<bool> done{false};
  std::thread signals([&] {
    for (;;) {
      int sig = 0;
      if (sigwait(&sigs, &sig) != 0 || done) return;
      try {
        if (sig == SIGWINCH) {
          winsize ws{};
          if (f.tty && ::ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) exec.resize(ws.ws_row, ws.ws_col);
        } else {
          exec.signal(sig);
        }
      } catch (const Error&) {
      }
    }
  });
  std::thread input;
  if (f.interactive) {
    input = std::thread([&] {
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
    });
    input.detach();  // a blocking read of our stdin cannot be interrupted; it ends with the process
  }
  std::optional<ExecResult> result;
  std::optional<Error> failure;
  try {
    while (auto chunk = exec.next_output()) {
      write_all(chunk->stream == StreamKind::Stdout ? 1 : 2, chunk->data.data(), chunk->data.size());
    }
    result = exec.wait();
  } catch (const Error& err) {
    failure = err;
  }
  done = true;
  ::kill(::getpid(), SIGWINCH);  // wake the signal thread so it sees `done`
  signals.join();
  raw.reset();
  if (f.rm) {
    box->destroy();
  } else {
    box->stop();
  }
  if (failure) throw *failure;
  return exit_code_for(*result);
}

}  // namespace

void add_run_command(CLI::App& app, GlobalFlags& g, int& exit_code) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* run = app.add_subcommand("run", "Create a box from IMAGE and run CMD in it (exit code = CMD's)");
  run->add_option("image", f->image, "OCI image layout directory, or oci:DIR[:TAG]")->required();
  run->add_option("cmd", f->cmd, "Command and arguments (default: the image's entrypoint and cmd)");
  run->positionals_at_end();
  run->prefix_command(false);
  run->add_flag("--rm", f->rm, "Remove the box when the command exits");
  run->add_flag("-i,--interactive", f->interactive, "Keep stdin open");
  run->add_flag("-t,--tty", f->tty, "Allocate a pseudo-terminal (stdout and stderr merge)");
  run->add_option("-e,--env", f->env, "Set KEY=VALUE (a bare KEY takes the host value)");
  run->add_option("-w,--workdir", f->workdir, "Working directory inside the box");
  run->add_option("-u,--user", f->user, "user[:group], by name or number");
  run->add_option("--entrypoint", f->entrypoint, "Override the image entrypoint (one executable)");
  run->add_option("--name", f->name, "Box name");
  run->add_option("--engine", f->engine, "vm (default) or jail")->envname("BOXLITE_ENGINE");
  run->add_option("--kernel", f->kernel, "Guest kernel: a path, or 'debian' for Debian's prebuilt kernel");
  run->add_option("--cpus", f->cpus, "Virtual CPUs (default 1; over 255 is clamped)");
  run->add_option("--memory", f->memory, "Memory in MiB (default 1024)");
  run->callback([f, &g, &exit_code] {
    try {
      exit_code = run_box(g, *f);
    } catch (const Error& e) {
      std::fprintf(stderr, "Error: %s\n", e.what());
      std::string msg = e.what();
      if (msg.find("spawn_failed") != std::string::npos) {
        exit_code = msg.find("not found") != std::string::npos ? kExitNotFound : kExitCannotInvoke;
      } else {
        exit_code = kExitRuntimeError;
      }
    }
  });
}

}  // namespace boxlite::cli
