// common/sha256: the nettle-backed digest agrees with OpenSSL (test_support's
// independent implementation) and FIPS 180-2's vectors, in one piece or in chunks.
#include "common/sha256.hpp"

#include <gtest/gtest.h>

#include <string>

#include "image/test_support.hpp"

namespace boxlite {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(sha256_of(""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_of("abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "sha256:248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, ChunkedUpdatesMatchOneShotAndOpenSsl) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data += static_cast<char>(i * 131 % 251);
  Sha256 h;
  for (size_t off = 0; off < data.size(); off += 777) h.update(std::string_view(data).substr(off, 777));
  std::string chunked = h.finish();
  EXPECT_EQ(chunked, sha256_of(data));
  EXPECT_EQ(chunked, "sha256:" + image::testing::sha256_hex(data));
}

TEST(Sha256Test, FinishResetsForReuse) {
  Sha256 h;
  h.update("first");
  (void)h.finish();
  h.update("abc");
  EXPECT_EQ(h.finish(), sha256_of("abc"));
}

}  // namespace
}  // namespace boxlite
