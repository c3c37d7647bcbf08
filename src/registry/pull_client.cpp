#include "registry/pull_client.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "registry/pull_wire.hpp"

namespace boxlite::registry {

namespace wire {

// A line longer than this is not from our helper: the largest is a manifest's
// layer list, a few hundred bytes per layer.
constexpr size_t kMaxLine = 8u << 20;

json progress_json(const LayerProgress& p) {
  return {{"digest", p.digest}, {"size", p.size}, {"downloaded", p.downloaded},
          {"cached", p.cached}, {"done", p.done}, {"attempt", p.attempt}};
}

// A count in the helper's message: a JSON integer >= 0 (up to `max`). nlohmann
// converts any number, and a float out of range is undefined behaviour to convert:
// the helper talks to hostile registries, so its messages are checked too.
uint64_t count_field(const json& j, const char* key, uint64_t max = UINT64_MAX) {
  const json& v = j.at(key);
  bool count = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
  if (!count || v.get<uint64_t>() > max)
    throw Error(ErrorKind::Internal, std::string("boxlite-pull sent '") + key + "' = " + v.dump() + ", not a count");
  return v.get<uint64_t>();
}

LayerProgress progress_from(const json& j) {
  LayerProgress p;
  p.digest = j.at("digest").get<std::string>();
  p.size = count_field(j, "size");
  p.downloaded = count_field(j, "downloaded");
  p.cached = j.at("cached").get<bool>();
  p.done = j.at("done").get<bool>();
  p.attempt = static_cast<int>(count_field(j, "attempt", INT32_MAX));
  return p;
}

json result_json(const PullResult& r) {
  return {{"reference", r.reference},
          {"manifest_digest", r.manifest_digest},
          {"layers", r.layers},
          {"layers_cached", r.layers_cached},
          {"bytes_downloaded", r.bytes_downloaded}};
}

PullResult result_from(const json& j) {
  PullResult r;
  r.reference = j.at("reference").get<std::string>();
  r.manifest_digest = j.at("manifest_digest").get<std::string>();
  r.layers = count_field(j, "layers");
  r.layers_cached = count_field(j, "layers_cached");
  r.bytes_downloaded = count_field(j, "bytes_downloaded");
  return r;
}

void send_line(int sock, const json& j) {
  std::string line = j.dump() + "\n";
  send_all(sock, line.data(), line.size());
}

std::optional<std::string> LineReader::next() {
  for (;;) {
    if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    if (buf_.size() > kMaxLine) throw Error(ErrorKind::Internal, "boxlite-pull sent a line longer than 8 MiB");
    char chunk[16384];
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(ErrorKind::Internal, "read from boxlite-pull");
    if (n == 0) return std::nullopt;
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace wire

using wire::json;
using wire::LineReader;

PullResult pull_in_helper(const std::string& helper, const std::string& images_dir, const std::string& text,
                          const PullOptions& opts) {
  // What needs no network is checked here, so that a bad name starts no process.
  for (const auto& r : opts.registries) validate(r);
  (void)candidates(text, opts.registries);

  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    throw_errno(ErrorKind::Internal, "socketpair for boxlite-pull");
  }
  UniqueFd ours(pair[0]), theirs(pair[1]);
  SpawnOptions so;
  so.argv = {helper, images_dir};
  so.fds = {{theirs.get(), 3}};
  Child child;
  try {
    child = spawn(so);
  } catch (const Error& e) {
    throw Error(ErrorKind::Internal, std::string("cannot start the image pull helper: ") + e.what() +
                                         " (is boxlite installed whole? set BOXLITE_LIBEXEC_DIR to its directory)");
  }
  theirs.reset();
  wire::send_line(ours.get(), {{"reference", text},
                               {"registries", registries_to_json(opts.registries)},
                               {"parallel", opts.parallel},
                               {"attempts", opts.attempts},
                               {"backoff_ms", opts.backoff_ms}});

  LineReader lines(ours.get());
  while (auto line = lines.next()) {
    json msg = json::parse(*line, nullptr, false);
    if (!msg.is_object()) throw Error(ErrorKind::Internal, "boxlite-pull sent something that is not a JSON object");
    try {
      if (msg.contains("progress")) {
        if (opts.progress) opts.progress(wire::progress_from(msg["progress"]));
      } else if (msg.contains("manifest")) {
        std::vector<LayerProgress> layers;
        for (const auto& l : msg["manifest"].at("layers")) layers.push_back(wire::progress_from(l));
        if (opts.on_manifest) opts.on_manifest(msg["manifest"].at("reference").get<std::string>(), layers);
      } else if (msg.contains("result")) {
        PullResult r = wire::result_from(msg["result"]);
        child.wait();
        return r;
      } else if (msg.contains("error")) {
        Error e = decode_error(msg["error"].get<std::string>(), "boxlite-pull");
        child.wait();
        throw e;
      }
    } catch (const json::exception& e) {
      throw Error(ErrorKind::Internal, std::string("boxlite-pull sent a malformed message: ") + e.what());
    }
  }
  int status = child.wait();
  throw Error(ErrorKind::Internal,
              "the image pull helper " + helper + " ended without an answer (" + describe_status(status) + ")");
}

}  // namespace boxlite::registry
