// Per-exec overhead of the C API over the C++ core, in the same run and the same
// box: `true` run to completion through Box::exec + Execution::wait (core), and
// through boxlite_box_exec + boxlite_execution_wait + boxlite_runtime_drain (C API),
// alternating run by run. Both open stdin, as the C API always does.
// Usage: boxlite_bench_capi_exec IMAGE_DIR [runs]   (BOXLITE_ENGINE picks the engine)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "boxlite.h"
#include "capi/state.hpp"  // the handle's core Box: the same box for both paths

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Stats {
  double median, p99;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)]};
}

struct Done {
  int done = 0, code = -1;
  size_t bytes = 0;
};

void die(const char* what, CBoxliteError& e) {
  std::fprintf(stderr, "%s failed (code %d): %s\n", what, e.code, e.message ? e.message : "?");
  std::exit(1);
}

void pump(CBoxliteRuntime* rt, const int& done) {
  CBoxliteError e{};
  while (!done) {
    if (boxlite_runtime_drain(rt, -1, &e) < 0) die("drain", e);
  }
}

// One command through the C API: exec, wait, drain until the wait callback.
void capi_run(CBoxliteRuntime* rt, CBoxHandle* box, const BoxliteCommand& cmd, bool collect) {
  CBoxliteError e{};
  CExecutionHandle* ex = nullptr;
  if (boxlite_box_exec(box, &cmd, &ex, &e) != Ok) die("boxlite_box_exec", e);
  Done d;
  if (collect) {
    boxlite_execution_on_stdout(
        ex, [](const uint8_t*, size_t n, void* ud) { static_cast<Done*>(ud)->bytes += n; }, &d, &e);
  }
  auto on_wait = [](int code, CBoxliteError*, void* ud) {
    static_cast<Done*>(ud)->code = code;
    static_cast<Done*>(ud)->done = 1;
  };
  if (boxlite_execution_wait(ex, on_wait, &d, &e) != Ok) die("boxlite_execution_wait", e);
  pump(rt, d.done);
  boxlite_execution_free(ex);
  if (d.code != 0) std::exit(1);
}

// The same through the core.
void core_run(boxlite::Box& box, const boxlite::ExecOptions& o) {
  boxlite::Execution ex = box.exec(o);
  while (ex.next_output()) {
  }
  if (ex.wait().exit_code != 0) std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s IMAGE_DIR [runs]\n", argv[0]);
    return 2;
  }
  int runs = argc > 2 ? std::atoi(argv[2]) : 300;
  CBoxliteError e{};
  CBoxliteRuntime* rt = nullptr;
  if (boxlite_runtime_new(nullptr, nullptr, 0, &rt, &e) != Ok) die("boxlite_runtime_new", e);
  CBoxliteOptions* opts = nullptr;
  if (boxlite_options_new(argv[1], &opts, &e) != Ok) die("boxlite_options_new", e);
  Done created;
  CBoxHandle* box = nullptr;
  struct Created {
    Done* d;
    CBoxHandle** box;
  } c{&created, &box};
  auto on_created = [](CBoxHandle* b, CBoxliteError* err, void* ud) {
    auto* cc = static_cast<Created*>(ud);
    if (err && err->code != Ok) std::exit(1);
    *cc->box = b;
    cc->d->done = 1;
  };
  if (boxlite_create_box(rt, opts, on_created, &c, &e) != Ok) die("boxlite_create_box", e);
  pump(rt, created.done);
  boxlite_options_free(opts);
  boxlite::Box& core_box = *box->box;
  core_box.start();

  for (const char* what : {"true", "echo"}) {
    bool echo = what[0] == 'e';
    const char* args[] = {"hello"};
    BoxliteCommand cmd{};
    cmd.command = what;
    cmd.args = echo ? args : nullptr;
    cmd.argc = echo ? 1 : 0;
    boxlite::ExecOptions o;
    o.argv = echo ? std::vector<std::string>{"echo", "hello"} : std::vector<std::string>{"true"};
    o.stdin_open = true;
    for (int i = 0; i < 20; ++i) {  // warm both paths
      core_run(core_box, o);
      capi_run(rt, box, cmd, echo);
    }
    std::vector<double> core, capi;
    for (int i = 0; i < runs; ++i) {
      auto t = Clock::now();
      core_run(core_box, o);
      core.push_back(ms_since(t));
      t = Clock::now();
      capi_run(rt, box, cmd, echo);
      capi.push_back(ms_since(t));
    }
    Stats a = stats(core), b = stats(capi);
    std::printf(
        "`%s` (%d runs): core median %.3f ms (p99 %.3f), C API median %.3f ms (p99 %.3f), added %.3f ms (%.2fx)\n",
        echo ? "echo hello" : "true", runs, a.median, a.p99, b.median, b.p99, b.median - a.median, b.median / a.median);
  }
  boxlite_box_free(box);
  boxlite_runtime_free(rt);
  return 0;
}
