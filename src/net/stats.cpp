#include "net/stats.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace boxlite::net {
namespace {
// Version word, then the counters in NetMetrics order.
constexpr uint64_t kMagic = 0x31737473'6e78626cull;  // "lbxnsts1"
constexpr size_t kCounters = 5;
constexpr size_t kSize = (1 + kCounters) * sizeof(uint64_t);
}  // namespace

std::optional<NetMetrics> read_net_metrics(const std::string& box_dir) {
  UniqueFd fd(::open(stats_path(box_dir).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  uint64_t v[1 + kCounters] = {};
  if (::pread(fd.get(), v, sizeof v, 0) != static_cast<ssize_t>(sizeof v) || v[0] != kMagic) return std::nullopt;
  return NetMetrics{v[1], v[2], v[3], v[4], v[5]};
}

StatsFile::StatsFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) throw_errno(ErrorKind::Network, "create " + path);
  if (::ftruncate(fd.get(), kSize) != 0) throw_errno(ErrorKind::Network, "size " + path);
  void* m = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (m == MAP_FAILED) throw_errno(ErrorKind::Network, "map " + path);
  counters_ = static_cast<uint64_t*>(m);
  __atomic_store_n(&counters_[0], kMagic, __ATOMIC_RELEASE);
}

StatsFile::~StatsFile() {
  if (counters_) ::munmap(counters_, kSize);
}

void StatsFile::bump(int index, uint64_t n) { __atomic_fetch_add(&counters_[1 + index], n, __ATOMIC_RELAXED); }

}  // namespace boxlite::net
