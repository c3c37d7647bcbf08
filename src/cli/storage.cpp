// Storage commands (not in the reference CLI; named as docs/storage.md says):
//   boxlite snapshot create|ls|rm|restore BOX [NAME]
//   boxlite clone BOX [--name NAME]
//   boxlite export BOX [-o DIR]
//   boxlite import FILE [--name NAME]
// Argument handling over Runtime and Box::snapshot().
#include <cstdio>
#include <ctime>
#include <memory>

#include "boxlite/runtime.hpp"
#include "commands.hpp"

namespace boxlite::cli {
namespace {

// Unix seconds as 2026-12-01T07:03:12Z.
std::string utc_time(int64_t seconds) {
  time_t t = static_cast<time_t>(seconds);
  tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::shared_ptr<Box> find_box(Runtime& rt, const std::string& id) {
  auto box = rt.get(id);
  if (!box) throw rt.no_such_box(id);
  return box;
}

// Runs `fn` with a runtime, turning errors into the exit code (by default those of
// a command that takes a box).
template <typename Fn>
void with_runtime(GlobalFlags& g, int& exit_code, Fn fn, int (*report)(const Error&) = report_box_error) {
  try {
    Runtime rt(runtime_options(g));
    fn(rt);
    exit_code = 0;
  } catch (const Error& e) {
    exit_code = report(e);
  }
}

void add_snapshot_commands(CLI::App& app, GlobalFlags& g, int& exit_code) {
  CLI::App* snap = app.add_subcommand("snapshot", "Snapshots of a stopped box's disk");
  snap->require_subcommand(1);
  struct Args {
    std::string box, name;
  };
  auto a = std::make_shared<Args>();
  auto box_and_name = [a](CLI::App* c) {
    c->add_option("box", a->box, "Box ID or name")->required();
    c->add_option("name", a->name, "Snapshot name")->required();
  };
  CLI::App* create = snap->add_subcommand("create", "Snapshot the box's disk");
  box_and_name(create);
  create->callback([a, &g, &exit_code] {
    with_runtime(g, exit_code, [&](Runtime& rt) {
      SnapshotInfo s = find_box(rt, a->box)->snapshot().create(a->name);
      std::printf("%s\n", s.id.c_str());
    });
  });
  CLI::App* ls = snap->add_subcommand("ls", "List the box's snapshots");
  ls->alias("list");
  ls->add_option("box", a->box, "Box ID or name")->required();
  ls->callback([a, &g, &exit_code] {
    with_runtime(g, exit_code, [&](Runtime& rt) {
      auto snapshots = find_box(rt, a->box)->snapshot().list();  // a missing box: no header first
      std::printf("%-20s %-18s %-20s %s\n", "NAME", "ID", "CREATED", "SIZE");
      for (const auto& s : snapshots) {
        std::printf("%-20s %-18s %-20s %llu\n", s.name.c_str(), s.id.c_str(), utc_time(s.created_at).c_str(),
                    static_cast<unsigned long long>(s.size_bytes));
      }
    });
  });
  CLI::App* rm = snap->add_subcommand("rm", "Remove a snapshot");
  box_and_name(rm);
  rm->callback([a, &g, &exit_code] {
    with_runtime(g, exit_code, [&](Runtime& rt) { find_box(rt, a->box)->snapshot().remove(a->name); });
  });
  CLI::App* restore = snap->add_subcommand("restore", "Put the box's disk back to a snapshot (box stopped)");
  box_and_name(restore);
  restore->callback([a, &g, &exit_code] {
    with_runtime(g, exit_code, [&](Runtime& rt) { find_box(rt, a->box)->snapshot().restore(a->name); });
  });
}

}  // namespace

void add_storage_commands(CLI::App& app, GlobalFlags& g, int& exit_code) {
  add_snapshot_commands(app, g, exit_code);
  struct Args {
    std::string box, name, dir = ".", file;
  };
  auto a = std::make_shared<Args>();
  CLI::App* clone = app.add_subcommand("clone", "An independent copy of a stopped box, created stopped");
  clone->add_option("box", a->box, "Box ID or name")->required();
  clone->add_option("--name", a->name, "Name of the clone");
  clone->callback([a, &g, &exit_code] {
    with_runtime(g, exit_code, [&](Runtime& rt) {
      std::printf("%s\n", rt.clone_box(*find_box(rt, a->box), a->name, /*detach=*/true)->id().c_str());
    });
  });
  CLI::App* exp = app.add_subcommand("export", "Write a stopped box to DIR/<name or id>.boxlite (vm engine)");
  exp->add_option("box", a->box, "Box ID or name")->required();
  exp->add_option("-o,--output", a->dir, "Destination directory (default: the current one)");
  exp->callback([a, &g, &exit_code] {
    with_runtime(g, exit_code,
                 [&](Runtime& rt) { std::printf("%s\n", rt.export_box(*find_box(rt, a->box), a->dir).c_str()); });
  });
  CLI::App* imp = app.add_subcommand("import", "Create a box from a .boxlite archive");
  imp->add_option("file", a->file, "The .boxlite archive")->required();
  imp->add_option("--name", a->name, "Name of the new box");
  imp->callback([a, &g, &exit_code] {
    with_runtime(
        g, exit_code,
        [&](Runtime& rt) { std::printf("%s\n", rt.import_box(a->file, a->name, /*detach=*/true)->id().c_str()); },
        report_error);  // takes no box
  });
}

}  // namespace boxlite::cli
