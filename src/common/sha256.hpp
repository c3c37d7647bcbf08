// sha256 of blobs and manifests, as "sha256:<64 lowercase hex>" (the OCI digest form).
// Backed by Debian's nettle, linked statically: OpenSSL's EVP reads openssl.cnf and
// starts its providers on first use (~1.5 ms on every `boxlite run`), nettle has no
// initialisation at all.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace boxlite {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view data);
  std::string finish();  // "sha256:<hex>"; resets for reuse

 private:
  struct Impl;  // nettle's context, kept out of every includer
  std::unique_ptr<Impl> impl_;
};

// "sha256:<hex>" of a byte string.
std::string sha256_of(std::string_view data);

}  // namespace boxlite
