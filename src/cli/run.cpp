// boxlite run IMAGE [CMD...]: create a box whose main command is CMD (default: the
// image's), start it and follow that command with live output; exit with its exit
// code. With -d, print the box id and leave it running.
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "boxlite/error.hpp"
#include "boxlite/runtime.hpp"
#include "boxlite/trace.hpp"
#include "commands.hpp"

namespace boxlite::cli {
namespace {

struct RunFlags : BoxFlags {
  bool rm = false, interactive = false, tty = false, detach = false;
};

// A run opens the store on a thread: it overlaps the image and the spec.
RuntimeOptions run_runtime_options(GlobalFlags& g) {
  RuntimeOptions ro = runtime_options(g);
  ro.open_store_in_background = true;
  ro.early_shim = std::move(g.early_shim);
  return ro;
}

int run_detached(GlobalFlags& g, const RunFlags& f) {
  BoxOptions o = box_options_from(f);
  o.detach = true;
  o.auto_remove = false;  // as documented: -d forces auto_remove=false
  o.main_tty = f.tty;
  o.main_stdin = true;  // nobody writes it, but a shell main command keeps the box up
  // Its start overlaps ours (boxlite::EarlyShim), a jail box's disk too.
  EarlyShimGuess guess{.home_dir = g.home, .engine = o.engine, .auto_remove = false};
  if (o.disk_size_gb) guess.disk_size_gb = *o.disk_size_gb;
  g.early_shim = EarlyShim::start(/*detached=*/true, guess);
  Runtime rt(run_runtime_options(g));
  PullDisplay progress(rt, stderr);
  auto box = rt.create_to_start(o, f.name);
  // A start that fails (a command not found: exit 127) leaves the box, stopped, as
  // an attached run does and docker does: -d means auto_remove=false, so it is `rm`'s,
  // and its ID is printed all the same, for the script that removes it.
  try {
    box->start();
  } catch (const Error&) {
    std::printf("%s\n", box->id().c_str());
    throw;
  }
  std::printf("%s\n", box->id().c_str());
  return 0;
}

int run_box(GlobalFlags& g, const RunFlags& f) {
  if (f.detach) return run_detached(g, f);
  BoxOptions o = box_options_from(f);
  o.auto_remove = f.rm;
  o.main_tty = f.tty;
  o.main_stdin = f.interactive;
  if (f.tty) terminal_size(o.main_rows, o.main_cols);
  // It lives as long as we do. Usually main() spawned it already, before parsing.
  if (!g.early_shim) g.early_shim = EarlyShim::start(/*detached=*/false);

  Runtime rt(run_runtime_options(g));
  trace("cli: runtime open");
  PullDisplay progress(rt, stderr);
  auto box = rt.create_to_start(o, f.name);
  trace("cli: created");
  std::optional<ExecResult> result;
  std::optional<Error> failure;
  try {
    result = follow(
        *box, [&] { return box->attach(/*with_stdin=*/f.interactive); }, f.interactive, f.tty);
  } catch (const Error& err) {
    failure = err;
  }
  trace("cli: main command ended");
  if (f.rm) {
    box->destroy();
    trace("cli: destroyed");
  } else {
    box->stop();
  }
  if (failure) throw *failure;
  return exit_code_for_result(*result);
}

}  // namespace

void add_run_command(CLI::App& app, GlobalFlags& g, int& exit_code) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* run = app.add_subcommand("run", "Create a box from IMAGE and run CMD in it (exit code = CMD's)");
  add_box_flags(run, *f);
  run->prefix_command(false);
  run->add_flag("--rm", f->rm, "Remove the box when the command exits");
  run->add_flag("-i,--interactive", f->interactive, "Keep stdin open");
  run->add_flag("-t,--tty", f->tty, "Allocate a pseudo-terminal (stdout and stderr merge)");
  run->add_flag("-d,--detach", f->detach, "Run in the background and print the box ID (forces auto_remove off)");
  run->callback([f, &g, &exit_code] {
    try {
      exit_code = run_box(g, *f);
    } catch (const Error& e) {
      exit_code = report_error(e);
    }
  });
}

}  // namespace boxlite::cli
