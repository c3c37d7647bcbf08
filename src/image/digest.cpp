#include "image/digest.hpp"

#include <fcntl.h>
#include <openssl/evp.h>

#include <memory>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"

namespace boxlite::image::detail {

namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

MdCtx new_sha256() {
  MdCtx ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw Error(ErrorCode::Internal, "OpenSSL: cannot initialise sha256");
  }
  return ctx;
}

std::string finish(EVP_MD_CTX* ctx) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx, md, &len) != 1) throw Error(ErrorCode::Internal, "OpenSSL: sha256 final failed");
  return "sha256:" + hex_encode(md, len);
}

bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::string digest_hex(const std::string& digest, const std::string& where) {
  constexpr std::string_view kPrefix = "sha256:";
  if (!digest.starts_with(kPrefix)) {
    throw Error(ErrorCode::Image, "unsupported digest '" + digest.substr(0, 80) + "' in " + where +
                                      " (only sha256:<hex> is supported)");
  }
  std::string hex = digest.substr(kPrefix.size());
  bool ok = hex.size() == 64;
  for (char c : hex) ok = ok && is_lower_hex(c);
  if (!ok) throw Error(ErrorCode::Image, "malformed digest '" + digest.substr(0, 80) + "' in " + where);
  return hex;
}

std::string sha256_of(std::string_view data) {
  MdCtx ctx = new_sha256();
  EVP_DigestUpdate(ctx.get(), data.data(), data.size());
  return finish(ctx.get());
}

std::string sha256_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno(ErrorCode::Image, "open blob " + path);
  MdCtx ctx = new_sha256();
  std::unique_ptr<char[]> buf(new char[1 << 20]);
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.get(), 1 << 20);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(ErrorCode::Image, "read blob " + path);
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.get(), static_cast<size_t>(n));
  }
  return finish(ctx.get());
}

}  // namespace boxlite::image::detail
