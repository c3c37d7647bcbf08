#include "protocol/frame.hpp"

#include "common/error.hpp"

namespace boxlite::protocol {

const char* frame_type_name(FrameType t) {
  switch (t) {
    case FrameType::Hello: return "Hello";
    case FrameType::Configure: return "Configure";
    case FrameType::Configured: return "Configured";
    case FrameType::Exec: return "Exec";
    case FrameType::Started: return "Started";
    case FrameType::Stdin: return "Stdin";
    case FrameType::StdinEof: return "StdinEof";
    case FrameType::Stdout: return "Stdout";
    case FrameType::Stderr: return "Stderr";
    case FrameType::Credit: return "Credit";
    case FrameType::Exit: return "Exit";
    case FrameType::Signal: return "Signal";
    case FrameType::Resize: return "Resize";
    case FrameType::Error: return "Error";
    case FrameType::Shutdown: return "Shutdown";
    case FrameType::Ping: return "Ping";
    case FrameType::Pong: return "Pong";
    case FrameType::Attach: return "Attach";
    case FrameType::Metrics: return "Metrics";
  }
  return "Unknown";
}

bool is_known_frame_type(uint8_t t) { return t >= 1 && t <= 19; }

static void put_u32(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

static uint32_t get_u32(const char* p) {
  auto b = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

void append_frame(std::string& out, uint32_t stream, FrameType type, std::string_view payload) {
  if (payload.size() > kMaxPayload) {
    // What makes a frame this large is the caller's input (an exec's arguments and
    // environment, a box's configuration): said as such.
    std::string what = std::string("frame payload too large for ") + frame_type_name(type) + ": " +
                       std::to_string(payload.size()) + " bytes, at most " + std::to_string(kMaxPayload) +
                       " go in one frame";
    if (type == FrameType::Exec) what += " (shorten the command's arguments and environment)";
    throw Error(ErrorKind::InvalidArgument, what);
  }
  put_u32(out, static_cast<uint32_t>(payload.size()));
  put_u32(out, stream);
  out.push_back(static_cast<char>(type));
  out.append(payload);
}

std::string encode_frame(uint32_t stream, FrameType type, std::string_view payload) {
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  append_frame(out, stream, type, payload);
  return out;
}

void throw_malformed(const Frame& f) {
  throw Error(ErrorKind::Rpc,
              std::string("malformed ") + frame_type_name(f.type) + " frame on stream " + std::to_string(f.stream));
}

void FrameDecoder::feed(const char* data, size_t len) {
  if (pos_ > 0 && pos_ * 2 >= buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(data, len);
}

std::optional<Frame> FrameDecoder::next() {
  if (buf_.size() - pos_ < kHeaderSize) return std::nullopt;
  const char* h = buf_.data() + pos_;
  uint32_t len = get_u32(h);
  if (len > kMaxPayload) {
    throw Error(ErrorKind::Rpc, "protocol violation: frame of " + std::to_string(len) + " bytes exceeds the " +
                                    std::to_string(kMaxPayload) + "-byte limit");
  }
  auto type = static_cast<uint8_t>(h[8]);
  if (!is_known_frame_type(type)) {
    throw Error(ErrorKind::Rpc, "protocol violation: unknown frame type " + std::to_string(type));
  }
  if (buf_.size() - pos_ < kHeaderSize + len) return std::nullopt;
  Frame f;
  f.stream = get_u32(h + 4);
  f.type = static_cast<FrameType>(type);
  f.payload.assign(h + kHeaderSize, len);
  pos_ += kHeaderSize + len;
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  return f;
}

std::string error_payload(const Error& e) {
  proto::ErrorReply r;
  r.set_kind(std::string(error_kind_name(e.kind())));
  r.set_message(e.what());
  if (e.spawn_failure() != SpawnFailure::None) r.set_spawn_failure(std::string(spawn_failure_name(e.spawn_failure())));
  return r.SerializeAsString();
}

Error error_from_frame(const Frame& f, std::string_view sender) {
  proto::ErrorReply r;
  if (!r.ParseFromString(f.payload))
    return Error(ErrorKind::Rpc, std::string(sender) + " sent a malformed error reply");
  return decode_error(r.kind(), r.spawn_failure(), r.message(), sender);
}

}  // namespace boxlite::protocol
