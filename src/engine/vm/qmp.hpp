// A minimal QMP (QEMU Machine Protocol) client for the monitor socket every vm box's
// QEMU listens on (qmp_socket_path): what freezing the disk of a running box needs
// (stop, blockdev-snapshot-sync, cont). One command at a time; events are skipped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/fd.hpp"

namespace boxlite::engine::vm {

class Qmp {
 public:
  // Connects and negotiates (greeting, qmp_capabilities). Throws InvalidState when
  // nothing listens there (the box is not running, or its QEMU predates QMP).
  static Qmp connect(const std::string& socket_path, int timeout_ms = 10000);
  // Runs one command; returns its "return" value, or throws Engine with QEMU's
  // error description.
  nlohmann::json execute(const std::string& command, const nlohmann::json& args = nullptr);

 private:
  explicit Qmp(UniqueFd fd, int timeout_ms) : fd_(std::move(fd)), timeout_ms_(timeout_ms) {}
  nlohmann::json read_message();  // the next non-event message
  UniqueFd fd_;
  int timeout_ms_;
  std::string buf_;
};

}  // namespace boxlite::engine::vm
