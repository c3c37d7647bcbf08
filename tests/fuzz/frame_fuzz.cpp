// The protocol's frame decoder and every message parser, as a hostile guest (or a
// client of the shim's socket) reaches them: bytes in, frames out, each payload
// parsed as the message its type carries, an Error frame turned into the error it
// reports. Checks: the decoder throws only Rpc errors; bytes fed in two pieces
// give the frames they give whole; a frame re-encodes to the bytes it came from;
// error_from_frame never throws and yields a real kind.
#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "fuzz/fuzz_support.hpp"
#include "protocol/frame.hpp"

namespace {

using namespace boxlite;
using namespace boxlite::protocol;

template <typename Msg>
void parse_as(const Frame& f) {
  try {
    Msg m = parse_message<Msg>(f);
    // What parsed re-serializes and parses again (the shim forwards messages it read).
    Frame again{f.stream, f.type, m.SerializeAsString()};
    (void)parse_message<Msg>(again);
  } catch (const Error& e) {
    fuzz::check_error(e, {ErrorKind::Rpc});
  }
}

void parse_payload(const Frame& f) {
  switch (f.type) {
    case FrameType::Hello: parse_as<proto::Hello>(f); break;
    case FrameType::Configure: parse_as<proto::BoxConfig>(f); break;
    case FrameType::Configured: parse_as<proto::Configured>(f); break;
    case FrameType::Exec: parse_as<proto::ExecRequest>(f); break;
    case FrameType::Started: parse_as<proto::ExecStarted>(f); break;
    case FrameType::Credit: parse_as<proto::Credit>(f); break;
    case FrameType::Exit: parse_as<proto::ExecExit>(f); break;
    case FrameType::Signal: parse_as<proto::Signal>(f); break;
    case FrameType::Resize: parse_as<proto::Resize>(f); break;
    case FrameType::Shutdown: parse_as<proto::Shutdown>(f); break;
    case FrameType::Attach: parse_as<proto::AttachRequest>(f); break;
    case FrameType::Metrics: parse_as<proto::BoxStats>(f); break;
    case FrameType::Error: {
      Error e = error_from_frame(f, "the guest");
      fuzz::check(error_kind_info(e.kind()).kind == e.kind(), "error_from_frame gave a kind outside the table");
      break;
    }
    default: break;  // raw bytes (Stdin, Stdout, Stderr) and empty frames
  }
}

// Every frame of `bytes`, fed in pieces of `piece` bytes; `error` gets the
// decoder's error, if it threw one.
std::vector<Frame> decode(std::string_view bytes, size_t piece, std::string& error) {
  FrameDecoder d;
  std::vector<Frame> out;
  try {
    for (size_t off = 0; off < bytes.size(); off += piece) {
      d.feed(bytes.data() + off, std::min(piece, bytes.size() - off));
      while (auto f = d.next()) out.push_back(std::move(*f));
    }
  } catch (const Error& e) {
    fuzz::check_error(e, {ErrorKind::Rpc});
    error = e.what();
  }
  return out;
}

}  // namespace

// protobuf logs every string field of invalid UTF-8 it refuses: millions here.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes = fuzz::as_text(data, size);
  std::string whole_error, split_error;
  std::vector<Frame> whole = decode(bytes, bytes.size() + 1, whole_error);
  // A piece size from the input, so that frames straddle feeds in every way.
  size_t piece = size == 0 ? 1 : 1 + data[0] % 23;
  std::vector<Frame> split = decode(bytes, piece, split_error);
  fuzz::check(whole.size() == split.size() && whole_error == split_error,
              "the frames depend on how the bytes were fed");
  std::string reencoded;
  for (size_t i = 0; i < whole.size(); ++i) {
    fuzz::check(
        whole[i].stream == split[i].stream && whole[i].type == split[i].type && whole[i].payload == split[i].payload,
        "a frame differs when fed in pieces");
    append_frame(reencoded, whole[i].stream, whole[i].type, whole[i].payload);
    parse_payload(whole[i]);
  }
  fuzz::check(bytes.substr(0, reencoded.size()) == reencoded, "frames do not re-encode to the bytes they came from");
  return 0;
}
