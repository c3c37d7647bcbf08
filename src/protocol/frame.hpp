// Framing of the boxlite protocol. One byte stream carries many logical streams;
// stream 0 is control. See boxlite.proto for the message schemas.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "boxlite.pb.h"
#include "common/error.hpp"

namespace boxlite::protocol {

inline constexpr uint32_t kProtocolVersion = 3;
// The guest stream of the box's main command; the shim numbers execs from 2.
inline constexpr uint32_t kMainStream = 1;
// The exit status of a guest builtin (ExecRequest.builtin) that failed; its
// stderr is then the error, encoded by encode_error (common/error.hpp).
inline constexpr int kBuiltinFailed = 1;
inline constexpr size_t kHeaderSize = 9;
inline constexpr size_t kMaxPayload = 1u << 20;
// Largest DATA payload either side sends; data is chunked to this.
inline constexpr size_t kMaxChunk = 64u << 10;
// Per-stream, per-channel flow-control window granted at exec start.
inline constexpr uint32_t kInitialWindow = 256u << 10;

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

// Incremental decoder: feed bytes as they arrive, take whole frames out.
// A frame over kMaxPayload or of unknown type is a protocol violation (throws Rpc):
// the peer may be a hostile guest, so nothing it says is trusted.
class FrameDecoder {
 public:
  void feed(const char* data, size_t len);
  std::optional<Frame> next();
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
};

template <typename Msg>
Msg parse_message(const Frame& f) {
  Msg m;
  if (!m.ParseFromString(f.payload)) throw_malformed(f);
  return m;
}

}  // namespace boxlite::protocol
