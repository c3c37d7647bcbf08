// Copy archives: how files move between the host and a box (Box::copy_in/copy_out,
// `boxlite cp`). The host and the guest agent both link this (the guest through
// boxlite_image_copy_guest), so each direction is the same code at both ends: one
// side writes the archive of a path, the other places it with docker cp semantics.
//
// A copy archive is a POSIX pax tar stream with one top name, NAME (the source's
// base name): the entry "NAME", then for a directory "NAME/..." below it, parents
// before children. Entry types: regular files, directories, symlinks (targets
// stored verbatim, never followed) and hardlinks to an earlier entry. Modes and
// mtimes (with nanoseconds) are kept; owners are written but never applied.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "image/unpack.hpp"

struct archive;

namespace boxlite::image {

struct CopyWriteOptions {
  // When the source path itself is a symlink: archive what it points to (docker cp
  // -L). Symlinks below the source are always archived as links: the archive never
  // holds anything from outside the named path.
  bool follow_symlinks = false;
  // The archive's top name; "" = the base name of src (see copy_top_name).
  std::string top_name;
};

struct CopyWriteStats {
  uint64_t files = 0, dirs = 0, symlinks = 0, hardlinks = 0, bytes = 0;
  uint64_t skipped = 0;  // device nodes, fifos and sockets: not copied (as extraction would refuse them)
};

// Writes the copy archive of `src` to `sink` in pieces of about 1 MiB. The tree
// is walked with O_NOFOLLOW *at calls from directory fds, so a concurrent writer
// that swaps a directory for a symlink cannot redirect the walk; entries that
// vanish while it runs are left out. A file that shrinks while read is padded with
// zeros to the size its header announced; one that grows is cut there.
// Errors: NotFound (src does not exist), InvalidArgument (src ends in "/" or "/."
// but is not a directory), Storage (read errors); whatever the sink throws passes.
CopyWriteStats write_copy_archive(const std::string& src, const CopyWriteOptions& opts,
                                  const std::function<void(std::string_view)>& sink);

// The base name a copy archive of `path` is written under: the last component of
// the lexically cleaned path ("a/b/." -> "b", "/" -> "root"; ".." is applied, so
// the name is never "." or "..").
std::string copy_top_name(const std::string& path);

// Whether `path` asks for a directory's contents rather than the directory itself
// (docker cp: "SRC/." copies what is inside SRC; "/" has no name to keep).
bool copy_wants_contents(const std::string& path);

struct CopyExtractOptions {
  // When dest is an existing directory and the archive is a directory: true puts it
  // at dest/NAME, false puts its contents into dest (dest keeps its own metadata).
  bool include_parent = true;
  // false: any existing non-directory in the way is an AlreadyExists error instead
  // of being replaced (directories always merge).
  bool overwrite = true;
  // Drop setuid/setgid bits (files and directories): set when the archive comes from a box and
  // the extraction runs as root on the host.
  bool strip_setid = false;
  // The name the archive's top entry must have (copy_top_name of the path asked
  // for), when the archive comes from a box: a hostile one could otherwise answer
  // a request for report.txt with a .bashrc, placed under the destination.
  std::string expected_top;
};

// Reads a copy archive from `reader` (an archive_read already opened by the caller,
// tar format) and places it at `dest` the way docker cp does:
//  - a file or symlink: into dest/NAME when dest is a directory (or a symlink to
//    one), else at dest itself (replacing a non-directory there; dest's parent must
//    exist; a dest ending in "/" must be an existing directory);
//  - a directory: dest/NAME (include_parent) or into dest (not) when dest is a
//    directory; created at dest when dest does not exist (its parent must); an
//    error when dest is a non-directory.
// The archive is untrusted (it may come from a hostile box): every entry must lie
// under NAME, a single file's archive holds nothing else, and below the placed
// directory everything is written as apply_layer does (parents resolved with
// openat2 RESOLVE_IN_ROOT confined to that directory, nothing written through a
// symlink, no device nodes, size and path limits), except that OCI whiteouts are
// ordinary names, owners are never applied (files belong to the caller), and an
// entry never replaces a directory with a non-directory or the reverse
// (AlreadyExists, as docker's "cannot overwrite directory with non-directory").
// Nothing is created before the first entry is read: an empty or failed stream
// leaves dest untouched. Errors: NotFound (dest's parent missing), InvalidArgument
// (a directory onto a file, dest "DIR/" not a directory), AlreadyExists (overwrite
// off or type conflicts), Storage (write failures and malformed archives), each
// naming the path.
UnpackStats extract_copy_archive(struct archive* reader, const std::string& dest, const CopyExtractOptions& opts);

}  // namespace boxlite::image
