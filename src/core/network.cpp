#include "core/network.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <functional>
#include <memory>

#include "common/dynlib.hpp"
#include "common/error.hpp"
#include "common/io.hpp"
#include "core/paths.hpp"

namespace boxlite {

net::NetConfig make_net_config(const BoxOptions& opts) {
  net::NetConfig c;
  const auto& mode = opts.network.mode;
  if (mode != "enabled" && mode != "disabled") {
    throw Error(ErrorKind::InvalidArgument, "invalid network mode '" + mode + "': expected 'enabled' or 'disabled'");
  }
  c.enabled = mode == "enabled";
  c.allow_net = opts.network.allow_net;
  for (const auto& p : opts.ports) {
    if (p.guest_port < 1 || p.guest_port > 65535) {
      throw Error(ErrorKind::InvalidArgument,
                  "guest_port must be between 1 and 65535, got " + std::to_string(p.guest_port));
    }
    if (p.host_port < 0 || p.host_port > 65535) {
      throw Error(ErrorKind::InvalidArgument,
                  "host_port must be between 0 and 65535, got " + std::to_string(p.host_port));
    }
    if (p.protocol != "tcp" && p.protocol != "udp") {
      throw Error(ErrorKind::InvalidArgument, "invalid port protocol '" + p.protocol + "': expected 'tcp' or 'udp'");
    }
    net::PortForward f;
    f.guest_port = static_cast<uint16_t>(p.guest_port);
    f.host_port = static_cast<uint16_t>(p.host_port == 0 ? p.guest_port : p.host_port);
    f.udp = p.protocol == "udp";
    if (!p.host_ip.empty()) f.host_ip = p.host_ip;
    c.ports.push_back(f);
  }
  for (const auto& sec : opts.secrets) {
    if (sec.name.empty()) throw Error(ErrorKind::InvalidArgument, "a secret needs a name");
    if (sec.value.empty()) throw Error(ErrorKind::InvalidArgument, "secret '" + sec.name + "' has an empty value");
    std::string placeholder = sec.placeholder.empty() ? "<BOXLITE_SECRET:" + sec.name + ">" : sec.placeholder;
    if (placeholder.find(sec.value) != std::string::npos || sec.value.find(placeholder) != std::string::npos) {
      throw Error(ErrorKind::InvalidArgument,
                  "secret '" + sec.name + "': the placeholder and the value must not contain each other");
    }
    for (const auto& other : c.secrets) {
      if (secret_env_name(other.name) == secret_env_name(sec.name)) {
        throw Error(ErrorKind::InvalidArgument, "secrets '" + other.name + "' and '" + sec.name +
                                                    "' map to the same variable " + secret_env_name(sec.name));
      }
    }
    c.secrets.push_back(net::SecretRule{sec.name, placeholder, sec.value, sec.hosts});
  }
  net::validate_config(c);
  const char* dns = std::getenv("BOXLITE_DNS_SERVER");
  if (dns && *dns) c.dns_upstream = dns;
  c.binary = core::libexec_dir() + "/boxlite-net";
  const char* upstream_ca = std::getenv("BOXLITE_UPSTREAM_CA");
  if (upstream_ca && *upstream_ca) c.upstream_ca = upstream_ca;
  return c;
}

std::string secret_env_name(const std::string& secret_name) {
  std::string out = "BOXLITE_SECRET_";
  for (unsigned char ch : secret_name) out += std::isalnum(ch) ? static_cast<char>(std::toupper(ch)) : '_';
  return out;
}

std::vector<std::string> secret_env(const net::NetConfig& c) {
  std::vector<std::string> env;
  for (const auto& s : c.secrets) env.push_back(secret_env_name(s.name) + "=" + s.placeholder);
  return env;
}

namespace {

// libcrypto (and its openssl.cnf and provider start-up) loads only when a home first
// needs its secrets CA: linked, it costs every libboxlite program that never uses it.
// The static `boxlite` CLI leaves it out (src/cli/linked_libraries.cpp says why).
// clang-format off
#define BOXLITE_CRYPTO_FUNCTIONS(X)                                                                               \
  X(EVP_PKEY_free) X(EVP_PKEY_Q_keygen) X(EVP_sha256) X(X509_new) X(X509_free) X(X509_set_version)               \
  X(X509_get_serialNumber) X(ASN1_INTEGER_set_uint64) X(X509_gmtime_adj) X(X509_getm_notBefore)                  \
  X(X509_getm_notAfter) X(X509_set_pubkey) X(X509_get_subject_name) X(X509_NAME_add_entry_by_txt)                \
  X(X509_set_issuer_name) X(X509V3_set_ctx) X(X509V3_EXT_conf_nid) X(X509_add_ext) X(X509_EXTENSION_free)        \
  X(X509_sign) X(BIO_new) X(BIO_s_mem) X(BIO_ctrl) X(BIO_free_all) X(PEM_write_bio_PrivateKey) X(PEM_write_bio_X509)
// clang-format on

struct Crypto {
#define BOXLITE_DECLARE(name) decltype(&::name) name;
  BOXLITE_CRYPTO_FUNCTIONS(BOXLITE_DECLARE)
#undef BOXLITE_DECLARE
};

const Crypto& libcrypto() {
  static const Crypto api = [] {
    constexpr const char* kSoname = "libcrypto.so.3";
    void* lib = open_library(kSoname, "the secrets proxy's CA");
    Crypto c{};
#define BOXLITE_BIND(name) bind_symbol(lib, kSoname, #name, c.name);
    BOXLITE_CRYPTO_FUNCTIONS(BOXLITE_BIND)
#undef BOXLITE_BIND
    return c;
  }();
  return api;
}

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { libcrypto().EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { libcrypto().X509_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { libcrypto().BIO_free_all(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

std::string pem_of(const std::function<int(BIO*)>& write) {
  const Crypto& c = libcrypto();
  BioPtr bio(c.BIO_new(c.BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) throw Error(ErrorKind::Internal, "encode PEM");
  char* data = nullptr;
  long n = c.BIO_ctrl(bio.get(), BIO_CTRL_INFO, 0, &data);  // BIO_get_mem_data, a macro
  return std::string(data, static_cast<size_t>(n));
}

void make_ca(const std::string& cert_path, const std::string& key_path) {
  const Crypto& c = libcrypto();
  PkeyPtr key(c.EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));  // EVP_EC_gen, a macro
  X509Ptr cert(c.X509_new());
  if (!key || !cert) throw Error(ErrorKind::Internal, "generate the home's CA key");
  c.X509_set_version(cert.get(), 2);
  std::string serial = random_hex(8);
  c.ASN1_INTEGER_set_uint64(c.X509_get_serialNumber(cert.get()), std::stoull(serial, nullptr, 16) >> 1);
  c.X509_gmtime_adj(c.X509_getm_notBefore(cert.get()), -3600);
  c.X509_gmtime_adj(c.X509_getm_notAfter(cert.get()), 10L * 365 * 24 * 3600);
  c.X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = c.X509_get_subject_name(cert.get());
  c.X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("boxlite"), -1, -1, 0);
  c.X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("boxlite secrets proxy CA"), -1, -1, 0);
  c.X509_set_issuer_name(cert.get(), name);
  X509V3_CTX ctx;
  c.X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  for (auto [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
        std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"}, std::pair{NID_subject_key_identifier, "hash"}}) {
    X509_EXTENSION* ext = c.X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    if (!ext) throw Error(ErrorKind::Internal, "CA certificate extension");
    c.X509_add_ext(cert.get(), ext, -1);
    c.X509_EXTENSION_free(ext);
  }
  if (c.X509_sign(cert.get(), key.get(), c.EVP_sha256()) == 0) {
    throw Error(ErrorKind::Internal, "sign the home's CA certificate");
  }
  write_file_atomic(key_path, pem_of([&](BIO* b) {
                      return c.PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
                    }),
                    0600);
  write_file_atomic(cert_path, pem_of([&](BIO* b) { return c.PEM_write_bio_X509(b, cert.get()); }), 0644);
}

}  // namespace

HomeCa ensure_home_ca(const std::string& home) {
  std::string dir = home + "/ca";
  HomeCa ca{dir + "/ca.pem", dir + "/ca.key"};
  if (path_exists(ca.cert) && path_exists(ca.key)) return ca;
  make_dirs(dir);
  ::chmod(dir.c_str(), 0700);
  // Two processes may race here: each writes whole files atomically, under a lock.
  UniqueFd lock(::open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock || ::flock(lock.get(), LOCK_EX) != 0) throw_errno(ErrorKind::Storage, "lock " + dir);
  if (!path_exists(ca.cert) || !path_exists(ca.key)) make_ca(ca.cert, ca.key);
  return ca;
}

}  // namespace boxlite
