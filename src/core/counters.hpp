// What a Runtime counts for runtime.metrics(); its boxes add to it.
#pragma once

#include <atomic>
#include <cstdint>

namespace boxlite::core {

struct RuntimeCounters {
  std::atomic<uint64_t> boxes_created{0}, boxes_failed{0};
  std::atomic<uint64_t> commands_executed{0}, exec_errors{0};
};

}  // namespace boxlite::core
