// Live pull progress, one line per layer redrawn in place, as `docker pull` shows
// it. Only on a terminal: logs and pipes get no progress noise.
#include <unistd.h>

#include <chrono>
#include <mutex>

#include "commands.hpp"
#include "output.hpp"

namespace boxlite::cli {

struct PullDisplay::State {
  FILE* out = nullptr;
  std::mutex mu;
  std::string reference;
  std::vector<LayerProgress> layers;
  std::chrono::steady_clock::time_point start, last_draw;
  size_t drawn_lines = 0;

  void draw(bool force) {
    auto now = std::chrono::steady_clock::now();
    if (!force && now - last_draw < std::chrono::milliseconds(100)) return;
    last_draw = now;
    std::string text;
    if (drawn_lines) text += "\x1b[" + std::to_string(drawn_lines) + "F";  // back to the first line
    double secs = std::chrono::duration<double>(now - start).count();
    for (const auto& l : layers) {
      std::string line = l.digest.substr(7, 12) + ": ";
      if (l.cached) {
        line += "Already exists";
      } else if (l.done) {
        line += "Pull complete   " + human_size(static_cast<double>(l.size), Units::Decimal);
      } else if (l.downloaded == 0) {
        line += "Waiting";
      } else {
        line += "Downloading     " + human_size(static_cast<double>(l.downloaded), Units::Decimal) + "/" +
                human_size(static_cast<double>(l.size), Units::Decimal);
        if (secs > 0.2) line += "  " + human_size(static_cast<double>(l.downloaded) / secs, Units::Decimal) + "/s";
        if (l.attempt > 1) line += "  (retry " + std::to_string(l.attempt - 1) + ")";
      }
      text += line + "\x1b[K\n";
    }
    drawn_lines = layers.size();
    std::fputs(text.c_str(), out);
    std::fflush(out);
  }
};

PullDisplay::PullDisplay(Runtime& rt, FILE* out, bool quiet) : rt_(rt), state_(std::make_shared<State>()) {
  if (quiet || !::isatty(::fileno(out))) return;
  state_->out = out;
  auto st = state_;
  rt_.set_pull_observer(
      [st](const std::string& reference, const std::vector<LayerProgress>& layers) {
        std::lock_guard lk(st->mu);
        st->reference = reference;
        st->layers = layers;
        st->start = std::chrono::steady_clock::now();
        std::fprintf(st->out, "Pulling %s\n", reference.c_str());
        st->drawn_lines = 0;
        st->draw(true);
      },
      [st](const LayerProgress& p) {
        std::lock_guard lk(st->mu);
        for (auto& l : st->layers) {
          if (l.digest == p.digest) l = p;
        }
        st->draw(p.done);
      });
}

PullDisplay::~PullDisplay() {
  rt_.set_pull_observer(nullptr, nullptr);
  std::lock_guard lk(state_->mu);
  if (state_->out && !state_->layers.empty()) state_->draw(true);
}

}  // namespace boxlite::cli
