// Density: start N idle jail boxes and report the host memory each costs (its
// shim and its agent), as RSS and as PSS (shared pages split between sharers).
// Usage: boxlite_bench_density IMAGE_DIR [N]
#include <dirent.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/io.hpp"
#include "core/runtime.hpp"

namespace {

long field_kib(const std::string& path, const std::string& key) {
  std::string text;
  try {
    text = boxlite::read_file(path);
  } catch (const boxlite::Error&) {
    return 0;
  }
  auto pos = text.find(key + ":");
  return pos == std::string::npos ? 0 : std::stol(text.substr(pos + key.size() + 1));
}

// Pids whose parent is ppid.
std::vector<int> children_of(int ppid) {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  while (auto* e = ::readdir(d)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    if (field_kib("/proc/" + std::to_string(pid) + "/status", "PPid") == ppid) out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s IMAGE_DIR [N]\n", argv[0]);
    return 2;
  }
  int n = argc > 2 ? std::atoi(argv[2]) : 100;
  try {
    boxlite::Runtime rt;
    std::vector<std::shared_ptr<boxlite::Box>> boxes;
    double start = boxlite::now_ms();
    for (int i = 0; i < n; ++i) {
      boxlite::BoxOptions o;
      o.rootfs_path = argv[1];
      o.engine = boxlite::EngineKind::Jail;
      auto b = rt.create(o);
      b->start();
      boxes.push_back(b);
    }
    double elapsed = boxlite::now_ms() - start;
    // Our children are the shims; a shim's children are its box's agent (the box's
    // init) and boxlite-net (its network). The main command under the agent is the
    // box's workload, not its overhead, and is not counted.
    struct Cost {
      long rss = 0, pss = 0;
      int procs = 0;
      void add(int pid) {
        rss += field_kib("/proc/" + std::to_string(pid) + "/status", "VmRSS");
        pss += field_kib("/proc/" + std::to_string(pid) + "/smaps_rollup", "Pss");
        ++procs;
      }
    } shims, agents, nets;
    for (int shim : children_of(::getpid())) {
      shims.add(shim);
      for (int child : children_of(shim)) {
        std::string comm = boxlite::trim(boxlite::read_file("/proc/" + std::to_string(child) + "/comm"));
        (comm == "boxlite-net" ? nets : agents).add(child);
      }
    }
    std::printf("%d idle jail boxes started in %.0f ms (%.1f ms each)\n", n, elapsed, elapsed / n);
    for (auto [name, c] : {std::pair{"shim", &shims}, std::pair{"agent", &agents}, std::pair{"boxlite-net", &nets}}) {
      std::printf("  %-12s %3d processes: RSS %.2f MiB, PSS %.2f MiB per box\n", name, c->procs, c->rss / 1024.0 / n,
                  c->pss / 1024.0 / n);
    }
    long rss = shims.rss + agents.rss + nets.rss, pss = shims.pss + agents.pss + nets.pss;
    std::printf("per box: RSS %.2f MiB, PSS %.2f MiB (shim + agent + boxlite-net)\n", rss / 1024.0 / n,
                pss / 1024.0 / n);
    for (auto& b : boxes) b->destroy();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
