// boxlite-pull IMAGES_DIR: pulls one image into the store at IMAGES_DIR for
// pull_in_helper (pull_client.hpp), which sends the request on fd 3 and reads the
// answer there. The only program of boxlite that links libcurl; it confines itself
// (confine.hpp) before it talks to a registry.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <mutex>
#include <thread>

#include "common/error.hpp"
#include "registry/confine.hpp"
#include "registry/pull.hpp"
#include "registry/pull_wire.hpp"

namespace boxlite::registry {

namespace {

using nlohmann::json;

// The caller may be gone already: then there is no one to tell.
template <typename Reply>
void report_error(const Reply& reply, const Error& e) noexcept {
  try {
    reply({{"error", encode_error(e)}});
  } catch (...) {
  }
}

int serve(int sock, const std::string& images_dir) {
  std::mutex out_mu;
  auto reply = [&](const json& j) {
    std::lock_guard lock(out_mu);
    wire::send_line(sock, j);
  };
  try {
    wire::LineReader lines(sock);
    auto line = lines.next();
    if (!line) return 1;  // the caller went away before asking
    json req = json::parse(*line);
    PullOptions o;
    o.registries = registries_from_json(req.at("registries"), "the pull request");
    o.parallel = req.at("parallel").get<int>();
    o.attempts = req.at("attempts").get<int>();
    o.backoff_ms = req.at("backoff_ms").get<int>();
    o.progress = [&](const LayerProgress& p) { reply({{"progress", wire::progress_json(p)}}); };
    o.on_manifest = [&](const std::string& ref, const std::vector<LayerProgress>& layers) {
      json list = json::array();
      for (const auto& l : layers) list.push_back(wire::progress_json(l));
      reply({{"manifest", {{"reference", ref}, {"layers", list}}}});
    };
    // Before any thread starts: no_new_privs, capabilities and Landlock are each
    // a thread's own, and a thread started later inherits them.
    ImageStore store(images_dir);
    confine_pull_helper(images_dir);
    // The caller gone (its end closed) ends the pull: nothing else waits for it.
    std::thread([sock] {
      for (;;) {
        char c;
        ssize_t n = ::recv(sock, &c, 1, 0);
        if (n > 0 || (n < 0 && errno == EINTR)) continue;
        ::_exit(2);
      }
    }).detach();
    reply({{"result", wire::result_json(pull(store, req.at("reference").get<std::string>(), o))}});
    return 0;
  } catch (const Error& e) {
    report_error(reply, e);
  } catch (const std::exception& e) {
    report_error(reply, Error(ErrorKind::Internal, e.what()));
  }
  return 1;
}

}  // namespace

}  // namespace boxlite::registry

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: boxlite-pull IMAGES_DIR (with a request on fd 3; run by boxlite, not by hand)\n");
    return 64;
  }
  return boxlite::registry::serve(3, argv[1]);
}
