// boxlite run IMAGE [CMD...]: create a box, run CMD in it with live output, exit
// with CMD's exit code.
#include <cstdio>
#include <optional>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/io.hpp"
#include "core/runtime.hpp"

namespace boxlite::cli {
namespace {

struct RunFlags : BoxFlags {
  bool rm = false, interactive = false, tty = false;
};

int run_box(const GlobalFlags& g, const RunFlags& f) {
  BoxOptions o = box_options_from(f);
  o.auto_remove = f.rm;

  Runtime rt(runtime_options(g));
  PullDisplay progress(rt, stderr);
  auto box = rt.create(o, f.name);
  ExecOptions e;
  e.argv = box->default_command();
  std::optional<ExecResult> result;
  std::optional<Error> failure;
  try {
    result = run_attached(*box, e, f.interactive, f.tty);
  } catch (const Error& err) {
    failure = err;
  }
  if (f.rm) {
    box->destroy();
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
  run->callback([f, &g, &exit_code] {
    try {
      exit_code = run_box(g, *f);
    } catch (const Error& e) {
      exit_code = report_error(e);
    }
  });
}

}  // namespace boxlite::cli
