// Secrets that never enter the box: boxlite-net intercepts the box's HTTPS
// (TCP 443) and terminates TLS with a certificate for the requested name, signed
// by the home's CA (which the box trusts). For hosts a secret names, the
// placeholder is replaced by the real value in the request's headers, query and
// body (never its path) before it goes on, over verified TLS, to the address the
// box connected to. Other hosts get the request unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <functional>
#include <optional>
#include "common/fd.hpp"

#include "net/config.hpp"

namespace boxlite::net {

// The secrets whose hosts match `host` (exact, "*.x", or any host when empty).
std::vector<const SecretRule*> secrets_for_host(const std::vector<SecretRule>& secrets, const std::string& host);

// The hosts an HTTP/1.x request head names (its Host header, and the authority of
// an absolute-form target), lowercased without ports; nullopt when it has more than
// one Host header.
std::optional<std::vector<std::string>> request_hosts(const std::string& head);

// The secrets a request may carry: those whose hosts match the TLS name the upstream
// proved (`sni`) and every host the request itself names. A server behind a shared
// front (a CDN routing by Host) then never gets another host's secret: a box asking
// for allowed.example by SNI and evil.example by Host gets its placeholders sent.
std::vector<const SecretRule*> secrets_for_request(const std::vector<SecretRule>& secrets, const std::string& sni,
                                                   const std::string& head);

// One HTTP/1.x request (head through the blank line, and its body) with every
// placeholder of `rules` replaced in the header values, the query and the body,
// not in the method, path or version; Content-Length follows the body, and the
// connection is marked "close" (one request per intercepted connection).
std::string rewrite_request(const std::string& head, const std::string& body,
                            const std::vector<const SecretRule*>& rules);

// Decodes a chunked request body (RFC 9112 7.1) into `out`: `buffered` holds what
// was already read past the head, `read` gets more (returns <= 0 at EOF or error).
// Chunk extensions and trailers are dropped. False on malformed input, EOF before
// the last chunk, or a body over max_body.
bool read_chunked_body(std::string& buffered, const std::function<int(char*, int)>& read, std::string& out,
                       size_t max_body);

// The box's request as it goes upstream: its head (through the blank line, at most
// 64 KiB) and its body (Content-Length bytes, or a chunked body decoded, at most
// 64 MiB) read through `read` (a TLS read: <= 0 at EOF or error), then rewritten
// (rewrite_request) with the secrets it may carry (secrets_for_request; `sni` is
// the name the upstream proved). nullopt when the box sent no whole request (EOF
// first, a limit passed, a malformed chunked body): the connection is dropped.
// Bytes after the body (a pipelined request) are dropped: one request per connection.
std::optional<std::string> read_request_for_upstream(const std::function<int(char*, int)>& read,
                                                     const std::vector<SecretRule>& secrets, const std::string& sni);

// "Name:" at the start of a header line, case-insensitively.
bool http_header_is(const std::string& line, const char* name);

class SecretsProxy {
 public:
  explicit SecretsProxy(const NetConfig& cfg);  // loads the CA; throws Error
  ~SecretsProxy();
  SecretsProxy(const SecretsProxy&) = delete;
  SecretsProxy& operator=(const SecretsProxy&) = delete;
  // Serves the one connection that will arrive on `listener` (the box's,
  // redirected there) on a thread of its own; upstream is where the box was going.
  void serve(UniqueFd listener, uint32_t upstream_ip, uint16_t upstream_port);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace boxlite::net
