// Tracing (boxlite/trace.hpp), and what host code forked without exec needs of it.
#pragma once

#include "boxlite/trace.hpp"

namespace boxlite {

// In a child forked without exec, whose descriptors were renumbered or closed:
// its next trace() opens the file again.
void trace_after_fork();

}  // namespace boxlite
