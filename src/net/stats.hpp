// Per-box network counters. boxlite-net keeps them in a small shared file in the
// box directory (<box_dir>/net.stats, mmap'ed, updated in place), so any runtime
// process reads them without a round trip to the shim.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace boxlite::net {

struct NetMetrics {
  uint64_t bytes_sent = 0;       // guest -> network (Ethernet frames the guest sent)
  uint64_t bytes_received = 0;   // network -> guest
  uint64_t tcp_connections = 0;  // TCP connections opened (by the guest, or forwarded in)
  uint64_t tcp_errors = 0;       // TCP connections refused by the policy or reset by the host side
  uint64_t packets_dropped = 0;  // frames dropped (policy, malformed, full queues)
};

inline std::string stats_path(const std::string& box_dir) { return box_dir + "/net.stats"; }

// The counters of a box; nullopt when it has no network (disabled, or never started).
std::optional<NetMetrics> read_net_metrics(const std::string& box_dir);

// The writer side, in boxlite-net: a mapping of the file that lives as long as it.
class StatsFile {
 public:
  explicit StatsFile(const std::string& path);  // throws Error
  ~StatsFile();
  StatsFile(const StatsFile&) = delete;
  StatsFile& operator=(const StatsFile&) = delete;
  void add_sent(uint64_t n) { bump(0, n); }
  void add_received(uint64_t n) { bump(1, n); }
  void add_connection() { bump(2, 1); }
  void add_tcp_error() { bump(3, 1); }
  void add_dropped() { bump(4, 1); }

 private:
  void bump(int index, uint64_t n);
  uint64_t* counters_ = nullptr;
};

}  // namespace boxlite::net
