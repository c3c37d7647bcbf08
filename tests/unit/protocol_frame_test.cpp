#include <gtest/gtest.h>

#include "common/error.hpp"
#include "protocol/frame.hpp"

namespace boxlite::protocol {
namespace {

TEST(FrameCodec, RoundTripsFramesFedOneByteAtATime) {
  std::string wire;
  append_frame(wire, 7, FrameType::Stdout, std::string("a\0b", 3));
  append_frame(wire, 0, FrameType::Ping, "");
  proto::Credit c;
  c.set_channel(proto::STDERR);
  c.set_bytes(1234);
  wire += encode_message(9, FrameType::Credit, c);
  FrameDecoder dec;
  std::vector<Frame> frames;
  for (char ch : wire) {
    dec.feed(&ch, 1);
    while (auto f = dec.next()) frames.push_back(*f);
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].stream, 7u);
  EXPECT_EQ(frames[0].type, FrameType::Stdout);
  EXPECT_EQ(frames[0].payload, std::string("a\0b", 3));
  EXPECT_EQ(frames[1].type, FrameType::Ping);
  EXPECT_TRUE(frames[1].payload.empty());
  auto credit = parse_message<proto::Credit>(frames[2]);
  EXPECT_EQ(credit.channel(), proto::STDERR);
  EXPECT_EQ(credit.bytes(), 1234u);
  EXPECT_EQ(dec.buffered(), 0u);
}

TEST(FrameCodec, OversizedFrameIsAProtocolViolation) {
  std::string wire = {'\x7f', '\0', '\0', '\0', '\0', '\0', '\0', '\1', '\x08'};
  FrameDecoder dec;
  dec.feed(wire.data(), wire.size());
  try {
    dec.next();
    FAIL() << "expected a protocol violation";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Rpc);
    EXPECT_NE(std::string(e.what()).find("exceeds"), std::string::npos);
  }
}

TEST(FrameCodec, UnknownFrameTypeIsAProtocolViolation) {
  std::string wire = {'\0', '\0', '\0', '\0', '\0', '\0', '\0', '\1', '\x63'};
  FrameDecoder dec;
  dec.feed(wire.data(), wire.size());
  EXPECT_THROW(dec.next(), Error);
}

TEST(FrameCodec, MalformedMessageNamesTheFrame) {
  Frame f;
  f.stream = 3;
  f.type = FrameType::Exec;
  f.payload = "\xff\xff\xff";
  try {
    parse_message<proto::ExecRequest>(f);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("malformed Exec frame on stream 3"), std::string::npos) << e.what();
  }
}

TEST(FrameCodec, PayloadOverTheLimitIsRefusedWhenEncoding) {
  std::string big(kMaxPayload + 1, 'x');
  std::string out;
  EXPECT_THROW(append_frame(out, 1, FrameType::Stdin, big), Error);
  // An exec whose arguments outgrow a frame is the caller's input: said so.
  try {
    append_frame(out, 1, FrameType::Exec, big);
    ADD_FAILURE() << "an oversized Exec frame was encoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("shorten the command's arguments and environment"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(out.empty());
}

TEST(FrameCodec, PartialHeaderWaitsForMoreBytes) {
  std::string wire = encode_frame(1, FrameType::Stdin, "hello");
  FrameDecoder dec;
  dec.feed(wire.data(), 5);
  EXPECT_FALSE(dec.next().has_value());
  dec.feed(wire.data() + 5, wire.size() - 5);
  auto f = dec.next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->payload, "hello");
}

}  // namespace
}  // namespace boxlite::protocol
