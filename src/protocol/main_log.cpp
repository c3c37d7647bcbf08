#include "protocol/main_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"

namespace boxlite::protocol {
namespace {

void read_records(const std::string& path, std::vector<Frame>& out) {
  std::optional<std::string> text;
  try {
    text = read_file_if_present(path);
  } catch (const Error&) {
  }
  if (!text) return;  // never written, removed, or unreadable
  FrameDecoder dec;
  dec.feed(text->data(), text->size());
  try {
    while (auto f = dec.next()) {
      if (f->type == FrameType::Stdout || f->type == FrameType::Stderr) out.push_back(std::move(*f));
    }
  } catch (const Error&) {
    // A damaged record: keep what came before it.
  }
}

}  // namespace

std::vector<Frame> read_main_log(const std::string& box_dir) {
  std::vector<Frame> frames;
  read_records(main_log_old_path(box_dir), frames);
  read_records(main_log_path(box_dir), frames);
  return frames;
}

std::vector<Frame> tail_lines(std::vector<Frame> frames, size_t lines) {
  if (lines == 0) return frames;
  // Walk back counting newlines; a final line without one counts too.
  size_t seen = 0;
  bool trailing = true;
  for (size_t i = frames.size(); i-- > 0;) {
    std::string& p = frames[i].payload;
    for (size_t j = p.size(); j-- > 0;) {
      if (p[j] != '\n') {
        trailing = false;
        continue;
      }
      if (trailing) {
        trailing = false;
        continue;  // the newline that ends the last line
      }
      if (++seen == lines) {
        p.erase(0, j + 1);
        frames.erase(frames.begin(), frames.begin() + static_cast<long>(i));
        return frames;
      }
    }
  }
  return frames;
}

}  // namespace boxlite::protocol
