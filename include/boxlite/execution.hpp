// One running command in a box: its output stream, stdin, signals and result.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "boxlite/options.hpp"

namespace boxlite::core {
class ShimClient;
struct ExecStream;
}  // namespace boxlite::core

namespace boxlite {

class Execution {
 public:
  Execution(std::shared_ptr<core::ShimClient> client, std::shared_ptr<core::ExecStream> stream);
  Execution(Execution &&) noexcept;
  Execution &operator=(Execution &&) noexcept;
  ~Execution();

  std::string id() const;
  int pid() const;
  // On an attached main command: how many leading output bytes are history
  // (replayed from its log) rather than live. 0 for an exec.
  uint64_t history_bytes() const;
  // Blocks for the next chunk of stdout or stderr, in the order the box produced
  // each stream; nullopt once the process has exited and all output is read.
  // Reading returns flow-control credit, so an unread exec pauses its process.
  std::optional<OutputChunk> next_output();
  // Blocks while the box's stdin window is full. Throws if the exec has ended.
  void write_stdin(std::string_view data);
  void close_stdin();  // idempotent
  void signal(int signo);
  void kill();  // SIGKILL to the whole process group
  void resize(unsigned rows, unsigned cols);
  // Waits for the exit, discarding output not yet read. A non-zero exit is a
  // result, never an error; a failure to run raises boxlite::Error.
  ExecResult wait();

 private:
  std::shared_ptr<core::ShimClient> client_;
  std::shared_ptr<core::ExecStream> stream_;
};

}  // namespace boxlite
