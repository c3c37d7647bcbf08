// libarchive as boxlite's host code calls it: la::archive_read_new() and so on, the
// same names and signatures as <archive.h>. Host programs load libarchive.so.13 with
// dlopen on the first call (it maps ten more libraries: nettle, acl, lzma, zstd, lz4,
// bz2, xml2, icu...), so a `boxlite run` of an image already unpacked never loads it;
// commands that unpack layers, copy files or export/import pay for it then. Linking
// Debian's libarchive.a instead drags every writer with it (bz2, xml2). The static
// guest agent defines BOXLITE_LIBARCHIVE_STATIC: there la:: names the functions of
// its libarchive.a directly.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <cstddef>

// Every libarchive function the host code calls; add one here before calling it.
// clang-format off
#define BOXLITE_LIBARCHIVE_FUNCTIONS(X)                                                                       \
  X(archive_entry_atime) X(archive_entry_atime_is_set) X(archive_entry_atime_nsec) X(archive_entry_copy_stat) \
  X(archive_entry_filetype) X(archive_entry_free) X(archive_entry_gid) X(archive_entry_hardlink)              \
  X(archive_entry_hardlink_utf8) X(archive_entry_linkify) X(archive_entry_linkresolver_free)                  \
  X(archive_entry_linkresolver_new) X(archive_entry_linkresolver_set_strategy) X(archive_entry_mtime)         \
  X(archive_entry_mtime_is_set) X(archive_entry_mtime_nsec) X(archive_entry_new) X(archive_entry_pathname)    \
  X(archive_entry_pathname_utf8) X(archive_entry_perm) X(archive_entry_set_filetype) X(archive_entry_set_gid) \
  X(archive_entry_set_hardlink) X(archive_entry_set_mtime) X(archive_entry_set_pathname)                      \
  X(archive_entry_set_perm) X(archive_entry_set_rdevmajor) X(archive_entry_set_rdevminor)                     \
  X(archive_entry_set_size) X(archive_entry_set_symlink) X(archive_entry_sparse_add_entry) X(archive_entry_set_uid) X(archive_entry_size)       \
  X(archive_entry_symlink) X(archive_entry_symlink_utf8) X(archive_entry_uid) X(archive_errno)                \
  X(archive_error_string) X(archive_filter_code) X(archive_format) X(archive_read_data)                       \
  X(archive_read_data_block)                                                                                  \
  X(archive_read_data_into_fd) X(archive_read_free) X(archive_read_new) X(archive_read_next_header)           \
  X(archive_read_open) X(archive_read_open_fd) X(archive_read_open_filename)                                  \
  X(archive_read_support_filter_gzip) X(archive_read_support_filter_xz) X(archive_read_support_filter_zstd)   \
  X(archive_read_support_format_empty) X(archive_read_support_format_tar) X(archive_write_add_filter_gzip)    \
  X(archive_write_add_filter_zstd) X(archive_write_close) X(archive_write_data) X(archive_write_free)         \
  X(archive_write_header) X(archive_write_new) X(archive_write_open_filename)                                 \
  X(archive_write_set_format_pax_restricted)
// clang-format on

namespace boxlite::la {

#ifdef BOXLITE_LIBARCHIVE_STATIC

#define BOXLITE_LA_USE(name) using ::name;
BOXLITE_LIBARCHIVE_FUNCTIONS(BOXLITE_LA_USE)
#undef BOXLITE_LA_USE

#else

namespace detail {

enum Symbol : std::size_t {
#define BOXLITE_LA_INDEX(name) k_##name,
  BOXLITE_LIBARCHIVE_FUNCTIONS(BOXLITE_LA_INDEX)
#undef BOXLITE_LA_INDEX
      kSymbolCount
};

// The address of symbol `i`; loads libarchive.so.13 and binds every function on the
// first call. Throws a Config error when libarchive is not installed.
void* symbol(std::size_t i);

template <typename Sig, std::size_t I>
struct Lazy;
// An ordinary function with the exact signature of the libarchive one: call sites
// convert their arguments as for a direct call, and it can be passed as a deleter.
template <typename R, typename... P, std::size_t I>
struct Lazy<R(P...), I> {
  static R call(P... p) { return reinterpret_cast<R (*)(P...)>(symbol(I))(p...); }
};

}  // namespace detail

#define BOXLITE_LA_LAZY(name) inline constexpr auto name = &detail::Lazy<decltype(::name), detail::k_##name>::call;
BOXLITE_LIBARCHIVE_FUNCTIONS(BOXLITE_LA_LAZY)
#undef BOXLITE_LA_LAZY

#endif

}  // namespace boxlite::la
