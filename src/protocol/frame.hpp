// Framing of the boxlite protocol. One byte stream carries many logical streams;
// stream 0 is control. See boxlite.proto for the message schemas.
#pragma once

#include <sys/types.h>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "boxlite.pb.h"
#include "common/error.hpp"

namespace boxlite::protocol {

// 4: DATA chunks of up to 256 KiB and a 1 MiB initial window (bench/RESULTS.md, "Exec stdout throughput").
inline constexpr uint32_t kProtocolVersion = 4;
// The guest stream of the box's main command; the shim numbers execs from 2.
inline constexpr uint32_t kMainStream = 1;
// The exit status of a guest builtin (ExecRequest.builtin) that failed; its
// stderr is then the error, encoded by encode_error (common/error.hpp).
inline constexpr int kBuiltinFailed = 1;
inline constexpr size_t kHeaderSize = 9;
inline constexpr size_t kMaxPayload = 1u << 20;
// Largest DATA payload either side sends; data is chunked to this. Each frame costs
// a few system calls and wake-ups on every hop (agent, shim, client): large chunks
// keep that small against the copying of the bytes themselves.
inline constexpr size_t kMaxChunk = 256u << 10;
// Per-stream, per-channel flow-control window granted at exec start: four chunks in
// flight, so that no hop waits for another's credit while the bytes move.
inline constexpr uint32_t kInitialWindow = 1u << 20;

enum class FrameType : uint8_t {
  Hello = 1,       // Hello
  Configure = 2,   // BoxConfig
  Configured = 3,  // Configured
  Exec = 4,        // ExecRequest, opens a stream
  Started = 5,     // ExecStarted
  Stdin = 6,       // raw bytes
  StdinEof = 7,    // empty
  Stdout = 8,      // raw bytes
  Stderr = 9,      // raw bytes
  Credit = 10,     // Credit
  Exit = 11,       // ExecExit, closes the stream
  Signal = 12,     // Signal
  Resize = 13,     // Resize
  Error = 14,      // ErrorReply (on an exec stream: the exec failed and the stream is closed)
  Shutdown = 15,   // Shutdown
  Ping = 16,       // empty, answered by Pong
  Pong = 17,
  Attach = 18,   // AttachRequest (client -> shim), opens a stream following the main command
  Metrics = 19,  // stream 0: empty (client -> shim), answered with BoxStats
};

const char* frame_type_name(FrameType t);
bool is_known_frame_type(uint8_t t);

struct Frame {
  uint32_t stream = 0;
  FrameType type = FrameType::Ping;
  std::string payload;
};

// The kHeaderSize bytes before a payload of `len` bytes (at most kMaxPayload).
void put_header(char* out, uint32_t stream, FrameType type, size_t len);
void append_frame(std::string& out, uint32_t stream, FrameType type, std::string_view payload);
std::string encode_frame(uint32_t stream, FrameType type, std::string_view payload);
template <typename Msg>
std::string encode_message(uint32_t stream, FrameType type, const Msg& msg) {
  return encode_frame(stream, type, msg.SerializeAsString());
}

// Parses a message; throws Error(Rpc) naming the frame type when it is malformed.
template <typename Msg>
Msg parse_message(const Frame& f);
void throw_malformed(const Frame& f);

// An Error frame's payload, and the error an Error frame carries (`sender` names
// who sent it in the message of a malformed or unknown one).
std::string error_payload(const Error& e);
Error error_from_frame(const Frame& f, std::string_view sender);

// Incremental decoder: feed bytes as they arrive (or let it read them), take whole
// frames out. A frame over kMaxPayload or of unknown type is a protocol violation
// (throws Rpc): the peer may be a hostile guest, so nothing it says is trusted.
class FrameDecoder {
 public:
  void feed(const char* data, size_t len);
  // One read (readv) of what fd has, taken as feed() takes bytes: returns what
  // read() returns. The rest of a large frame's payload is read straight into the
  // frame, not copied there from a buffer, and the look-ahead after it is short, so
  // that the next large frame's payload is not read into the buffer either.
  ssize_t read_from(int fd);
  std::optional<Frame> next();
  // Bytes received and not yet returned in a frame.
  size_t buffered() const { return end_ - pos_ + (large_ ? kHeaderSize + large_have_ : 0); }

 private:
  char* space_for(size_t n);  // room for n more bytes at end_
  void take_into_large(const char*& data, size_t& len);

  std::string buf_;  // [pos_, end_) holds bytes not yet decoded
  size_t pos_ = 0, end_ = 0;
  // A frame of at least kLargePayload bytes that arrived in part: its payload is
  // completed in place (large_have_ bytes so far).
  std::optional<Frame> large_;
  size_t large_have_ = 0;
  bool last_was_large_ = false;
};

template <typename Msg>
Msg parse_message(const Frame& f) {
  Msg m;
  if (!m.ParseFromString(f.payload)) throw_malformed(f);
  return m;
}

}  // namespace boxlite::protocol
