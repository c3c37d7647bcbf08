// Internal to boxlite_image: the one tar applier behind apply_layer,
// extract_layer_for_overlay (unpack.hpp) and extract_copy_archive
// (copy_archive.hpp). It reads from an archive the caller opened, so that it has no
// decompression dependencies of its own: the static guest agent links it too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/fd.hpp"
#include "image/unpack.hpp"

struct archive;
struct archive_entry;

namespace boxlite::image::detail {

// Copy mode: where archive paths land below the root, and the copy's rules.
struct CopyMode {
  std::string top;  // every entry must be "top" or lie below it
  // Non-empty: the archive is one file or symlink, written as this name in the
  // root. Empty: the archive is a directory whose top is the root itself
  // ("top/a" -> "a").
  std::string single_name;
  bool top_meta = false;     // a directory copy: the top entry's mode and mtime become the root's
  std::string root_display;  // the root as the caller named it, for error messages
  bool overwrite = true;
  bool strip_setid = false;
};

struct ApplyMode {
  std::optional<OverlayOptions> overlay;  // extract_layer_for_overlay
  std::optional<CopyMode> copy;           // extract_copy_archive
  // Apparent bytes of regular files this archive may write in total: a sparse
  // entry costs its declared size, so a "sparse bomb" hits this, not the disk.
  uint64_t max_bytes = UINT64_MAX;
};

// Applies every entry of `reader` (starting with `first` when the caller already
// read it) onto the directory `root`. label names the source in errors ("layer
// PATH", "copy to DEST"). Layer modes throw Image errors; copy mode keeps the codes
// it raises (AlreadyExists, ...) and reports the rest as Storage.
UnpackStats apply_archive(UniqueFd root, struct archive* reader, const std::string& label, const ApplyMode& mode,
                          struct archive_entry* first = nullptr);

// An entry's path in the current locale, else its UTF-8 form; throws Image if none.
std::string entry_path(struct archive_entry* e);
// The hardlink target, or nullptr.
const char* entry_hardlink(struct archive_entry* e);
// Keeps hostile 4 KiB names from flooding error messages.
std::string shorten(const std::string& s);
// libarchive's reason for the last failure of `a`, or what it must have been when
// libarchive gives none.
std::string archive_error_text(struct archive* a);

}  // namespace boxlite::image::detail
