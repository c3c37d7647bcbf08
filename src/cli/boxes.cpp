// Box management: create, start, stop, restart, rm, list (ls, ps), inspect, exec.
// Each is argument handling over Runtime; boxes made here are detached, so they
// outlive this process and any later `boxlite` reaches them through their shim.
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "boxlite/runtime.hpp"
#include "commands.hpp"
#include "output.hpp"

namespace boxlite::cli {

namespace {

std::string iso_time(int64_t ms) {
  if (ms <= 0) return "";
  time_t t = static_cast<time_t>(ms / 1000);
  tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  return std::string(buf) + "." + std::to_string(1000 + ms % 1000).substr(1) + "Z";
}

std::string ago(int64_t ms) {
  int64_t now = static_cast<int64_t>(std::time(nullptr)) * 1000;
  int64_t s = std::max<int64_t>(0, (now - ms) / 1000);
  if (s < 60) return std::to_string(s) + " seconds ago";
  if (s < 3600) return std::to_string(s / 60) + " minutes ago";
  if (s < 86400) return std::to_string(s / 3600) + " hours ago";
  return std::to_string(s / 86400) + " days ago";
}

// The inspect document, in the shape docker users know.
nlohmann::json inspect_json(const BoxInfo& i) {
  return {
      {"Id", i.id},
      {"Name", i.name},
      {"Image", i.image},
      {"Created", iso_time(i.created_at_ms)},
      {"State",
       {{"Status", box_state_name(i.status)},
        {"Running", i.status == BoxState::Running},
        {"Pid", i.shim_pid},
        {"StartedAt", iso_time(i.started_at_ms)},
        {"FinishedAt", iso_time(i.stopped_at_ms)},
        {"Error", i.stop_reason}}},
      {"Config",
       {{"Engine", engine_kind_name(i.engine)},
        {"Cpus", i.cpus},
        {"MemoryMib", i.memory_mib},
        {"AutoRemove", i.auto_remove},
        {"Detach", i.detach}}},
  };
}

// {{.A.B}} paths over the inspect document (the subset of Go templates people use).
std::string render_template(const std::string& tmpl, const nlohmann::json& doc) {
  std::string out;
  size_t pos = 0;
  while (pos < tmpl.size()) {
    size_t open = tmpl.find("{{", pos);
    if (open == std::string::npos) {
      out += tmpl.substr(pos);
      break;
    }
    out += tmpl.substr(pos, open - pos);
    size_t close = tmpl.find("}}", open);
    if (close == std::string::npos)
      throw Error(ErrorKind::InvalidArgument, "template: unclosed '{{' in '" + tmpl + "'");
    std::string expr = tmpl.substr(open + 2, close - open - 2);
    while (!expr.empty() && expr.front() == ' ') expr.erase(0, 1);
    while (!expr.empty() && expr.back() == ' ') expr.pop_back();
    if (expr.empty() || expr[0] != '.')
      throw Error(ErrorKind::InvalidArgument, "template: unsupported expression '" + expr + "'");
    const nlohmann::json* node = &doc;
    for (const auto& key : split(expr.substr(1), '.')) {
      if (key.empty()) continue;
      if (!node->is_object() || !node->contains(key))
        throw Error(ErrorKind::InvalidArgument, "template: no field '" + expr + "'");
      node = &(*node)[key];
    }
    out += node->is_string() ? node->get<std::string>() : node->dump();
    pos = close + 2;
  }
  return out;
}

std::shared_ptr<Box> must_get(Runtime& rt, const std::string& id) {
  auto box = rt.get(id);
  if (!box) throw rt.no_such_box(id);
  return box;
}

// Runs fn over each box; failures are reported and make the exit code 1, as docker does.
template <typename Fn>
int for_each_box(const std::vector<std::string>& ids, Fn fn) {
  int rc = 0;
  for (const auto& id : ids) {
    try {
      fn(id);
      std::printf("%s\n", id.c_str());
    } catch (const Error& e) {
      report_error(e);
      rc = 1;
    }
  }
  return rc;
}

void add_create(CLI::App& app, GlobalFlags& g, int& exit_code) {
  auto f = std::make_shared<BoxFlags>();
  CLI::App* c = app.add_subcommand("create", "Create a box (nothing boots until start or exec); prints its ID");
  add_box_flags(c, *f);
  c->callback([f, &g, &exit_code] {
    try {
      BoxOptions o = box_options_from(*f);
      o.auto_remove = false;  // a CLI box lives until `rm`
      o.detach = true;        // and outlives each `boxlite` that touches it
      Runtime rt(runtime_options(g));
      PullDisplay progress(rt, stderr);
      auto box = rt.create(o, f->name);
      std::printf("%s\n", box->id().c_str());
      exit_code = 0;
    } catch (const Error& e) {
      exit_code = report_error(e);
    }
  });
}

void add_lifecycle(CLI::App& app, GlobalFlags& g, int& exit_code, const char* name, const char* help,
                   void (*action)(Runtime&, const std::string&)) {
  auto ids = std::make_shared<std::vector<std::string>>();
  CLI::App* c = app.add_subcommand(name, help);
  c->add_option("box", *ids, "Box IDs or names")->required();
  c->callback([ids, &g, &exit_code, action] {
    try {
      Runtime rt(runtime_options(g));
      exit_code = for_each_box(*ids, [&](const std::string& id) { action(rt, id); });
    } catch (const Error& e) {
      exit_code = report_box_error(e);
    }
  });
}

void add_rm(CLI::App& app, GlobalFlags& g, int& exit_code) {
  auto ids = std::make_shared<std::vector<std::string>>();
  auto force = std::make_shared<bool>(false);
  auto all = std::make_shared<bool>(false);
  CLI::App* c = app.add_subcommand("rm", "Remove boxes (a running one needs -f)");
  c->add_option("box", *ids, "Box IDs or names");
  c->add_flag("-f,--force", *force, "Stop running boxes first; with -a, do not ask");
  c->add_flag("-a,--all", *all, "Remove every box");
  c->callback([ids, force, all, &g, &exit_code] {
    try {
      if (ids->empty() && !*all) throw CLI::ValidationError("rm", "give at least one BOX, or --all");
      if (!ids->empty() && *all) throw CLI::ValidationError("rm", "give either BOX names or --all, not both");
      Runtime rt(runtime_options(g));
      if (*all) {
        if (!*force) {
          std::fprintf(stderr, "Remove all boxes? [y/N] ");
          std::string answer;
          std::getline(std::cin, answer);
          if (answer != "y" && answer != "Y" && answer != "yes") {
            std::fprintf(stderr, "Aborted.\n");
            exit_code = 1;
            return;
          }
        }
        for (const auto& i : rt.list_info()) ids->push_back(i.id);
      }
      // As for named boxes, a running one needs -f: `rm -a` answered yes removes
      // the others and says which are still running.
      exit_code = for_each_box(*ids, [&](const std::string& id) { rt.remove(id, *force); });
    } catch (const Error& e) {
      exit_code = report_box_error(e);
    }
  });
}

void add_list(CLI::App& app, GlobalFlags& g, int& exit_code) {
  auto all = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  auto format = std::make_shared<std::string>("table");
  CLI::App* c = app.add_subcommand("list", "List boxes (running ones; -a for all)");
  c->alias("ls");
  c->alias("ps");
  c->add_flag("-a,--all", *all, "Show all boxes, not only running ones");
  c->add_flag("-q,--quiet", *quiet, "Only IDs");
  c->add_option("--format", *format, "table, json or yaml")->check(CLI::IsMember({"table", "json", "yaml"}));
  c->callback([all, quiet, format, &g, &exit_code] {
    try {
      Runtime rt(runtime_options(g));
      std::vector<BoxInfo> boxes;
      for (auto& i : rt.list_info()) {
        if (*all || i.status == BoxState::Running) boxes.push_back(i);
      }
      if (*quiet) {
        for (const auto& i : boxes) std::printf("%s\n", i.id.c_str());
      } else if (*format == "table") {
        std::printf("%-14s %-20s %-10s %-8s %-20s %s\n", "ID", "NAME", "STATUS", "ENGINE", "CREATED", "IMAGE");
        for (const auto& i : boxes) {
          std::printf("%-14s %-20s %-10s %-8s %-20s %s\n", i.id.c_str(), i.name.c_str(),
                      std::string(box_state_name(i.status)).c_str(), std::string(engine_kind_name(i.engine)).c_str(),
                      ago(i.created_at_ms).c_str(), i.image.c_str());
        }
      } else {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& i : boxes) arr.push_back(inspect_json(i));
        if (*format == "json") {
          std::printf("%s\n", arr.dump(2).c_str());
        } else {
          print_yaml(arr, std::cout);
        }
      }
      exit_code = 0;
    } catch (const Error& e) {
      exit_code = report_error(e);
    }
  });
}

void add_inspect(CLI::App& app, GlobalFlags& g, int& exit_code) {
  auto ids = std::make_shared<std::vector<std::string>>();
  auto latest = std::make_shared<bool>(false);
  auto format = std::make_shared<std::string>("json");
  CLI::App* c = app.add_subcommand("inspect", "Show boxes' details (json, yaml, or a {{.Field}} template)");
  auto* box_opt = c->add_option("box", *ids, "Box IDs or names");
  c->add_flag("-l,--latest", *latest, "The most recently created box")->excludes(box_opt);
  c->add_option("-f,--format", *format, "json (default), yaml, or a template such as '{{.State.Status}}'");
  c->callback([ids, latest, format, &g, &exit_code] {
    try {
      Runtime rt(runtime_options(g));
      if (*latest) {
        auto all = rt.list_info();
        if (all.empty()) throw Error(ErrorKind::NotFound, "no boxes");
        ids->push_back(all.front().id);
      }
      if (ids->empty()) throw CLI::ValidationError("inspect", "give at least one BOX, or --latest");
      // As docker does: the boxes found are shown, each one missing is an error (exit 1).
      nlohmann::json docs = nlohmann::json::array();
      int missing = 0;
      for (const auto& id : *ids) {
        try {
          try {
            docs.push_back(inspect_json(rt.get_info(id)));
          } catch (const Error& e) {
            if (e.kind() != ErrorKind::NotFound) throw;
            throw rt.no_such_box(id);
          }
        } catch (const Error& e) {
          if (ids->size() == 1) throw;
          report_box_error(e);
          ++missing;
        }
      }
      exit_code = missing > 0 ? 1 : 0;
      if (*format == "json") {
        std::printf("%s\n", docs.dump(2).c_str());
      } else if (*format == "yaml") {
        print_yaml(nlohmann::json(docs), std::cout);
      } else {
        for (const auto& d : docs) std::printf("%s\n", render_template(*format, d).c_str());
      }
    } catch (const Error& e) {
      exit_code = report_box_error(e);
    }
  });
}

struct ExecFlags {
  std::string box, workdir, user, entrypoint;
  std::vector<std::string> cmd, env;
  bool interactive = false, tty = false, detach = false;
};

void add_exec_options(CLI::App* c, ExecFlags& f) {
  c->add_flag("-i,--interactive", f.interactive, "Keep stdin open");
  c->add_flag("-t,--tty", f.tty, "Allocate a pseudo-terminal");
  c->add_flag("-d,--detach", f.detach, "Start the command in the background and return");
  c->add_option("-e,--env", f.env, "Set KEY=VALUE (a bare KEY takes the host value; repeatable)")
      ->allow_extra_args(false);
  c->add_option("-w,--workdir", f.workdir, "Working directory");
  c->add_option("-u,--user", f.user, "user[:group]");
  c->add_option("--entrypoint", f.entrypoint, "The executable to run, CMD its arguments");
}

// `exec BOX -e K=V -- CMD`: options after BOX, up to the `--`, are the command's
// options as clap takes them (the words after BOX are all positional to CLI11 once
// BOX is seen), and so are the global ones (--debug, --home, --registry, --config),
// global in clap's sense. Only when the first word after BOX is an option and a `--`
// follows: `exec BOX sh -c 'echo -- x'` stays a command.
void parse_options_between_box_and_dashes(ExecFlags& f, GlobalFlags& g) {
  auto dashes = std::find(f.cmd.begin(), f.cmd.end(), "--");
  if (f.cmd.empty() || f.cmd.front().size() < 2 || f.cmd.front()[0] != '-' || dashes == f.cmd.end()) return;
  std::vector<std::string> options(f.cmd.begin(), dashes);
  ExecFlags later;  // merged below: CLI11 would replace the -e values given before BOX
  GlobalFlags later_g;
  CLI::App sub("exec options");
  add_exec_options(&sub, later);
  sub.add_flag("--debug", later_g.debug);
  sub.add_option("--home", later_g.home);
  sub.add_option("--registry", later_g.registries)->allow_extra_args(false);
  sub.add_option("--config", later_g.config);
  add_remote_flags(sub);
  std::vector<std::string> reversed(options.rbegin(), options.rend());  // CLI11 parses a vector back to front
  try {
    sub.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw Error(ErrorKind::InvalidArgument, std::string("exec: ") + e.what());
  }
  f.env.insert(f.env.end(), later.env.begin(), later.env.end());
  f.interactive = f.interactive || later.interactive;
  f.tty = f.tty || later.tty;
  f.detach = f.detach || later.detach;
  for (auto [field, value] : {std::pair{&f.workdir, &later.workdir}, std::pair{&f.user, &later.user},
                              std::pair{&f.entrypoint, &later.entrypoint}}) {
    if (!value->empty()) *field = *value;
  }
  for (auto [field, value] : {std::pair{&g.home, &later_g.home}, std::pair{&g.config, &later_g.config}}) {
    if (!value->empty()) *field = *value;
  }
  g.registries.insert(g.registries.end(), later_g.registries.begin(), later_g.registries.end());
  if (later_g.debug && !g.debug) {
    g.debug = true;
    enable_debug_output();
  }
  f.cmd.erase(f.cmd.begin(), dashes);
}

void add_exec(CLI::App& app, GlobalFlags& g, int& exit_code) {
  auto f = std::make_shared<ExecFlags>();
  CLI::App* c = app.add_subcommand("exec", "Run a command in a box: exec [OPTIONS] BOX -- CMD [ARGS...]");
  c->add_option("box", f->box, "Box ID or name")->required();
  c->add_option("cmd", f->cmd, "Command and arguments");
  c->positionals_at_end();
  add_exec_options(c, *f);
  c->callback([f, &g, &exit_code] {
    try {
      parse_options_between_box_and_dashes(*f, g);
      Runtime rt(runtime_options(g));
      auto box = must_get(rt, f->box);
      if (box->state() != BoxState::Running) {
        throw Error(ErrorKind::InvalidState, "box " + f->box + " is not running: start it first");
      }
      ExecOptions e;
      e.argv = f->cmd;
      if (!e.argv.empty() && e.argv.front() == "--") e.argv.erase(e.argv.begin());
      if (!f->entrypoint.empty()) e.argv.insert(e.argv.begin(), f->entrypoint);
      if (e.argv.empty()) throw Error(ErrorKind::InvalidArgument, "exec: no command given (exec BOX -- CMD [ARGS...])");
      e.env = parse_env(f->env);
      e.cwd = f->workdir;
      e.user = f->user;
      if (f->detach) {
        if (f->interactive || f->tty)
          throw Error(ErrorKind::InvalidArgument, "exec: -d cannot be combined with -i or -t");
        e.detach = true;
        box->exec(e);  // started; it runs on in the box after we let go
        exit_code = 0;
        return;
      }
      exit_code = exit_code_for_result(run_attached(*box, e, f->interactive, f->tty));
    } catch (const Error& e) {
      exit_code = report_box_error(e);
    }
  });
}

}  // namespace

namespace {
// Started here, a box must outlive this process, even one a foreground `run` made.
void start_detached(const std::shared_ptr<Box>& box) {
  box->make_detached();
  box->start();
}
}  // namespace

void add_box_commands(CLI::App& app, GlobalFlags& g, int& exit_code) {
  add_create(app, g, exit_code);
  add_lifecycle(app, g, exit_code, "start", "Start boxes",
                [](Runtime& rt, const std::string& id) { start_detached(must_get(rt, id)); });
  add_lifecycle(app, g, exit_code, "stop", "Stop boxes (the disk is kept)",
                [](Runtime& rt, const std::string& id) { must_get(rt, id)->stop(); });
  add_lifecycle(app, g, exit_code, "restart", "Stop, then start boxes", [](Runtime& rt, const std::string& id) {
    must_get(rt, id)->stop();
    start_detached(must_get(rt, id));
  });
  add_rm(app, g, exit_code);
  add_list(app, g, exit_code);
  add_inspect(app, g, exit_code);
  add_exec(app, g, exit_code);
}

}  // namespace boxlite::cli
