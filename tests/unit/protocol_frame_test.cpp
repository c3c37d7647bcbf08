#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

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

// Whatever the reads' boundaries, read_from gives back the frames that were sent,
// large payloads (read straight into place) and small ones (from its buffer) alike.
TEST(FrameCodec, ReadFromReassemblesLargeAndSmallFramesInOrder) {
  std::string wire;
  std::vector<std::string> payloads;
  for (size_t size :
       {size_t{3}, size_t{64} << 10, size_t{0}, size_t{5000}, size_t{1} << 20, size_t{4095}, size_t{70000}}) {
    std::string p(size, '\0');
    for (size_t i = 0; i < size; ++i) p[i] = static_cast<char>(i * 7 + size);
    payloads.push_back(p);
    append_frame(wire, static_cast<uint32_t>(payloads.size()), FrameType::Stdout, p);
  }
  for (size_t step : {size_t{1}, size_t{9}, size_t{4097}, size_t{65536}, wire.size()}) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    FrameDecoder dec;
    std::vector<Frame> frames;
    size_t sent = 0;
    // The writer does not block: a step larger than the socket's buffer goes in parts.
    ASSERT_EQ(::fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
    while (sent < wire.size()) {
      ssize_t n = ::write(sv[0], wire.data() + sent, std::min(step, wire.size() - sent));
      if (n < 0) {
        ASSERT_EQ(errno, EAGAIN);
      }
      sent += static_cast<size_t>(std::max<ssize_t>(n, 0));
      // Drain what this write made readable (a read may take less than was written).
      int avail = 0;
      while (::ioctl(sv[1], FIONREAD, &avail) == 0 && avail > 0) {
        ASSERT_GT(dec.read_from(sv[1]), 0);
        while (auto f = dec.next()) frames.push_back(std::move(*f));
      }
    }
    ::close(sv[0]);
    ::close(sv[1]);
    ASSERT_EQ(frames.size(), payloads.size()) << "step " << step;
    for (size_t i = 0; i < frames.size(); ++i) {
      EXPECT_EQ(frames[i].stream, i + 1);
      EXPECT_EQ(frames[i].type, FrameType::Stdout);
      EXPECT_TRUE(frames[i].payload == payloads[i]) << "frame " << i << ", step " << step;
    }
    EXPECT_EQ(dec.buffered(), 0u);
  }
}

// A large frame's header announces its size; feed() then completes it in place too.
TEST(FrameCodec, FeedCompletesALargeFrameAfterItsHeader) {
  std::string payload(100000, 'x');
  std::string wire = encode_frame(4, FrameType::Stderr, payload) + encode_frame(5, FrameType::Ping, "");
  FrameDecoder dec;
  dec.feed(wire.data(), 20);
  EXPECT_FALSE(dec.next().has_value());
  EXPECT_EQ(dec.buffered(), 20u);
  dec.feed(wire.data() + 20, wire.size() - 20);
  auto f = dec.next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->stream, 4u);
  EXPECT_EQ(f->payload, payload);
  auto ping = dec.next();
  ASSERT_TRUE(ping.has_value());
  EXPECT_EQ(ping->type, FrameType::Ping);
  EXPECT_FALSE(dec.next().has_value());
}

// read_from judges a header as feed() does: one byte over kMaxPayload is refused,
// and a large frame at the limit is only completed by bytes that arrive.
TEST(FrameCodec, ReadFromRefusesAnOversizedHeaderAndWaitsForALargeFramesBytes) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  char header[kHeaderSize];
  put_header(header, 3, FrameType::Stdout, kMaxPayload + 1);
  ASSERT_EQ(::write(sv[0], header, sizeof header), static_cast<ssize_t>(sizeof header));
  FrameDecoder bad;
  ASSERT_EQ(bad.read_from(sv[1]), static_cast<ssize_t>(kHeaderSize));
  EXPECT_THROW(bad.next(), Error);

  put_header(header, 3, FrameType::Stdout, kMaxPayload);
  std::string part(1000, 'y');
  ASSERT_EQ(::write(sv[0], header, sizeof header), static_cast<ssize_t>(sizeof header));
  ASSERT_EQ(::write(sv[0], part.data(), part.size()), static_cast<ssize_t>(part.size()));
  FrameDecoder dec;
  ASSERT_EQ(dec.read_from(sv[1]), static_cast<ssize_t>(kHeaderSize + part.size()));
  EXPECT_FALSE(dec.next().has_value());
  EXPECT_EQ(dec.buffered(), kHeaderSize + part.size());
  ::close(sv[0]);
  EXPECT_EQ(dec.read_from(sv[1]), 0) << "end of stream";
  EXPECT_FALSE(dec.next().has_value());
  ::close(sv[1]);
}

}  // namespace
}  // namespace boxlite::protocol
