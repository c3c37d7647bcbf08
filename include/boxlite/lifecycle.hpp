// A box's lifecycle: one state, and one function that says which moves are legal.
// The store keeps the state as this enum; it becomes text (the reference's status
// names) only at the storage boundary and in what front ends print.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace boxlite {

enum class BoxState {
  Configured,  // created; nothing has booted yet (the first start or exec boots it)
  Running,     // its shim and engine are up
  Stopping,    // a stop is under way (in the stopping handle only: never recorded)
  Stopped,     // down, its disk kept; a start boots it again
  Paused,      // frozen, to be resumed (memory snapshots)
  Failed,      // initialization failed; what it left is kept for diagnosis
};

// "configured" | "running" | "stopping" | "stopped" | "paused" | "failed".
std::string_view box_state_name(BoxState s);
// The state a name stands for; "created" (rows written before v3) is Configured.
std::optional<BoxState> box_state_from_name(std::string_view name);

// Whether a box may move from `from` to `to`. Staying put is always legal.
bool can_transition(BoxState from, BoxState to);
// Throws InvalidState "box <id> is <from>: cannot <op>" for an illegal move.
void check_transition(BoxState from, BoxState to, const std::string &box_id, std::string_view op);

}  // namespace boxlite
