// HTTP requests through the secrets proxy (net/secrets.hpp): the bytes a box sends
// on an intercepted HTTPS connection, read the way boxlite-net reads them (in
// pieces, through read_request_for_upstream: head, Content-Length or chunked
// body) and rewritten with the box's secrets for the name the upstream proved.
// Checks, on what goes upstream: it is one request with a blank line after its
// head and "Connection: close"; and a secret's real value is in it only when
// every host the request names, as a server reads it (the absolute-form target's
// authority, every Host header), is one the secret is for.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/io.hpp"
#include "fuzz/fuzz_support.hpp"
#include "net/secrets.hpp"

namespace {

using namespace boxlite;
using namespace boxlite::net;

const std::string kSecretHost = "api.example.com";
const std::string kScopedValue = "REAL-SCOPED-VALUE", kAnyValue = "REAL-ANY-VALUE";

const std::vector<SecretRule>& rules() {
  static const std::vector<SecretRule> r = {{"scoped", "$KEY", kScopedValue, {kSecretHost}},
                                            {"any", "$ANY", kAnyValue, {}}};
  return r;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// An authority as RFC 3986 reads it: [userinfo "@"] host [":" port]; the host
// lowercased, without trailing dots.
std::string authority_host(std::string a) {
  a = trim(a);
  if (size_t at = a.rfind('@'); at != std::string::npos) a = a.substr(at + 1);
  std::string host;
  if (!a.empty() && a[0] == '[') {
    host = a.substr(0, a.find(']') + 1);
  } else {
    host = a.substr(0, a.find(':'));
  }
  host = lower(host);
  while (!host.empty() && host.back() == '.') host.pop_back();
  return host;
}

// Whether every host the request upstream names is the scoped secret's host.
bool names_only_secret_host(const std::string& request) {
  std::string head = request.substr(0, request.find("\r\n\r\n"));
  std::vector<std::string> lines = split(head, '\n');
  for (auto& l : lines) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
  }
  // The target, wherever a lenient server finds it: any word of the request line.
  std::string line = lines[0];
  for (char& c : line) c = (c == '\t' || c == '\v' || c == '\f' || c == '\r') ? ' ' : c;
  for (const std::string& word : split(line, ' ')) {
    for (std::string scheme : {"http://", "https://"}) {
      if (lower(word.substr(0, scheme.size())) == scheme) {
        std::string rest = word.substr(scheme.size());
        if (authority_host(rest.substr(0, rest.find_first_of("/?#"))) != kSecretHost) return false;
      }
    }
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    if (http_header_is(lines[i], "Host") && authority_host(lines[i].substr(5)) != kSecretHost) return false;
  }
  return true;
}

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input = fuzz::as_text(data, size);
  // TLS hands the bytes over in records of any size: here in pieces of 1..64.
  size_t piece = size == 0 ? 1 : 1 + data[size - 1] % 64, off = 0;
  auto read = [&](char* buf, int n) {
    size_t k = std::min({piece, static_cast<size_t>(n), input.size() - off});
    std::copy_n(input.data() + off, k, buf);
    off += k;
    return static_cast<int>(k);
  };
  std::optional<std::string> out = read_request_for_upstream(read, rules(), kSecretHost);
  if (!out) return 0;
  size_t end = out->find("\r\n\r\n");
  fuzz::check(end != std::string::npos, "a request upstream without the end of its head");
  const std::string close = "Connection: close\r\n\r\n";
  fuzz::check(end + 4 >= close.size() && out->compare(end + 4 - close.size(), close.size(), close) == 0,
              "a request upstream not marked Connection: close");
  if (contains(*out, kScopedValue) && !contains(input, kScopedValue)) {
    fuzz::check(names_only_secret_host(*out), "a scoped secret went to a request that names another host");
  }
  return 0;
}
