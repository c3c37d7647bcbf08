#include "net/secrets.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "common/error.hpp"
#include "common/io.hpp"
#include "net/packet.hpp"
#include "net/policy.hpp"

namespace boxlite::net {
namespace {

constexpr int kIoTimeoutSecs = 30;
constexpr int kMaxConcurrent = 256;

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, Deleter<SSL_CTX, SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, Deleter<SSL, SSL_free>>;

std::string ssl_error() {
  unsigned long e = ERR_get_error();
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return e ? buf : "unknown TLS error";
}

bool write_all(SSL* ssl, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    int n = SSL_write(ssl, data.data() + off, static_cast<int>(std::min<size_t>(data.size() - off, 1 << 20)));
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Copies both ways until either side closes.
void relay(SSL* a, int afd, SSL* b, int bfd) {
  char buf[16384];
  for (;;) {
    pollfd p[2] = {{afd, POLLIN, 0}, {bfd, POLLIN, 0}};
    if (SSL_pending(a) == 0 && SSL_pending(b) == 0) {
      int n = ::poll(p, 2, kIoTimeoutSecs * 1000);
      if (n <= 0) return;
    } else {
      p[0].revents = SSL_pending(a) ? POLLIN : 0;
      p[1].revents = SSL_pending(b) ? POLLIN : 0;
    }
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      SSL* from = i == 0 ? a : b;
      SSL* to = i == 0 ? b : a;
      int n = SSL_read(from, buf, sizeof buf);
      if (n <= 0) return;
      if (!write_all(to, std::string(buf, static_cast<size_t>(n)))) return;
    }
  }
}

}  // namespace

struct SecretsProxy::Impl {
  NetConfig cfg;
  PkeyPtr ca_key, leaf_key;
  X509Ptr ca_cert;
  SslCtxPtr server_ctx, client_ctx;
  std::mutex mu;
  std::map<std::string, X509Ptr> leaves;  // by host name, at most kMaxLeaves
  std::atomic<int> active{0};

  X509Ptr leaf_for(const std::string& host);
  void handle(UniqueFd listener, uint32_t ip, uint16_t port);
};

// A reference of its own to the certificate for `host` (the cache may drop its own
// meanwhile): a box naming a new host in every handshake costs a signature each
// time, not host memory without bound.
X509Ptr SecretsProxy::Impl::leaf_for(const std::string& host) {
  constexpr size_t kMaxLeaves = 1024;
  auto shared = [](X509* cert) {
    X509_up_ref(cert);
    return X509Ptr(cert);
  };
  std::lock_guard lock(mu);
  if (auto it = leaves.find(host); it != leaves.end()) return shared(it->second.get());
  if (leaves.size() >= kMaxLeaves) leaves.clear();
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  std::string serial = random_hex(8);
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), std::stoull(serial, nullptr, 16) >> 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 30L * 24 * 3600);
  X509_set_pubkey(cert.get(), leaf_key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(host.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get()));
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, ca_cert.get(), cert.get(), nullptr, nullptr, 0);
  std::string san = (ipv4_from_string(host.c_str()) != 0 ? "IP:" : "DNS:") + host;
  for (auto [nid, value] : {std::pair<int, std::string>{NID_basic_constraints, "critical,CA:FALSE"},
                            {NID_key_usage, "critical,digitalSignature"},
                            {NID_ext_key_usage, "serverAuth"},
                            {NID_subject_alt_name, san},
                            {NID_authority_key_identifier, "keyid:always"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (!ext) return nullptr;
    X509_add_ext(cert.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) return nullptr;
  return shared((leaves[host] = std::move(cert)).get());
}

void SecretsProxy::Impl::handle(UniqueFd listener, uint32_t ip, uint16_t port) {
  pollfd p{listener.get(), POLLIN, 0};
  if (::poll(&p, 1, kIoTimeoutSecs * 1000) <= 0) return;
  UniqueFd client(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  listener.reset();
  if (!client) return;
  timeval tv{kIoTimeoutSecs, 0};
  ::setsockopt(client.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(client.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  SslPtr down(SSL_new(server_ctx.get()));
  SSL_set_app_data(down.get(), this);
  SSL_set_fd(down.get(), client.get());
  if (SSL_accept(down.get()) != 1) {
    std::fprintf(stderr, "boxlite-net: TLS from the box failed: %s\n", ssl_error().c_str());
    return;
  }
  const char* sni_c = SSL_get_servername(down.get(), TLSEXT_NAMETYPE_host_name);
  std::string sni = sni_c ? sni_c : ipv4_to_string(ip);

  UniqueFd up(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ::setsockopt(up.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(up.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(ip);
  sa.sin_port = htons(port);
  if (::connect(up.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return;
  SslPtr upstream(SSL_new(client_ctx.get()));
  SSL_set_fd(upstream.get(), up.get());
  SSL_set_tlsext_host_name(upstream.get(), sni.c_str());
  // The real value goes only to a server that proves it is `sni`.
  if (ipv4_from_string(sni.c_str()) != 0) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(upstream.get()), sni.c_str());
  } else {
    SSL_set1_host(upstream.get(), sni.c_str());
  }
  if (SSL_connect(upstream.get()) != 1) {
    std::fprintf(stderr, "boxlite-net: TLS to %s (%s:%u) failed: %s\n", sni.c_str(), ipv4_to_string(ip).c_str(), port,
                 ssl_error().c_str());
    return;
  }

  auto read = [&](char* b, int n) { return SSL_read(down.get(), b, n); };
  std::optional<std::string> request = read_request_for_upstream(read, cfg.secrets, sni);
  if (!request || !write_all(upstream.get(), *request)) return;
  relay(down.get(), client.get(), upstream.get(), up.get());
}

SecretsProxy::SecretsProxy(const NetConfig& cfg) : impl_(std::make_shared<Impl>()) {
  impl_->cfg = cfg;
  auto load = [](const std::string& path, auto reader) {
    std::string pem = read_file(path);
    std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
    auto* obj = reader(bio.get(), nullptr, nullptr, nullptr);
    if (!obj) throw Error(ErrorKind::Config, "cannot read " + path + ": " + ssl_error());
    return obj;
  };
  impl_->ca_cert.reset(load(cfg.ca_cert, PEM_read_bio_X509));
  impl_->ca_key.reset(load(cfg.ca_key, PEM_read_bio_PrivateKey));
  impl_->leaf_key.reset(EVP_EC_gen("P-256"));
  if (!impl_->leaf_key) throw Error(ErrorKind::Internal, "generate the proxy's key: " + ssl_error());

  impl_->server_ctx.reset(SSL_CTX_new(TLS_server_method()));
  impl_->client_ctx.reset(SSL_CTX_new(TLS_client_method()));
  if (!impl_->server_ctx || !impl_->client_ctx) throw Error(ErrorKind::Internal, "TLS context: " + ssl_error());
  SSL_CTX_set_min_proto_version(impl_->server_ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_min_proto_version(impl_->client_ctx.get(), TLS1_2_VERSION);
  // The certificate is chosen once the box has said which name it wants.
  SSL_CTX_set_tlsext_servername_callback(
      impl_->server_ctx.get(), +[](SSL* ssl, int*, void*) -> int {
        auto* self = static_cast<Impl*>(SSL_get_app_data(ssl));
        const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
        if (!name || !*name) return SSL_TLSEXT_ERR_NOACK;
        X509Ptr leaf = self->leaf_for(name);
        if (!leaf || SSL_use_certificate(ssl, leaf.get()) != 1 || SSL_use_PrivateKey(ssl, self->leaf_key.get()) != 1) {
          return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
        return SSL_TLSEXT_ERR_OK;
      });
  SSL_CTX_set_verify(impl_->client_ctx.get(), SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_default_verify_paths(impl_->client_ctx.get());
  if (!cfg.upstream_ca.empty() &&
      SSL_CTX_load_verify_locations(impl_->client_ctx.get(), cfg.upstream_ca.c_str(), nullptr) != 1) {
    throw Error(ErrorKind::Config, "cannot load upstream CA bundle " + cfg.upstream_ca + ": " + ssl_error());
  }
}

SecretsProxy::~SecretsProxy() = default;

void SecretsProxy::serve(UniqueFd listener, uint32_t upstream_ip, uint16_t upstream_port) {
  if (impl_->active.load() >= kMaxConcurrent) return;  // the box's SYN then goes unanswered
  auto impl = impl_;
  ++impl->active;
  std::thread([impl, fd = listener.release(), upstream_ip, upstream_port] {
    impl->handle(UniqueFd(fd), upstream_ip, upstream_port);
    --impl->active;
  }).detach();
}

}  // namespace boxlite::net
