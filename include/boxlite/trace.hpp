// Opt-in timeline tracing for performance work: with BOXLITE_TRACE=<file>, each
// trace("event") appends "<CLOCK_MONOTONIC µs> <pid> <event>" to that file, so the
// CLI's, the shim's and boxlite-net's events merge into one timeline (sort -n).
// Without the variable it costs one getenv per process.
#pragma once

namespace boxlite {

void trace(const char *event);

// The next trace() reads BOXLITE_TRACE again (after a program changes it).
void trace_reopen();

}  // namespace boxlite
