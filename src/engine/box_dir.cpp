#include "engine/box_dir.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/io.hpp"
#include "engine/spec.hpp"

namespace boxlite::engine {

void write_spec(const ShimSpec& spec) {
  write_file_atomic(spec_path(spec.box_dir), spec_to_json(spec), 0600, /*durable=*/!spec.ephemeral);
}

ShimSpec read_spec(const std::string& box_dir) { return spec_from_json(read_file(spec_path(box_dir))); }

void write_exit_record(const std::string& box_dir, const ExitRecord& r, bool durable) {
  nlohmann::json j = {{"reason", r.reason}, {"stopped_at_ms", r.stopped_at_ms}};
  if (r.main_exit_code) j["main_exit_code"] = *r.main_exit_code;
  write_file_atomic(exit_record_path(box_dir), j.dump() + "\n", 0600, durable);
}

std::optional<ExitRecord> read_exit_record(const std::string& box_dir) {
  try {
    auto j = nlohmann::json::parse(read_file(exit_record_path(box_dir)));
    ExitRecord r;
    r.reason = j.value("reason", std::string());
    r.stopped_at_ms = j.value("stopped_at_ms", int64_t{0});
    if (j.contains("main_exit_code")) r.main_exit_code = j.at("main_exit_code").get<int>();
    return r;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void remove_exit_record(const std::string& box_dir) { ::unlink(exit_record_path(box_dir).c_str()); }

// "OK\n", then "STAGES <spawn> <boot> <init>\n" and a "WARN <text>\n" line per
// warning; or "ERR " and the error (encode_error).
std::string encode_ready_report(const ReadyReport& r) {
  if (r.error) return "ERR " + encode_error(*r.error);
  std::string out = "OK\n";
  out += "STAGES " + std::to_string(r.stages.box_spawn_ms) + " " + std::to_string(r.stages.guest_boot_ms) + " " +
         std::to_string(r.stages.container_init_ms) + "\n";
  for (const auto& w : r.warnings) {
    std::string line = w;
    for (char& c : line)
      if (c == '\n') c = ' ';
    out += "WARN " + line + "\n";
  }
  return out;
}

std::optional<ReadyReport> decode_ready_report(std::string_view text, std::string_view sender) {
  ReadyReport r;
  if (text.starts_with("ERR ")) {
    r.error = decode_error(text.substr(4), sender);
    return r;
  }
  if (!text.starts_with("OK\n")) return std::nullopt;
  for (const auto& line : split(std::string(text.substr(3)), '\n')) {
    if (line.starts_with("WARN ")) {
      r.warnings.push_back(line.substr(5));
    } else if (line.starts_with("STAGES ")) {
      auto f = split(line.substr(7), ' ');
      if (f.size() < 3) continue;
      try {
        r.stages = {std::stoll(f[0]), std::stoll(f[1]), std::stoll(f[2])};
      } catch (const std::exception&) {
        // A report from a shim of another build: its stages are not worth a failure.
      }
    }
  }
  return r;
}

}  // namespace boxlite::engine
