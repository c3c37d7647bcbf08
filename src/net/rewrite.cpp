#include "net/secrets.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "common/io.hpp"
#include "net/policy.hpp"

namespace boxlite::net {
namespace {

constexpr size_t kMaxHead = 64 * 1024;
constexpr size_t kMaxBody = 64u << 20;

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

void substitute(std::string& s, const std::vector<const SecretRule*>& rules) {
  for (const auto* r : rules) replace_all(s, r->placeholder, r->value);
}

}  // namespace

bool http_header_is(const std::string& line, const char* name) {
  size_t n = std::strlen(name);
  if (line.size() <= n || line[n] != ':') return false;
  for (size_t i = 0; i < n; ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != std::tolower(static_cast<unsigned char>(name[i])))
      return false;
  }
  return true;
}

std::vector<const SecretRule*> secrets_for_host(const std::vector<SecretRule>& secrets, const std::string& host) {
  std::vector<const SecretRule*> out;
  for (const auto& s : secrets) {
    if (s.hosts.empty() || Allowlist(s.hosts).allows(host)) out.push_back(&s);
  }
  return out;
}

namespace {

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// An authority (RFC 3986 3.2: [userinfo "@"] host [":" port]) -> the host,
// lowercased. The userinfo goes first: "api.example:@evil.example" names evil.example.
std::string host_of_authority(std::string a) {
  a = trim(a);
  if (size_t at = a.rfind('@'); at != std::string::npos) a.erase(0, at + 1);
  if (!a.empty() && a[0] == '[') {
    size_t end = a.find(']');
    return lowercase(end == std::string::npos ? a : a.substr(1, end - 1));
  }
  if (size_t colon = a.find(':'); colon != std::string::npos) a.resize(colon);
  return lowercase(a);
}

// The head's lines without their CRs, and without empty lines: a server ignores
// empty lines before the request line (RFC 9112 2.2), and rewrite_request drops them.
std::vector<std::string> head_lines(const std::string& head) {
  std::vector<std::string> out;
  for (auto& line : split(head, '\n')) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(std::move(line));
  }
  return out;
}

bool is_http_space(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'; }

}  // namespace

std::optional<std::vector<std::string>> request_hosts(const std::string& head) {
  std::vector<std::string> hosts;
  auto lines = head_lines(head);
  if (lines.empty()) return std::nullopt;
  // An absolute-form target (RFC 9112 3.2.2) names a host of its own. Every word of
  // the request line is taken for one: a lenient server may split it at any run of
  // blanks, and a word that names a host is never the method or the version.
  const std::string& line = lines[0];
  for (size_t i = 0; i < line.size();) {
    while (i < line.size() && is_http_space(line[i])) ++i;
    size_t end = i;
    while (end < line.size() && !is_http_space(line[end])) ++end;
    std::string_view word = std::string_view(line).substr(i, end - i);
    i = end;
    for (std::string_view scheme : {"http://", "https://"}) {
      if (word.size() >= scheme.size() && lowercase(std::string(word.substr(0, scheme.size()))) == scheme) {
        std::string_view rest = word.substr(scheme.size());
        hosts.push_back(host_of_authority(std::string(rest.substr(0, rest.find_first_of("/?#")))));
      }
    }
  }
  int host_headers = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (!http_header_is(lines[i], "Host")) continue;
    if (++host_headers > 1) return std::nullopt;  // which one a server reads is its choice
    hosts.push_back(host_of_authority(lines[i].substr(5)));
  }
  return hosts;
}

std::vector<const SecretRule*> secrets_for_request(const std::vector<SecretRule>& secrets, const std::string& sni,
                                                   const std::string& head) {
  auto hosts = request_hosts(head);
  if (!hosts) return {};
  std::vector<const SecretRule*> out;
  for (const SecretRule* r : secrets_for_host(secrets, sni)) {
    bool all = true;
    for (const auto& h : *hosts) all = all && !secrets_for_host({*r}, h).empty();
    if (all) out.push_back(r);
  }
  return out;
}

bool read_chunked_body(std::string& buf, const std::function<int(char*, int)>& read, std::string& out,
                       size_t max_body) {
  char chunk[16384];
  auto more = [&] {
    int n = read(chunk, sizeof chunk);
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
    return true;
  };
  auto line = [&](std::string& l) {
    size_t end;
    while ((end = buf.find("\r\n")) == std::string::npos) {
      if (buf.size() > 4096 || !more()) return false;  // no sane chunk line is that long
    }
    l = buf.substr(0, end);
    buf.erase(0, end + 2);
    return true;
  };
  for (;;) {
    std::string size_line;
    if (!line(size_line) || size_line.empty() || !std::isxdigit(static_cast<unsigned char>(size_line[0]))) return false;
    size_t hex_end = 0;
    while (hex_end < size_line.size() && std::isxdigit(static_cast<unsigned char>(size_line[hex_end]))) ++hex_end;
    if (hex_end > 8) return false;  // over 4 GiB: not a request we carry
    size_t size = std::stoul(size_line.substr(0, hex_end), nullptr, 16);
    if (size == 0) {
      for (std::string trailer;;) {  // trailers, up to the blank line
        if (!line(trailer)) return false;
        if (trailer.empty()) return true;
      }
    }
    if (out.size() + size > max_body) return false;
    while (buf.size() < size + 2) {
      if (!more()) return false;
    }
    if (buf.compare(size, 2, "\r\n") != 0) return false;
    out.append(buf, 0, size);
    buf.erase(0, size + 2);
  }
}

std::string rewrite_request(const std::string& head, const std::string& body,
                            const std::vector<const SecretRule*>& rules) {
  std::string out;
  bool first = true;
  std::string new_body = body;
  substitute(new_body, rules);
  for (auto line : head_lines(head)) {
    if (first) {
      first = false;
      // METHOD SP target SP version: only the target's query is substituted.
      auto sp1 = line.find(' '), sp2 = line.rfind(' ');
      if (sp1 != std::string::npos && sp2 > sp1) {
        std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
        if (auto q = target.find('?'); q != std::string::npos) {
          std::string query = target.substr(q + 1);
          substitute(query, rules);
          target = target.substr(0, q + 1) + query;
        }
        line = line.substr(0, sp1 + 1) + target + line.substr(sp2);
      }
      out += line + "\r\n";
      continue;
    }
    // The body comes whole (a chunked one decoded): it goes with a Content-Length.
    if (http_header_is(line, "Transfer-Encoding")) continue;
    if (http_header_is(line, "Content-Length") || http_header_is(line, "Connection") ||
        http_header_is(line, "Proxy-Connection") || http_header_is(line, "Keep-Alive")) {
      continue;
    }
    if (auto colon = line.find(':'); colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      substitute(value, rules);
      line = line.substr(0, colon + 1) + value;
    }
    out += line + "\r\n";
  }
  if ((!new_body.empty() || head.rfind("POST", 0) == 0 || head.rfind("PUT", 0) == 0 || head.rfind("PATCH", 0) == 0)) {
    out += "Content-Length: " + std::to_string(new_body.size()) + "\r\n";
  }
  out += "Connection: close\r\n\r\n";
  return out + new_body;
}

namespace {

// Reads until "\r\n\r\n"; anything after it (the start of the body) goes to rest.
bool read_head(const std::function<int(char*, int)>& read, std::string& head, std::string& rest) {
  char buf[16384];
  while (head.size() < kMaxHead) {
    int n = read(buf, sizeof buf);
    if (n <= 0) return false;
    head.append(buf, static_cast<size_t>(n));
    if (auto end = head.find("\r\n\r\n"); end != std::string::npos) {
      rest = head.substr(end + 4);
      head.resize(end + 4);
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<std::string> read_request_for_upstream(const std::function<int(char*, int)>& read,
                                                     const std::vector<SecretRule>& secrets, const std::string& sni) {
  std::string head, body;
  if (!read_head(read, head, body)) return std::nullopt;
  auto rules = secrets_for_request(secrets, sni, head);
  bool chunked = false;
  size_t length = 0;
  for (const auto& line : split(head, '\n')) {
    if (http_header_is(line, "Content-Length")) length = std::strtoull(line.c_str() + 15, nullptr, 10);
    if (http_header_is(line, "Transfer-Encoding") && line.find("chunked") != std::string::npos) chunked = true;
  }
  if (chunked) {
    // Decoded whole, so placeholders split across chunks are replaced too.
    std::string decoded;
    if (!read_chunked_body(body, read, decoded, kMaxBody)) return std::nullopt;
    return rewrite_request(head, decoded, rules);
  }
  if (length > kMaxBody) return std::nullopt;
  char buf[16384];
  while (body.size() < length) {
    int n = read(buf, static_cast<int>(std::min(sizeof buf, length - body.size())));
    if (n <= 0) return std::nullopt;
    body.append(buf, static_cast<size_t>(n));
  }
  // What came after the body (a pipelined request) is not this request's: sent as
  // its body, with placeholders replaced, it would carry secrets whose hosts were
  // never checked. One request per connection: the rest is dropped.
  body.resize(length);
  return rewrite_request(head, body, rules);
}

}  // namespace boxlite::net
