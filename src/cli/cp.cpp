// boxlite cp SRC BOX:DST | BOX:SRC DST: copy files between the host and a running
// box, with docker cp semantics (boxlite/copy.hpp).
#include <cstdio>
#include <optional>

#include "boxlite/error.hpp"
#include "boxlite/runtime.hpp"
#include "commands.hpp"

namespace boxlite::cli {
namespace {

struct CpFlags {
  std::string src, dst;
  bool follow_symlinks = false, no_overwrite = false, include_parent = true;
};

struct BoxPath {
  std::string box, path;
};

// docker's rule: a path that starts with "/" or "." is the host's (write "./a:b"
// for a host file with a colon); otherwise "BOX:PATH" names a path in BOX.
std::optional<BoxPath> parse_box_path(const std::string& arg) {
  if (arg.empty() || arg[0] == '/' || arg[0] == '.') return std::nullopt;
  auto colon = arg.find(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  return BoxPath{arg.substr(0, colon), arg.substr(colon + 1)};
}

void copy(const GlobalFlags& g, const CpFlags& f) {
  auto from = parse_box_path(f.src);
  auto to = parse_box_path(f.dst);
  if (from && to)
    throw Error(ErrorKind::InvalidArgument,
                "copying between boxes is not supported: one of SRC and DST must be a host path");
  if (!from && !to) throw Error(ErrorKind::InvalidArgument, "one of SRC and DST must be BOX:PATH");
  const BoxPath& bp = from ? *from : *to;
  if (bp.path.empty()) throw Error(ErrorKind::InvalidArgument, "no path after '" + bp.box + ":'");
  CopyOptions o;
  o.follow_symlinks = f.follow_symlinks;
  o.overwrite = !f.no_overwrite;
  o.include_parent = f.include_parent;
  Runtime rt(runtime_options(g));
  auto box = rt.attach(bp.box);
  if (from) {
    box->copy_out(from->path, f.dst, o);
  } else {
    box->copy_in(f.src, to->path, o);
  }
}

}  // namespace

void add_cp_command(CLI::App& app, GlobalFlags& g, int& exit_code) {
  auto f = std::make_shared<CpFlags>();
  CLI::App* cp = app.add_subcommand(
      "cp", "Copy files/directories between the host and a running box (BOX:PATH names the box side)");
  cp->add_option("src", f->src, "Source: a host path or BOX:PATH")->required();
  cp->add_option("dst", f->dst, "Destination: a host path or BOX:PATH")->required();
  cp->add_flag("-L,--follow-symlinks", f->follow_symlinks, "When SRC is a symlink, copy what it points to");
  cp->add_flag("--no-overwrite", f->no_overwrite, "Fail instead of replacing existing files");
  cp->add_flag(
      "--include-parent,!--no-include-parent", f->include_parent,
      "Copy a directory as DST/NAME into an existing DST (default; --include-parent=false copies its contents)");
  cp->callback([f, &g, &exit_code] {
    try {
      copy(g, *f);
      exit_code = 0;
    } catch (const Error& e) {
      // As docker cp: any failure is exit code 1 (there is no command whose code to pass on).
      std::fprintf(stderr, "Error: %s\n", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace boxlite::cli
