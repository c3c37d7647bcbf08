// Copying files between the host and a box (Box::copy_in / Box::copy_out), with
// docker cp semantics. A copy is an exec of a builtin of the guest agent
// (ExecRequest.builtin): the protocol and the shim see an ordinary exec whose stdin
// or stdout carries a tar stream (image/copy_archive.hpp), so a copy gets flow
// control, cancellation and the box's own view of its filesystem (tmpfs mounts
// included) for free, on both engines.
//
// Placement, for SRC copied to DST (mirrored for copy_out):
//   file -> DST an existing directory    DST/NAME (NAME = SRC's base name)
//   file -> DST a file, or missing        DST (its parent must exist; "DST/" must
//                                         be an existing directory)
//   dir  -> DST an existing directory    DST/NAME with include_parent, else SRC's
//                                         contents into DST; "SRC/." and "/" always
//                                         mean the contents
//   dir  -> DST missing                   DST, holding SRC's contents
//   dir  -> DST a file                    InvalidArgument
// Modes, mtimes (nanoseconds) and symlinks are kept; files belong to whoever copies
// them (root in the box; the caller on the host); setuid/setgid bits from a box are
// dropped on the host. Hardlinks within SRC stay hardlinks. Device nodes, fifos and
// sockets below SRC are left out. Box paths are absolute (a relative one is taken
// from "/", as docker does); host paths are relative to the current directory.
//
// Safety: what a box planted is never followed out of the named paths. copy_out
// reads inside the box with O_NOFOLLOW below SRC, and the host places the stream
// below DST only (openat2 RESOLVE_IN_ROOT, never writing through a symlink, every
// entry under NAME); copy_in places the stream inside the box the same way. The
// host's end of copy_out runs in a child that confines itself first (no_new_privs,
// four capabilities, every mount read-only but the destination's, Landlock;
// docs/decisions.md, "File copy").
#pragma once

namespace boxlite {

struct CopyOptions {
  // Replace existing non-directories at the destination. false: AlreadyExists
  // instead (directories always merge). A directory is never replaced by a file or
  // the reverse (AlreadyExists), whatever this says.
  bool overwrite = true;
  // When SRC itself is a symlink, copy what it points to (docker cp -L). Symlinks
  // below SRC are always copied as links.
  bool follow_symlinks = false;
  // When SRC is a directory and DST an existing directory: DST/NAME (true) or
  // SRC's contents into DST (false).
  bool include_parent = true;
};

}  // namespace boxlite
