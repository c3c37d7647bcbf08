// Warm exec round trip: `true` in a running box, against native fork+exec of
// `true` measured in the same run. Usage: boxlite_bench_exec IMAGE_DIR [runs]
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "common/error.hpp"
#include "core/runtime.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median_ms, p99_ms;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)]};
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s IMAGE_DIR [runs]\n", argv[0]);
    return 2;
  }
  int runs = argc > 2 ? std::atoi(argv[2]) : 200;
  try {
    boxlite::Runtime rt;
    boxlite::BoxOptions o;
    o.rootfs_path = argv[1];
    auto box = rt.create(o);
    box->start();
    boxlite::ExecOptions e;
    e.argv = {"true"};
    for (int i = 0; i < 10; ++i) box->run(e);  // warm the guest's page cache
    std::vector<double> boxed, native;
    for (int i = 0; i < runs; ++i) {
      auto t = Clock::now();
      box->run(e);
      boxed.push_back(ms_since(t));
    }
    for (int i = 0; i < runs; ++i) {
      auto t = Clock::now();
      pid_t pid;
      char arg0[] = "true";
      char* args[] = {arg0, nullptr};
      posix_spawnp(&pid, "true", nullptr, nullptr, args, environ);
      int st;
      waitpid(pid, &st, 0);
      native.push_back(ms_since(t));
    }
    // 1 KiB through stdin and back (cat), each a fresh exec.
    std::vector<double> echo;
    const std::string kib(1024, 'x');
    boxlite::ExecOptions c;
    c.argv = {"cat"};
    c.stdin_open = true;
    for (int i = 0; i < runs; ++i) {
      auto t = Clock::now();
      boxlite::Execution ex = box->exec(c);
      ex.write_stdin(kib);
      ex.close_stdin();
      size_t got = 0;
      while (auto chunk = ex.next_output()) got += chunk->data.size();
      ex.wait();
      echo.push_back(ms_since(t));
      if (got != kib.size()) throw std::runtime_error("echo lost bytes");
    }
    // The same round trip without a process: an exec the agent refuses (no such
    // file), i.e. what the box adds on top of starting the command itself.
    std::vector<double> refused;
    boxlite::ExecOptions missing;
    missing.argv = {"/nonexistent-command"};
    for (int i = 0; i < runs; ++i) {
      auto t = Clock::now();
      try {
        box->run(missing);
        throw std::runtime_error("an exec of a missing file succeeded");
      } catch (const boxlite::Error&) {
      }
      refused.push_back(ms_since(t));
    }
    auto b = stats(boxed), n = stats(native), ec = stats(echo), rf = stats(refused);
    std::printf("exec `true` in a running box (%d runs): median %.2f ms, p99 %.2f ms\n", runs, b.median_ms, b.p99_ms);
    std::printf("native fork+exec `true`     (%d runs): median %.2f ms, p99 %.2f ms\n", runs, n.median_ms, n.p99_ms);
    std::printf("ratio (median): %.1fx\n", b.median_ms / n.median_ms);
    std::printf("1 KiB stdin echoed by cat    (%d runs): median %.2f ms, p99 %.2f ms\n", runs, ec.median_ms, ec.p99_ms);
    std::printf("refused exec (no process)    (%d runs): median %.2f ms, p99 %.2f ms\n", runs, rf.median_ms, rf.p99_ms);
    box->destroy();
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "error: %s\n", ex.what());
    return 1;
  }
  return 0;
}
