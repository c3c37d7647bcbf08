// Live pull progress, one line per layer redrawn in place, as `docker pull` shows
// it. Only on a terminal: logs and pipes get no progress noise.
#include <unistd.h>

#include <chrono>
#include <mutex>

#include "cli/commands.hpp"

namespace boxlite::cli {

namespace {

std::string human(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.1f%s", bytes, units[u]);
  return buf;
}

}  // namespace

struct PullDisplay::State {
  FILE* out = nullptr;
  std::mutex mu;
  std::string reference;
  std::vector<registry::LayerProgress> layers;
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
        line += "Pull complete   " + human(static_cast<double>(l.size));
      } else if (l.downloaded == 0) {
        line += "Waiting";
      } else {
        line += "Downloading     " + human(static_cast<double>(l.downloaded)) + "/" + human(static_cast<double>(l.size));
        if (secs > 0.2) line += "  " + human(static_cast<double>(l.downloaded) / secs) + "/s";
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
      [st](const std::string& reference, const std::vector<registry::LayerProgress>& layers) {
        std::lock_guard lk(st->mu);
        st->reference = reference;
        st->layers = layers;
        st->start = std::chrono::steady_clock::now();
        std::fprintf(st->out, "Pulling %s\n", reference.c_str());
        st->drawn_lines = 0;
        st->draw(true);
      },
      [st](const registry::LayerProgress& p) {
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
