// Internal to boxlite_registry: sha256 over memory and streams (OpenSSL EVP).
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace boxlite::registry {

std::string sha256_hex_digest(std::string_view data);  // "sha256:<hex>"

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view data);
  std::string finish();  // "sha256:<hex>"; resets for reuse
 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace boxlite::registry
