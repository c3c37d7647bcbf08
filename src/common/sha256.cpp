#include "common/sha256.hpp"

#include <nettle/sha2.h>

#include "common/io.hpp"

namespace boxlite {

struct Sha256::Impl {
  sha256_ctx ctx;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) { sha256_init(&impl_->ctx); }

Sha256::~Sha256() = default;

void Sha256::update(std::string_view data) {
  sha256_update(&impl_->ctx, data.size(), reinterpret_cast<const uint8_t*>(data.data()));
}

std::string Sha256::finish() {
  uint8_t md[SHA256_DIGEST_SIZE];
  sha256_digest(&impl_->ctx, sizeof md, md);  // also re-initialises the context
  return "sha256:" + hex_encode(md, sizeof md);
}

std::string sha256_of(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.finish();
}

}  // namespace boxlite
