#include "protocol/frame.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

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

static void put_u32(char* out, uint32_t v) {
  out[0] = static_cast<char>(v >> 24);
  out[1] = static_cast<char>(v >> 16);
  out[2] = static_cast<char>(v >> 8);
  out[3] = static_cast<char>(v);
}

void put_header(char* out, uint32_t stream, FrameType type, size_t len) {
  put_u32(out, static_cast<uint32_t>(len));
  put_u32(out + 4, stream);
  out[8] = static_cast<char>(type);
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

namespace {
// A payload this large that arrived in part is completed in place (read_from).
constexpr size_t kLargePayload = 4u << 10;
// How much read_from asks for beyond a large payload, and otherwise.
constexpr size_t kLookAhead = 8u << 10;
constexpr size_t kReadSize = 64u << 10;
}  // namespace

char* FrameDecoder::space_for(size_t n) {
  if (pos_ == end_) pos_ = end_ = 0;
  if (buf_.size() - end_ < n && pos_ > 0) {  // move what is left to the front
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
  }
  if (buf_.size() - end_ < n) buf_.resize(std::max(buf_.size() * 2, end_ + n));
  return buf_.data() + end_;
}

void FrameDecoder::take_into_large(const char*& data, size_t& len) {
  if (!large_) return;
  size_t take = std::min(len, large_->payload.size() - large_have_);
  std::memcpy(large_->payload.data() + large_have_, data, take);
  large_have_ += take;
  data += take;
  len -= take;
}

void FrameDecoder::feed(const char* data, size_t len) {
  take_into_large(data, len);
  if (len == 0) return;
  std::memcpy(space_for(len), data, len);
  end_ += len;
}

ssize_t FrameDecoder::read_from(int fd) {
  iovec iov[2];
  int count = 0;
  size_t need = large_ ? large_->payload.size() - large_have_ : 0;
  if (need > 0) iov[count++] = {large_->payload.data() + large_have_, need};
  size_t room = need > 0 || last_was_large_ ? kLookAhead : kReadSize;
  iov[count++] = {space_for(room), room};
  ssize_t n = count == 1 ? ::read(fd, iov[0].iov_base, iov[0].iov_len) : ::readv(fd, iov, count);
  if (n <= 0) return n;
  size_t got = static_cast<size_t>(n);
  size_t to_large = std::min(got, need);
  large_have_ += to_large;
  end_ += got - to_large;
  return n;
}

std::optional<Frame> FrameDecoder::next() {
  if (large_) {
    if (large_have_ < large_->payload.size()) return std::nullopt;
    Frame f = std::move(*large_);
    large_.reset();
    large_have_ = 0;
    return f;
  }
  if (end_ - pos_ < kHeaderSize) return std::nullopt;
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
  size_t have = end_ - pos_ - kHeaderSize;
  last_was_large_ = len >= kLargePayload;
  if (have < len && !last_was_large_) return std::nullopt;
  Frame f;
  f.stream = get_u32(h + 4);
  f.type = static_cast<FrameType>(type);
  if (have < len) {  // large, in part: the rest goes straight into it
    f.payload.resize(len);
    std::memcpy(f.payload.data(), h + kHeaderSize, have);
    large_ = std::move(f);
    large_have_ = have;
    pos_ = end_ = 0;
    return std::nullopt;
  }
  f.payload.assign(h + kHeaderSize, len);
  pos_ += kHeaderSize + len;
  if (pos_ == end_) pos_ = end_ = 0;
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
