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

struct RunFlags {
  std::string image;
  std::vector<std::string> cmd;
  std::vector<std::string> env;
  std::string workdir, user, entrypoint, name, engine, kernel;
  int cpus = 0, memory = 0;
  bool rm = false, interactive = false, tty = false;
};

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
      exit_code = report_error(e);
    }
  });
}

}  // namespace boxlite::cli
