// Internal to boxlite_image: digests of blobs (common/sha256.hpp computes them).
#pragma once

#include <string>

namespace boxlite::image::detail {

// The hex part of "sha256:<64 lowercase hex>". Anything else (other algorithms,
// "../" tricks, upper case) throws an Image error that names `where`; a digest is
// only ever turned into a path after this check.
std::string digest_hex(const std::string& digest, const std::string& where);

// "sha256:<hex>" of a file read in chunks.
// Reads `fd` to its end through sha256: "sha256:<hex>". `what` names it in errors.
std::string sha256_fd(int fd, const std::string& what);

}  // namespace boxlite::image::detail
