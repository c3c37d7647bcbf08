// The shim's side of a box's network: it starts boxlite-net (src/net) on the
// engine's link and waits until it serves, so a bad port forward fails the start.
#pragma once

#include <sys/types.h>

#include "common/process.hpp"
#include "engine/spec.hpp"
#include "shim/capped_log.hpp"

namespace boxlite::shim {

// A started boxlite-net. It comes up while the box boots (its link buffers frames
// meanwhile); wait_ready() before the box is reported running.
struct NetProcess {
  Child child;
  UniqueFd ready;  // "ok\n", or the reason it could not start, then EOF
  UniqueFd log;    // read end of its stdout and stderr (the shim caps them into net.log)
  // StreamSocket: our copy of net.sock's listener, so QEMU's connect lands in its backlog
  // even if boxlite-net fails before accepting (the boot then reports its reason).
  UniqueFd listener;
};

// An engine whose link connects (engine::NetLink::StreamSocket: QEMU's -netdev
// stream), before it starts: boxlite-net listens on net.sock for it.
NetProcess start_net_listening(const engine::ShimSpec& spec);

// An engine with a network namespace of its own (engine::NetLink::Tap: a jail),
// once it exists: a TAP "eth0" in the box's network namespace
// (`box_netns`), configured here (the box keeps no CAP_NET_ADMIN; IPv6 off:
// boxlite-net serves IPv4 only), which boxlite-net then reads (start_net_on_tap).
UniqueFd make_box_tap(int box_netns);
NetProcess start_net_on_tap(const engine::ShimSpec& spec, int tap_fd);

// Throws Error(Network) with boxlite-net's reason (e.g. a host port in use).
void wait_ready(NetProcess& net, const engine::ShimSpec& spec, double deadline_ms);

}  // namespace boxlite::shim
