// The main command's output log, <box_dir>/main.log: the shim appends each chunk
// as a frame (Stdout or Stderr) so stdout and stderr stay apart and in order.
// It is capped: past kMainLogRotateBytes the shim moves it to main.log.1 (replacing
// the previous one), so a box that writes forever holds at most twice that on disk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/frame.hpp"

namespace boxlite::protocol {

inline constexpr uint64_t kMainLogRotateBytes = 8u << 20;

inline std::string main_log_path(const std::string& box_dir) { return box_dir + "/main.log"; }
inline std::string main_log_old_path(const std::string& box_dir) { return box_dir + "/main.log.1"; }

// Everything still on disk, oldest first (main.log.1, then main.log). A torn last
// record (the shim was killed mid-write) is ignored; missing files are empty.
std::vector<Frame> read_main_log(const std::string& box_dir);

// The last `lines` lines of the merged output (0 = all), cut on record boundaries
// into the frames that hold them.
std::vector<Frame> tail_lines(std::vector<Frame> frames, size_t lines);

}  // namespace boxlite::protocol
