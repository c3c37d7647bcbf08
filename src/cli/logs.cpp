// boxlite logs BOX [-n N] [-f]: the main command's output, stdout to stdout and
// stderr to stderr. -f follows a running box until its main command exits.
#include <string>

#include "boxlite/error.hpp"
#include "boxlite/runtime.hpp"
#include "commands.hpp"
#include "output.hpp"

namespace boxlite::cli {
namespace {

struct LogsFlags {
  std::string box;
  size_t tail = 0;
  bool follow = false;
};

void print(const OutputChunk& c) { write_out(c.stream == StreamKind::Stdout ? 1 : 2, c.data.data(), c.data.size()); }

int logs(const GlobalFlags& g, const LogsFlags& f) {
  Runtime rt(runtime_options(g));
  auto box = rt.get(f.box);
  if (!box) throw rt.no_such_box(f.box);
  box->logs(f.tail, f.follow, print);
  return 0;
}

}  // namespace

void add_logs_command(CLI::App& app, GlobalFlags& g, int& exit_code) {
  auto f = std::make_shared<LogsFlags>();
  CLI::App* c = app.add_subcommand("logs", "Show the output of a box's main command");
  c->add_option("box", f->box, "Box ID or name")->required();
  c->add_option("-n,--tail", f->tail, "Only the last N lines (0 = all)")
      ->check(CLI::Validator(
          [](std::string& v) {
            return !v.empty() && v[0] == '-' ? "must be 0 (all) or a number of lines, got " + v : std::string();
          },
          "N>=0"))
      ->transform(whole_number<int64_t>());  // a transform runs first: "-1" is a number, then refused above
  c->add_flag("-f,--follow", f->follow, "Keep following the output while the box runs");
  c->callback([f, &g, &exit_code] {
    try {
      exit_code = logs(g, *f);
    } catch (const Error& e) {
      exit_code = report_box_error(e);
    }
  });
}

}  // namespace boxlite::cli
