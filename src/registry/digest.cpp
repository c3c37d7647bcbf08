#include "registry/digest.hpp"

#include <openssl/evp.h>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite::registry {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1) throw Error(ErrorCode::Internal, "sha256 init failed");
}

Sha256::~Sha256() = default;

void Sha256::update(std::string_view data) { EVP_DigestUpdate(impl_->ctx, data.data(), data.size()); }

std::string Sha256::finish() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, md, &len);
  EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr);
  return "sha256:" + hex_encode(md, len);
}

std::string sha256_hex_digest(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.finish();
}

}  // namespace boxlite::registry
