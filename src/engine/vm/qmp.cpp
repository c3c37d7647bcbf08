#include "engine/vm/qmp.hpp"

#include <poll.h>
#include <unistd.h>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite::engine::vm {

Qmp Qmp::connect(const std::string& socket_path, int timeout_ms) {
  UniqueFd fd;
  try {
    fd = unix_connect(socket_path);
  } catch (const Error& e) {
    throw Error(ErrorKind::InvalidState,
                "the box's QEMU monitor does not answer (" + std::string(e.what()) +
                    "): the box is not running, or was started by an older boxlite; restart it");
  }
  Qmp q(std::move(fd), timeout_ms);
  nlohmann::json greeting = q.read_message();
  if (!greeting.contains("QMP"))
    throw Error(ErrorKind::Engine, "QMP " + socket_path + ": unexpected greeting " + greeting.dump());
  q.execute("qmp_capabilities");
  return q;
}

nlohmann::json Qmp::execute(const std::string& command, const nlohmann::json& args) {
  nlohmann::json req = {{"execute", command}};
  if (!args.is_null()) req["arguments"] = args;
  std::string line = req.dump() + "\n";
  try {
    write_all(fd_.get(), line.data(), line.size());
  } catch (const Error& e) {
    throw Error(ErrorKind::Engine, "QMP " + command + ": " + e.what());
  }
  nlohmann::json reply = read_message();
  if (reply.contains("error")) {
    throw Error(ErrorKind::Engine,
                "QMP " + command + " failed: " + reply["error"].value("desc", reply["error"].dump()));
  }
  return reply.value("return", nlohmann::json::object());
}

nlohmann::json Qmp::read_message() {
  double deadline = now_ms() + timeout_ms_;
  for (;;) {
    size_t nl;
    while ((nl = buf_.find('\n')) != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      if (trim(line).empty()) continue;
      nlohmann::json msg;
      try {
        msg = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorKind::Engine, std::string("QMP: unparsable message: ") + e.what());
      }
      if (!msg.contains("event")) return msg;  // events (STOP, RESUME) are not replies
    }
    int left = static_cast<int>(deadline - now_ms());
    if (left <= 0)
      throw Error(ErrorKind::Engine, "QMP: QEMU did not answer within " + std::to_string(timeout_ms_) + " ms");
    pollfd p{fd_.get(), POLLIN, 0};
    int n = ::poll(&p, 1, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char chunk[4096];
    ssize_t r = ::read(fd_.get(), chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw Error(ErrorKind::Engine, "QMP: QEMU closed the monitor (the box stopped?)");
    buf_.append(chunk, static_cast<size_t>(r));
  }
}

}  // namespace boxlite::engine::vm
