// The messages between pull_in_helper (pull_client.cpp) and boxlite-pull
// (pull_main.cpp): JSON objects, one per line.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "registry/pull.hpp"

namespace boxlite::registry::wire {

using nlohmann::json;

nlohmann::json progress_json(const LayerProgress& p);
LayerProgress progress_from(const nlohmann::json& j);
nlohmann::json result_json(const PullResult& r);
PullResult result_from(const nlohmann::json& j);
void send_line(int sock, const nlohmann::json& j);

// Newline-terminated lines from a socket.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  // The next line without its newline; nullopt at EOF.
  std::optional<std::string> next();

 private:
  int fd_;
  std::string buf_;
};

}  // namespace boxlite::registry::wire
