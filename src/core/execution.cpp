#include "boxlite/execution.hpp"

#include <signal.h>

#include <utility>

#include "core/client.hpp"

namespace boxlite {

using protocol::FrameType;

Execution::Execution(std::shared_ptr<core::ShimClient> client, std::shared_ptr<core::ExecStream> stream)
    : client_(std::move(client)), stream_(std::move(stream)) {}
Execution::Execution(Execution&&) noexcept = default;
Execution& Execution::operator=(Execution&&) noexcept = default;
Execution::~Execution() = default;

std::string Execution::id() const { return std::to_string(stream_->id); }
int Execution::pid() const { return stream_->pid; }
uint64_t Execution::history_bytes() const { return stream_->history_bytes; }

namespace {
// Output credit goes back in batches, not a frame per chunk: each Credit frame costs
// a send here, a read and a write in the shim and a read in the guest. Below the
// window, so what is held back can never stall the sender: with nothing in flight
// the guest holds at least the window less one batch.
constexpr uint32_t kCreditBatch = protocol::kInitialWindow / 4;
static_assert(kCreditBatch > 0 && kCreditBatch < protocol::kInitialWindow);
}  // namespace

std::optional<OutputChunk> Execution::next_output() {
  OutputChunk chunk;
  uint32_t grant = 0;
  {
    std::unique_lock lk(client_->mutex());
    stream_->cv.wait(lk, [&] { return !stream_->output.empty() || stream_->finished(); });
    if (stream_->output.empty()) return std::nullopt;
    chunk = std::move(stream_->output.front());
    stream_->output.pop_front();
    if (stream_->finished()) return chunk;  // no credit needed any more
    uint32_t& consumed = chunk.stream == StreamKind::Stdout ? stream_->stdout_consumed : stream_->stderr_consumed;
    consumed += static_cast<uint32_t>(chunk.data.size());
    if (consumed < kCreditBatch) return chunk;
    grant = std::exchange(consumed, 0);
  }
  proto::Credit c;
  c.set_channel(chunk.stream == StreamKind::Stdout ? proto::STDOUT : proto::STDERR);
  c.set_bytes(grant);
  try {
    client_->send(stream_->id, FrameType::Credit, c.SerializeAsString());
  } catch (const Error&) {
    // The box went away; the remaining output is already here or lost with it.
  }
  return chunk;
}

void Execution::write_stdin(std::string_view data) {
  while (!data.empty()) {
    size_t n = std::min(data.size(), protocol::kMaxChunk);
    {
      std::unique_lock lk(client_->mutex());
      stream_->cv.wait(lk, [&] { return stream_->stdin_credit >= n || stream_->finished(); });
      if (stream_->finished()) throw Error(ErrorKind::InvalidState, "cannot write stdin: the process has exited");
      if (stream_->stdin_closed) throw Error(ErrorKind::InvalidState, "cannot write stdin: it was closed");
      stream_->stdin_credit -= n;
    }
    client_->send(stream_->id, FrameType::Stdin, data.substr(0, n));
    data.remove_prefix(n);
  }
}

void Execution::close_stdin() {
  {
    std::lock_guard lk(client_->mutex());
    if (stream_->stdin_closed || stream_->finished()) return;
    stream_->stdin_closed = true;
  }
  client_->send(stream_->id, FrameType::StdinEof, {});
}

void Execution::signal(int signo) {
  if (signo <= 0 || signo >= NSIG)
    throw Error(ErrorKind::InvalidArgument, "invalid signal number " + std::to_string(signo));
  {
    std::lock_guard lk(client_->mutex());
    if (stream_->finished()) return;
  }
  proto::Signal s;
  s.set_signo(signo);
  client_->send(stream_->id, FrameType::Signal, s.SerializeAsString());
}

void Execution::kill() { signal(SIGKILL); }

void Execution::resize(unsigned rows, unsigned cols) {
  if (rows == 0 || cols == 0 || rows > 65535 || cols > 65535) {
    throw Error(ErrorKind::InvalidArgument,
                "invalid terminal size " + std::to_string(rows) + "x" + std::to_string(cols));
  }
  proto::Resize r;
  r.set_rows(rows);
  r.set_cols(cols);
  client_->send(stream_->id, FrameType::Resize, r.SerializeAsString());
}

ExecResult Execution::wait() {
  while (next_output()) {
  }
  std::lock_guard lk(client_->mutex());
  if (stream_->error) throw *stream_->error;
  ExecResult r;
  r.exit_code = stream_->exit->exit_code();
  r.timed_out = stream_->exit->timed_out();
  return r;
}

}  // namespace boxlite
