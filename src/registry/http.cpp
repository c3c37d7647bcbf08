#include "registry/http.hpp"

#include <curl/curl.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace boxlite::registry {

namespace {

// libcurl through one table, as the code was written when libcurl was opened with
// dlopen; now only boxlite-pull links it (pull_client.hpp), so the table names the
// functions themselves.
struct CurlApi {
  decltype(&::curl_easy_init) easy_init = &::curl_easy_init;
  decltype(&::curl_easy_cleanup) easy_cleanup = &::curl_easy_cleanup;
  decltype(&::curl_easy_reset) easy_reset = &::curl_easy_reset;
  decltype(&::curl_easy_setopt) easy_setopt = &::curl_easy_setopt;
  decltype(&::curl_easy_perform) easy_perform = &::curl_easy_perform;
  decltype(&::curl_easy_getinfo) easy_getinfo = &::curl_easy_getinfo;
  decltype(&::curl_easy_strerror) easy_strerror = &::curl_easy_strerror;
  decltype(&::curl_slist_append) slist_append = &::curl_slist_append;
  decltype(&::curl_slist_free_all) slist_free_all = &::curl_slist_free_all;
};

const CurlApi& libcurl() {
  static const CurlApi api = [] {
    ::curl_global_init(CURL_GLOBAL_DEFAULT);
    return CurlApi{};
  }();
  return api;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string url_escape(const std::string& s) {
  std::string out;
  static const char* hex = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string base64(const std::string& in) {
  static const char* tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += tbl[(v >> k) & 63];
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += tbl[(v >> 18) & 63];
    out += tbl[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += tbl[(v >> 18) & 63];
    out += tbl[(v >> 12) & 63];
    out += tbl[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// The registry's {"errors":[{"code","message"}]} body, shortened for a message.
std::string error_detail(const std::string& body) {
  try {
    auto j = nlohmann::json::parse(body);
    std::string out;
    for (const auto& e : j.at("errors")) {
      if (!out.empty()) out += "; ";
      out += e.value("code", "") + ": " + e.value("message", "");
    }
    if (!out.empty()) return out;
  } catch (const nlohmann::json::exception&) {
  }
  std::string s = body.substr(0, 200);
  for (auto& c : s) {
    if (!std::isprint(static_cast<unsigned char>(c))) c = ' ';
  }
  return s;
}

struct Transfer {
  const BodySink* sink = nullptr;
  size_t max_body = 0;
  HttpResponse* resp = nullptr;
  std::string www_authenticate;
  CURL* curl = nullptr;
  bool aborted_by_sink = false;
  bool too_big = false;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect): start over
    t->resp->content_type.clear();
    t->resp->docker_content_digest.clear();
    t->www_authenticate.clear();
    return size * n;
  }
  auto colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string key = lower(line.substr(0, colon));
  std::string value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
  if (key == "content-type") t->resp->content_type = value;
  if (key == "docker-content-digest") t->resp->docker_content_digest = value;
  if (key == "www-authenticate" && t->www_authenticate.empty()) t->www_authenticate = value;
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  long status = 0;
  libcurl().easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300 && t->sink && *t->sink) {
    if (!(*t->sink)(std::string_view(data, len))) {
      t->aborted_by_sink = true;
      return 0;
    }
    return len;
  }
  if (t->resp->body.size() + len > t->max_body) {
    t->too_big = true;
    return 0;
  }
  t->resp->body.append(data, len);
  return len;
}

}  // namespace

bool is_transient(const Error& e) { return e.kind() == ErrorKind::Network; }

std::string Challenge::param(const std::string& key) const {
  for (const auto& [k, v] : params) {
    if (k == key) return v;
  }
  return {};
}

Challenge parse_challenge(const std::string& header) {
  Challenge c;
  size_t i = 0;
  while (i < header.size() && header[i] != ' ') ++i;
  c.scheme = lower(header.substr(0, i));
  while (i < header.size()) {
    while (i < header.size() && (header[i] == ' ' || header[i] == ',')) ++i;
    size_t eq = header.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = lower(header.substr(i, eq - i));
    i = eq + 1;
    std::string value;
    if (i < header.size() && header[i] == '"') {
      for (++i; i < header.size() && header[i] != '"'; ++i) {
        if (header[i] == '\\' && i + 1 < header.size()) ++i;
        value += header[i];
      }
      ++i;
    } else {
      while (i < header.size() && header[i] != ',') value += header[i++];
    }
    c.params.emplace_back(key, value);
  }
  return c;
}

struct Session::Handle {
  CURL* curl = nullptr;
  Handle() : curl(libcurl().easy_init()) {
    if (!curl) throw Error(ErrorKind::Internal, "curl_easy_init failed");
  }
  ~Handle() { libcurl().easy_cleanup(curl); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

Session::Session(ImageRegistry reg, std::string repository) : reg_(std::move(reg)), repo_(std::move(repository)) {
  validate(reg_);
  libcurl();  // loads it once (throws if it cannot)
  if (reg_.bearer_token && !reg_.bearer_token->empty()) auth_ = "Bearer " + *reg_.bearer_token;
  // Throttling for slow links (and for tests that need a pull to take a while).
  if (const char* s = std::getenv("BOXLITE_PULL_MAX_BYTES_PER_SEC"); s && *s)
    max_recv_speed_ = std::strtoull(s, nullptr, 10);
  // The system CAs, unless the environment names another bundle the way curl and
  // OpenSSL tools take it (a private CA without touching the host's trust store).
  for (const char* var : {"CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
    if (const char* s = std::getenv(var); s && *s && ca_file_.empty()) ca_file_ = s;
  }
}

Session::~Session() = default;

std::string Session::url(const std::string& path) const {
  return (reg_.transport == "http" ? "http://" : "https://") + reg_.host + "/v2/" + repo_ + "/" + path;
}

std::unique_ptr<Session::Handle> Session::take_handle() {
  std::lock_guard lk(mu_);
  if (idle_.empty()) return std::make_unique<Handle>();
  auto h = std::move(idle_.back());
  idle_.pop_back();
  return h;
}

void Session::give_back(std::unique_ptr<Handle> h) {
  std::lock_guard lk(mu_);
  idle_.push_back(std::move(h));
}

std::string Session::auth_header() {
  std::lock_guard lk(mu_);
  return auth_;
}

HttpResponse Session::perform(const std::string& url, const std::vector<std::string>& headers, const BodySink& sink,
                              size_t max_body, bool with_credentials, std::string* www_authenticate) {
  auto h = take_handle();
  CURL* c = h->curl;
  libcurl().easy_reset(c);
  HttpResponse resp;
  Transfer t;
  t.sink = &sink;
  t.max_body = max_body;
  t.resp = &resp;
  t.curl = c;
  struct curl_slist* list = nullptr;
  for (const auto& hd : headers) list = libcurl().slist_append(list, hd.c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> list_owner(list, libcurl().slist_free_all);
  char errbuf[CURL_ERROR_SIZE] = {0};
  libcurl().easy_setopt(c, CURLOPT_URL, url.c_str());
  libcurl().easy_setopt(c, CURLOPT_HTTPHEADER, list);
  libcurl().easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);  // blob GETs redirect to storage
  libcurl().easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
  libcurl().easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  libcurl().easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, reg_.transport == "http" ? "http,https" : "https");
  libcurl().easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
  libcurl().easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);  // a stalled transfer fails after 30 s
  libcurl().easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
  libcurl().easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  libcurl().easy_setopt(c, CURLOPT_USERAGENT, "boxlite/" BOXLITE_REGISTRY_VERSION);
  libcurl().easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  libcurl().easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  libcurl().easy_setopt(c, CURLOPT_HEADERDATA, &t);
  libcurl().easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  libcurl().easy_setopt(c, CURLOPT_WRITEDATA, &t);
  if (!ca_file_.empty()) libcurl().easy_setopt(c, CURLOPT_CAINFO, ca_file_.c_str());
  if (reg_.skip_verify) {
    libcurl().easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    libcurl().easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (max_recv_speed_) libcurl().easy_setopt(c, CURLOPT_MAX_RECV_SPEED_LARGE, static_cast<curl_off_t>(max_recv_speed_));
  if (with_credentials && reg_.username) {
    libcurl().easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    libcurl().easy_setopt(c, CURLOPT_USERNAME, reg_.username->c_str());
    libcurl().easy_setopt(c, CURLOPT_PASSWORD, reg_.password->c_str());
  }
  CURLcode rc = libcurl().easy_perform(c);
  libcurl().easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
  libcurl().easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
  give_back(std::move(h));
  if (www_authenticate) *www_authenticate = t.www_authenticate;
  if (rc != CURLE_OK) {
    if (t.aborted_by_sink) throw Error(ErrorKind::Image, "download from " + url + " aborted");
    if (t.too_big)
      throw Error(ErrorKind::Image, "response from " + url + " is over " + std::to_string(max_body) + " bytes");
    std::string why = errbuf[0] ? errbuf : libcurl().easy_strerror(rc);
    if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE) {
      throw Error(ErrorKind::Image, "TLS certificate verification failed for registry " + reg_.host + ": " + why +
                                        " (for a registry with a self-signed certificate set skip_verify)");
    }
    if (rc == CURLE_SSL_CONNECT_ERROR) {
      throw TlsHandshakeFailed("TLS handshake with registry " + reg_.host + " failed: " + why +
                               " (for a plain http registry set transport=http)");
    }
    throw Error(ErrorKind::Network, "cannot reach registry " + reg_.host + " (" + url + "): " + why);
  }
  if (resp.status >= 500 || resp.status == 429) {
    throw Error(ErrorKind::Network, "registry " + reg_.host + " answered " + std::to_string(resp.status) + " for " +
                                        url + ": " + error_detail(resp.body));
  }
  return resp;
}

void Session::authenticate(const std::string& header) {
  Challenge ch = parse_challenge(header);
  if (ch.scheme == "basic") {
    if (!reg_.username) {
      throw Error(ErrorKind::Image,
                  "registry " + reg_.host +
                      " answered 401 Unauthorized: it needs credentials (set username and password for it)");
    }
    std::lock_guard lk(mu_);
    auth_ = "Basic " + base64(*reg_.username + ":" + *reg_.password);
    auth_from_challenge_ = true;
    return;
  }
  if (ch.scheme != "bearer")
    throw Error(ErrorKind::Image, "registry " + reg_.host + " asks for unsupported authentication: " + header);
  std::string realm = ch.param("realm");
  if (realm.rfind("https://", 0) != 0 && realm.rfind("http://", 0) != 0) {
    throw Error(ErrorKind::Image,
                "registry " + reg_.host + " sent a bearer challenge without a usable realm: " + header);
  }
  std::string scope = ch.param("scope");
  if (scope.empty()) scope = "repository:" + repo_ + ":pull";
  std::string token_url = realm + (realm.find('?') == std::string::npos ? "?" : "&") + "scope=" + url_escape(scope);
  if (auto svc = ch.param("service"); !svc.empty()) token_url += "&service=" + url_escape(svc);
  HttpResponse r = perform(token_url, {"Accept: application/json"}, nullptr, 1u << 20, true, nullptr);
  if (r.status == 401 || r.status == 403) {
    throw Error(ErrorKind::Image, "registry " + reg_.host + ": 401 Unauthorized: the token service " + realm +
                                      " refused " + (reg_.username ? "the credentials" : "anonymous access") + " for " +
                                      scope);
  }
  if (r.status != 200) {
    throw Error(ErrorKind::Image,
                "registry " + reg_.host + ": token service " + realm + " answered " + std::to_string(r.status));
  }
  std::string token;
  try {
    auto j = nlohmann::json::parse(r.body);
    token = j.value("token", std::string());
    if (token.empty()) token = j.value("access_token", std::string());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Image, "registry " + reg_.host + ": invalid token response from " + realm + ": " + e.what());
  }
  if (token.empty())
    throw Error(ErrorKind::Image, "registry " + reg_.host + ": token response from " + realm + " has no token");
  std::lock_guard lk(mu_);
  auth_ = "Bearer " + token;
  auth_from_challenge_ = true;
}

HttpResponse Session::get(const std::string& path, const std::vector<std::string>& accept, const BodySink& sink,
                          size_t max_body) {
  std::string target = url(path);
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> headers;
    for (const auto& a : accept) headers.push_back("Accept: " + a);
    std::string auth = auth_header();
    if (!auth.empty()) headers.push_back("Authorization: " + auth);
    std::string challenge;
    HttpResponse r = perform(target, headers, sink, max_body, false, &challenge);
    if (r.status != 401) return r;
    bool static_token = reg_.bearer_token && !reg_.bearer_token->empty();
    if (attempt > 0 || static_token || challenge.empty()) {
      std::string why = static_token ? "the registry refused the bearer token"
                        : attempt > 0
                            ? (reg_.username ? "the registry refused the credentials for user '" + *reg_.username + "'"
                                             : "the registry refused the anonymous token")
                            : "no WWW-Authenticate challenge";
      throw Error(ErrorKind::Image, "pulling " + reg_.host + "/" + repo_ + ": 401 Unauthorized: " + why + " (" +
                                        error_detail(r.body) + ")");
    }
    authenticate(challenge);
  }
}

}  // namespace boxlite::registry
