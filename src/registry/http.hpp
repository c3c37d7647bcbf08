// The HTTP side of the OCI distribution protocol (libcurl): one Session per
// (registry, repository), with the registry's transport and TLS settings and the
// authentication flows: anonymous, a static bearer token, basic credentials, and
// the bearer-token flow a 401's WWW-Authenticate drives (realm, service, scope).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "registry/config.hpp"

namespace boxlite::registry {

struct HttpResponse {
  long status = 0;
  std::string content_type;
  std::string docker_content_digest;
  std::string body;  // the whole body, or for a streamed 2xx only what the sink refused
};

// Receives a 2xx response body in pieces; returns false to abort the transfer.
using BodySink = std::function<bool(std::string_view)>;

// Thrown (as boxlite::Error with code Network) for failures worth retrying:
// connection refused or reset, timeouts, 5xx and 429. Other failures are Image errors.
bool is_transient(const Error& e);

// The TLS handshake with the registry failed (an Image error): what a registry
// that speaks plain http answers to https. A type of its own, so the pull's
// fallback to http never reads it from the message.
class TlsHandshakeFailed : public Error {
 public:
  explicit TlsHandshakeFailed(const std::string& message) : Error(ErrorKind::Image, message) {}
};

class Session {
 public:
  // Throws Config if the registry's settings are invalid.
  Session(ImageRegistry reg, std::string repository);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // GET <scheme>://<host>/v2/<repository>/<path>, authenticating as the registry
  // asks. A 2xx body goes to `sink` when given (else into the response), capped at
  // max_body bytes when buffered. Non-2xx statuses are returned, not thrown, except
  // 401 after authentication (Image error "... 401 Unauthorized ...").
  HttpResponse get(const std::string& path, const std::vector<std::string>& accept, const BodySink& sink = nullptr,
                   size_t max_body = 16u << 20);

  const std::string& host() const { return reg_.host; }
  const std::string& repository() const { return repo_; }
  std::string url(const std::string& path) const;

 private:
  struct Handle;
  std::unique_ptr<Handle> take_handle();
  void give_back(std::unique_ptr<Handle> h);
  HttpResponse perform(const std::string& url, const std::vector<std::string>& headers, const BodySink& sink,
                       size_t max_body, bool with_credentials, std::string* www_authenticate);
  void authenticate(const std::string& challenge);
  std::string auth_header();

  ImageRegistry reg_;
  std::string repo_;
  std::mutex mu_;
  std::string auth_;  // the Authorization header value in use ("" = anonymous)
  bool auth_from_challenge_ = false;
  std::vector<std::unique_ptr<Handle>> idle_;  // easy handles keep their connections
  uint64_t max_recv_speed_ = 0;
  std::string ca_file_;
};

// Parses `Bearer realm="...",service="...",scope="..."` (also Basic ...): the
// lowercased scheme, then the parameters in order.
struct Challenge {
  std::string scheme;
  std::vector<std::pair<std::string, std::string>> params;
  std::string param(const std::string& key) const;
};
Challenge parse_challenge(const std::string& header);

}  // namespace boxlite::registry
