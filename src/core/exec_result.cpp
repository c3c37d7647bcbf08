#include <cstdio>

#include "boxlite/options.hpp"

namespace boxlite {
namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Byte offsets of each code point start (invalid UTF-8 bytes count as one each).
std::vector<size_t> code_point_starts(const std::string& s) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!is_continuation(static_cast<unsigned char>(s[i])) || starts.empty()) starts.push_back(i);
  }
  return starts;
}

std::string format_seconds(double secs) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", secs);
  return buf;
}

}  // namespace

std::string BufferedResult::as_text(size_t max_chars) const {
  std::string err = stderr_text;
  if (timed_out) {
    if (!err.empty() && err.back() != '\n') err += '\n';
    err += "Command timed out after " + format_seconds(timeout_secs) + "s";
  }
  std::string body = stdout_text;
  if (!err.empty()) {
    if (!body.empty() && body.back() != '\n') body += '\n';
    body += "STDERR:\n" + err;
  }
  auto starts = code_point_starts(body);
  if (starts.size() > max_chars) {
    size_t head = max_chars / 2, tail = max_chars - head;
    size_t cut_from = head < starts.size() ? starts[head] : body.size();
    size_t cut_to = starts[starts.size() - tail];
    size_t omitted = starts.size() - max_chars;
    body = body.substr(0, cut_from) + "\n... (" + std::to_string(omitted) + " chars truncated) ...\n" +
           body.substr(cut_to);
  }
  std::string exit_line = "Exit code: " + std::to_string(exit_code);
  if (body.empty()) return exit_line;
  if (body.back() != '\n') body += '\n';
  return body + "\n" + exit_line;
}

}  // namespace boxlite
