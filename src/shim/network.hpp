// The shim's side of a box's network: it starts boxlite-net (src/net) on the
// engine's link and waits until it serves, so a bad port forward fails the start.
#pragma once

#include <sys/types.h>

#include "common/process.hpp"
#include "engine/spec.hpp"

namespace boxlite::shim {

// vm engine, before QEMU starts: boxlite-net listens on net.sock for QEMU's
// -netdev stream. Throws Error with boxlite-net's reason.
Child start_vm_network(const engine::ShimSpec& spec, double deadline_ms);

// jail engine, once its init exists: a TAP "eth0" in the box's network namespace,
// configured here (the box keeps no CAP_NET_ADMIN), and read by boxlite-net.
Child start_jail_network(const engine::ShimSpec& spec, pid_t box_init, double deadline_ms);

}  // namespace boxlite::shim
