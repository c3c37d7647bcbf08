#include "boxlite/lifecycle.hpp"

#include <array>

#include "common/error.hpp"

namespace boxlite {

namespace {

using S = BoxState;

struct Named {
  S state;
  std::string_view name;
};
constexpr std::array<Named, 6> kNames{{{S::Configured, "configured"},
                                       {S::Running, "running"},
                                       {S::Stopping, "stopping"},
                                       {S::Stopped, "stopped"},
                                       {S::Paused, "paused"},
                                       {S::Failed, "failed"}}};

// from -> the states it may move to (besides itself).
bool legal(S from, S to) {
  switch (from) {
    case S::Configured: return to == S::Running || to == S::Stopped || to == S::Failed;
    case S::Running: return to == S::Stopping || to == S::Stopped || to == S::Paused || to == S::Failed;
    case S::Stopping: return to == S::Stopped;
    case S::Stopped: return to == S::Running || to == S::Failed;
    case S::Paused: return to == S::Running || to == S::Stopping || to == S::Stopped;
    case S::Failed: return to == S::Running || to == S::Stopped;
  }
  return false;
}

}  // namespace

std::string_view box_state_name(BoxState s) {
  for (const auto& n : kNames)
    if (n.state == s) return n.name;
  return "unknown";
}

std::optional<BoxState> box_state_from_name(std::string_view name) {
  if (name == "created") return S::Configured;
  for (const auto& n : kNames)
    if (n.name == name) return n.state;
  return std::nullopt;
}

bool can_transition(BoxState from, BoxState to) { return from == to || legal(from, to); }

void check_transition(BoxState from, BoxState to, const std::string& box_id, std::string_view op) {
  if (can_transition(from, to)) return;
  throw Error(ErrorKind::InvalidState,
              "box " + box_id + " is " + std::string(box_state_name(from)) + ": cannot " + std::string(op));
}

}  // namespace boxlite
