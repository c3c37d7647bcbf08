// The shim's router, driven as the shim drives it: frames in from a guest and from
// clients, frames out through a sink that records them.
#include <gtest/gtest.h>

#include <signal.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "shim/router.hpp"

namespace boxlite::shim {
namespace {

using protocol::Frame;
using protocol::FrameType;

struct Out {
  bool to_guest = false;
  uint64_t client = 0;
  uint32_t stream = 0;
  FrameType type{};
  std::string payload;
};

class RecordingSink : public RouterSink {
 public:
  void to_guest(uint32_t stream, FrameType type, std::string_view payload) override {
    out.push_back({true, 0, stream, type, std::string(payload)});
  }
  void to_client(uint64_t client, uint32_t stream, FrameType type, std::string_view payload) override {
    out.push_back({false, client, stream, type, std::string(payload)});
  }
  void stop_box(const std::string& why) override { stops.push_back(why); }
  proto::BoxStats usage() override {
    proto::BoxStats s;
    s.set_memory_bytes(4096);
    return s;
  }
  void log_main(const Frame& f) override { logged.push_back(f); }
  std::vector<Frame> main_history() override { return logged; }
  void guest_error(const Error& e) override { guest_errors.push_back(e.what()); }

  std::vector<Out> take() {
    std::vector<Out> o;
    o.swap(out);
    return o;
  }
  std::vector<Out> out;
  std::vector<std::string> stops, guest_errors;
  std::vector<Frame> logged;
};

Frame frame(uint32_t stream, FrameType type, std::string payload = {}) {
  Frame f;
  f.stream = stream;
  f.type = type;
  f.payload = std::move(payload);
  return f;
}

template <class Msg>
Frame msg(uint32_t stream, FrameType type, const Msg& m) {
  return frame(stream, type, m.SerializeAsString());
}

Frame hello() {
  proto::Hello h;
  h.set_version(protocol::kProtocolVersion);
  h.set_peer("client");
  return msg(0, FrameType::Hello, h);
}

Frame exec(uint32_t stream, bool detach = false) {
  proto::ExecRequest r;
  r.add_argv("true");
  r.set_detach(detach);
  return msg(stream, FrameType::Exec, r);
}

Error error_in(const Out& o) {
  Frame f = frame(o.stream, o.type, o.payload);
  return protocol::error_from_frame(f, "the router");
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router.add_client(1);
    Frame h = hello();
    router.on_client_frame(1, h);
    auto out = sink.take();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].type, FrameType::Hello);
  }
  // Starts an exec on the client's stream `cs`: the guest stream it was given.
  uint32_t start_exec(uint32_t cs, bool detach = false) {
    Frame e = exec(cs, detach);
    router.on_client_frame(1, e);
    auto out = sink.take();
    EXPECT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].to_guest);
    EXPECT_EQ(out[0].type, FrameType::Exec);
    return out[0].stream;
  }
  RecordingSink sink;
  Router router{sink, "boxid"};
};

TEST_F(RouterTest, AnExecGetsAGuestStreamOfItsOwnAndItsOutputComesBackOnTheClientsStream) {
  uint32_t gs = start_exec(7);
  EXPECT_GT(gs, protocol::kMainStream);
  Frame out = frame(gs, FrameType::Stdout, "hello");
  router.on_guest_frame(out);
  auto got = sink.take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].client, 1u);
  EXPECT_EQ(got[0].stream, 7u);
  EXPECT_EQ(got[0].payload, "hello");
  proto::ExecExit ex;
  ex.set_exit_code(3);
  Frame exit = msg(gs, FrameType::Exit, ex);
  router.on_guest_frame(exit);
  ASSERT_EQ(sink.take().size(), 1u);
  // The stream is closed: the guest may not speak on it again.
  Frame late = frame(gs, FrameType::Stdout, "x");
  EXPECT_THROW(router.on_guest_frame(late), Error);
}

TEST_F(RouterTest, AGuestThatSendsBeyondItsCreditIsAProtocolViolation) {
  uint32_t gs = start_exec(2);
  Frame big = frame(gs, FrameType::Stdout, std::string(protocol::kInitialWindow, 'x'));
  router.on_guest_frame(big);
  sink.take();
  Frame one_more = frame(gs, FrameType::Stdout, "x");
  try {
    router.on_guest_frame(one_more);
    FAIL() << "beyond the credit";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Rpc);
  }
  // Credit from the client lets it go on.
  uint32_t gs2 = start_exec(3);
  Frame fill = frame(gs2, FrameType::Stdout, std::string(protocol::kInitialWindow, 'x'));
  router.on_guest_frame(fill);
  proto::Credit c;
  c.set_channel(proto::STDOUT);
  c.set_bytes(10);
  Frame credit = msg(3, FrameType::Credit, c);
  router.on_client_frame(1, credit);
  Frame ten = frame(gs2, FrameType::Stdout, std::string(10, 'y'));
  EXPECT_NO_THROW(router.on_guest_frame(ten));
}

TEST_F(RouterTest, ADroppedClientsExecIsKilledAndADetachedOneGetsItsCreditBack) {
  uint32_t owned = start_exec(2);
  uint32_t detached = start_exec(4, /*detach=*/true);
  Frame unread = frame(detached, FrameType::Stdout, std::string(1000, 'z'));
  router.on_guest_frame(unread);
  sink.take();
  router.drop_client(1);
  auto out = sink.take();
  bool killed = false, credited = false;
  for (const auto& o : out) {
    ASSERT_TRUE(o.to_guest);
    if (o.stream == owned && o.type == FrameType::Signal) {
      proto::Signal s;
      ASSERT_TRUE(s.ParseFromString(o.payload));
      killed = s.signo() == SIGKILL;
    }
    if (o.stream == detached && o.type == FrameType::Credit) credited = true;
  }
  EXPECT_TRUE(killed);
  EXPECT_TRUE(credited);
  // The detached exec's output is now discarded, its credit returned as it comes.
  Frame more = frame(detached, FrameType::Stdout, "more");
  router.on_guest_frame(more);
  out = sink.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].to_guest);
  EXPECT_EQ(out[0].type, FrameType::Credit);
}

TEST_F(RouterTest, AStoppingBoxRefusesExecsAndOneWhoseMainCommandExitedSaysSo) {
  router.set_accepting(false);
  Frame e = exec(5);
  router.on_client_frame(1, e);
  auto out = sink.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(error_in(out[0]).kind(), ErrorKind::Stopped);
  EXPECT_EQ(router.exec_errors(), 1u);

  router.set_accepting(true);
  router.set_main_present();
  proto::ExecExit ex;
  ex.set_exit_code(0);
  Frame exit = msg(protocol::kMainStream, FrameType::Exit, ex);
  router.on_guest_frame(exit);
  ASSERT_EQ(sink.stops.size(), 1u);
  EXPECT_EQ(sink.stops[0], "main command exited with code 0");
  Frame again = exec(6);
  router.on_client_frame(1, again);
  out = sink.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(error_in(out[0]).kind(), ErrorKind::InvalidState);
}

TEST_F(RouterTest, AnAttachReplaysTheLogThenFollowsAndOnlyItsStdinWriterWrites) {
  router.set_main_present();
  Frame early = frame(protocol::kMainStream, FrameType::Stdout, "before ");
  router.on_guest_frame(early);
  auto out = sink.take();
  ASSERT_EQ(out.size(), 1u);  // its credit, straight back
  EXPECT_TRUE(out[0].to_guest);
  EXPECT_EQ(out[0].type, FrameType::Credit);

  proto::AttachRequest with_stdin;
  with_stdin.set_stdin(true);
  Frame attach = msg(9, FrameType::Attach, with_stdin);
  router.on_client_frame(1, attach);
  out = sink.take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].type, FrameType::Started);
  EXPECT_EQ(out[1].payload, "before ");

  router.add_client(2);
  Frame h = hello();
  router.on_client_frame(2, h);
  Frame second = msg(3, FrameType::Attach, with_stdin);
  router.on_client_frame(2, second);
  out = sink.take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(error_in(out[1]).kind(), ErrorKind::InvalidState);  // another writes its stdin

  Frame live = frame(protocol::kMainStream, FrameType::Stdout, "after");
  router.on_guest_frame(live);
  out = sink.take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].client, 1u);
  EXPECT_EQ(out[1].stream, 9u);
  Frame input = frame(9, FrameType::Stdin, "typed");
  router.on_client_frame(1, input);
  out = sink.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].to_guest);
  EXPECT_EQ(out[0].stream, protocol::kMainStream);
}

TEST_F(RouterTest, MetricsCarryTheCountersAndTheEnginesUsage) {
  uint32_t gs = start_exec(2);
  Frame started = frame(gs, FrameType::Started, proto::ExecStarted{}.SerializeAsString());
  router.on_guest_frame(started);
  sink.take();
  Frame m = frame(0, FrameType::Metrics);
  router.on_client_frame(1, m);
  auto out = sink.take();
  ASSERT_EQ(out.size(), 1u);
  proto::BoxStats s;
  ASSERT_TRUE(s.ParseFromString(out[0].payload));
  EXPECT_EQ(s.commands_executed(), 1u);
  EXPECT_EQ(s.memory_bytes(), 4096u);
}

TEST_F(RouterTest, AClientMustSayHelloInItsVersionFirst) {
  router.add_client(2);
  Frame e = exec(1);
  EXPECT_THROW(router.on_client_frame(2, e), Error);
  router.add_client(3);
  proto::Hello old;
  old.set_version(protocol::kProtocolVersion + 1);
  Frame h = msg(0, FrameType::Hello, old);
  try {
    router.on_client_frame(3, h);
    FAIL() << "another version";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::Rpc);
    EXPECT_NE(std::string(err.what()).find("version mismatch"), std::string::npos);
  }
}

TEST_F(RouterTest, TheBoxsStopIsToldOnEveryOpenStreamAndTheControlStream) {
  start_exec(2);
  start_exec(4);
  router.box_stopped(Error(ErrorKind::Stopped, "box boxid stopped"));
  auto out = sink.take();
  ASSERT_EQ(out.size(), 3u);
  for (const auto& o : out) EXPECT_EQ(error_in(o).kind(), ErrorKind::Stopped);
}

}  // namespace
}  // namespace boxlite::shim
