// Builtin execs: functions of the agent itself that an ExecRequest can run in the
// box instead of a program (ExecRequest.builtin). They run in the forked child with
// its stdio in place, so they move data exactly as any exec does (credit, signals,
// exit), and need nothing installed in the image.
#pragma once

#include <string>
#include <vector>

namespace boxlite::guest {

// "copy-out PATH FOLLOW": writes the copy archive of PATH (image/copy_archive.hpp)
//   to stdout; FOLLOW "1" follows PATH itself when it is a symlink.
// "copy-in DEST INCLUDE_PARENT OVERWRITE": reads a copy archive from stdin and
//   places it at DEST (each flag "1" or "0"), then reads stdin to its end.
// "sync": sync(2), so a disk the host then freezes holds what the box wrote.
bool is_builtin(const std::string& name);

// Runs a builtin in the exec's child. Returns its exit status: 0, or on failure
// protocol::kBuiltinFailed, with the error encoded (encode_error) on stderr.
int run_builtin(const std::string& name, const std::vector<std::string>& args);

}  // namespace boxlite::guest
