// The box-shaping flags `run` and `create` share, and the BoxOptions they make.
#include <cstdio>

#include "cli/commands.hpp"

namespace boxlite::cli {

void add_box_flags(CLI::App* c, BoxFlags& f) {
  c->add_option("image", f.image, "Image: a registry reference (alpine, host:port/repo:tag, name@sha256:...), an OCI layout directory, or oci:DIR[:TAG]")->required();
  c->add_option("cmd", f.cmd, "Command and arguments (default: the image's entrypoint and cmd)");
  c->positionals_at_end();
  c->add_option("--name", f.name, "Box name (unique)");
  c->add_option("-e,--env", f.env, "Set KEY=VALUE (a bare KEY takes the host value)");
  c->add_option("-w,--workdir", f.workdir, "Working directory inside the box");
  c->add_option("-u,--user", f.user, "user[:group], by name or number");
  c->add_option("--entrypoint", f.entrypoint, "Override the image entrypoint (one executable)");
  c->add_option("--engine", f.engine, "vm (default) or jail")->envname("BOXLITE_ENGINE");
  c->add_option("--kernel", f.kernel, "Guest kernel: a path, or 'debian' for Debian's prebuilt kernel");
  c->add_option("--cpus", f.cpus, "Virtual CPUs (default 1; over 255 is clamped)");
  c->add_option("--memory", f.memory, "Memory in MiB (default 1024)");
}

BoxOptions box_options_from(const BoxFlags& f) {
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
  return o;
}

}  // namespace boxlite::cli
