// Exec, complete (issue 5): stdin, PTY, signals, timeouts, users, cwd/env,
// output limits and concurrency, on both engines.
#include <openssl/evp.h>
#include <signal.h>

#include <future>
#include <random>

#include "support.hpp"

namespace boxlite::testing {
namespace {

class ExecTest : public PerEngineTest {
 protected:
  void TearDown() override {
    box_.reset();
    PerEngineTest::TearDown();
  }

  Box& box(const std::string& img = "busybox") {
    if (!box_) {
      BoxOptions o;
      o.rootfs_path = image(img);
      o.env = {{"BOX_VAR", "from-box"}, {"IMAGE_VAR", "box-overrides-image"}};
      box_ = rt().create(o);
    }
    return *box_;
  }
  BufferedResult sh(const std::string& script, EnvList env = {}) {
    ExecOptions e;
    e.argv = {"sh", "-c", script};
    e.env = std::move(env);
    return box().run(e);
  }
  // Reads until `marker` appears in stdout (the process is ready for the next step).
  static std::string read_until(Execution& e, const std::string& marker) {
    std::string seen;
    while (seen.find(marker) == std::string::npos) {
      auto c = e.next_output();
      if (!c) break;
      seen += c->data;
    }
    return seen;
  }

  // Made on first use: SetUp has chosen the test's home by then.
  std::unique_ptr<Runtime> rt_;
  Runtime& rt() {
    if (!rt_) rt_ = std::make_unique<Runtime>(RuntimeOptions{.home_dir = home_});
    return *rt_;
  }
  std::shared_ptr<Box> box_;
};

std::string sha256(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return hex_encode(md, len);
}

TEST_P(ExecTest, FiftyMegabytesOfBinaryStdinRoundTripThroughCat) {
  std::string data(50u << 20, '\0');
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(&data[i], &v, 8);
  }
  ExecOptions o;
  o.argv = {"cat"};
  o.stdin_open = true;
  Execution e = box().exec(o);
  std::string got;
  std::thread writer([&] {
    e.write_stdin(data);
    e.close_stdin();
    e.close_stdin();  // twice is fine
  });
  while (auto c = e.next_output()) {
    if (c->stream == StreamKind::Stdout) got += c->data;
  }
  writer.join();
  EXPECT_EQ(e.wait().exit_code, 0);
  EXPECT_EQ(got.size(), data.size());
  EXPECT_EQ(sha256(got), sha256(data));
}

TEST_P(ExecTest, StdinWithoutOpenIsEmptyAndClosingStdinEndsCat) {
  EXPECT_EQ(box().run(ExecOptions{{"cat"}}).stdout_text, "");
  ExecOptions o;
  o.argv = {"sh", "-c", "read line; echo got:$line"};
  o.stdin_open = true;
  Execution e = box().exec(o);
  e.write_stdin("hi\n");
  e.close_stdin();
  EXPECT_EQ(read_until(e, "\n"), "got:hi\n");
  EXPECT_EQ(e.wait().exit_code, 0);
}

TEST_P(ExecTest, PtyIsATerminalResizesAndMergesOutput) {
  ExecOptions o;
  o.argv = {"sh", "-c",
            "test -t 0 && echo tty-in; test -t 1 && echo tty-out; echo to-stderr >&2; stty size; "
            "read go; stty size; printf '\\001\\377\\000end'"};
  o.tty = true;
  o.stdin_open = true;
  o.rows = 30;
  o.cols = 100;
  Execution e = box().exec(o);
  std::string first = read_until(e, "30 100");
  EXPECT_NE(first.find("tty-in"), std::string::npos) << first;
  EXPECT_NE(first.find("tty-out"), std::string::npos) << first;
  EXPECT_NE(first.find("to-stderr"), std::string::npos) << "stderr is merged into the PTY: " << first;
  e.resize(50, 132);
  e.write_stdin("go\n");
  std::string rest;
  while (auto c = e.next_output()) {
    EXPECT_EQ(c->stream, StreamKind::Stdout);
    rest += c->data;
  }
  EXPECT_NE(rest.find("50 132"), std::string::npos) << rest;
  EXPECT_NE(rest.find(std::string("\001\377\000end", 6)), std::string::npos) << "raw bytes survive the PTY";
  EXPECT_EQ(e.wait().exit_code, 0);
  // Without a PTY, stdin is not a terminal.
  EXPECT_EQ(sh("test -t 0 || echo not-a-tty").stdout_text, "not-a-tty\n");
}

TEST_P(ExecTest, SignalIsDeliveredAndKillReapsTheWholeGroup) {
  ExecOptions o;
  o.argv = {"sh", "-c", "trap 'echo got-usr1; exit 3' USR1; echo ready; while :; do sleep 0.1; done"};
  Execution e = box().exec(o);
  read_until(e, "ready");
  e.signal(SIGUSR1);
  EXPECT_NE(read_until(e, "got-usr1"), "");
  EXPECT_EQ(e.wait().exit_code, 3);

  ExecOptions k;
  k.argv = {"sh", "-c", "sleep 1001 & sleep 1002 & echo ready; wait"};
  Execution e2 = box().exec(k);
  read_until(e2, "ready");
  e2.kill();
  EXPECT_EQ(e2.wait().exit_code, -9);
  auto ps = sh("ps -o args | grep -c '^sleep 100[12]' || true");
  EXPECT_EQ(ps.stdout_text, "0\n") << "processes survived the kill";
  EXPECT_THROW(e2.signal(0), Error);
}

// As in a container: nothing ignored, blocked or caught, the agent's SIGPIPE and
// the two signals posix_spawn leaves ignored (glibc's own, 32 and 33) included.
TEST_P(ExecTest, ProcessesStartWithEveryDispositionAtItsDefault) {
  auto r = box().run(ExecOptions{{"grep", "-E", "^Sig(Blk|Ign|Cgt):", "/proc/self/status"}});
  const std::string defaults = "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n";
  EXPECT_EQ(r.stdout_text, defaults) << r.stderr_text;
  // The main command is started the other way (the box's PID 1, /proc swapped first).
  auto main = run_cli({"run", "--rm", image("busybox"), "grep", "-E", "^Sig(Blk|Ign|Cgt):", "/proc/self/status"});
  EXPECT_EQ(main.out, defaults) << main.err;
}

TEST_P(ExecTest, TimeoutTermsThenKillsAndLeavesNothing) {
  ExecOptions o;
  o.argv = {"sh", "-c", "sleep 1003 & sleep 1004"};
  o.timeout_secs = 0.5;
  auto r = box().run(o);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, -15);
  EXPECT_NE(r.as_text().find("Command timed out after 0.5s"), std::string::npos) << r.as_text();
  // A process that ignores SIGTERM is killed after the grace period.
  ExecOptions stubborn;
  stubborn.argv = {"sh", "-c", "trap '' TERM; sleep 1005"};
  stubborn.timeout_secs = 0.3;
  auto s = box().run(stubborn);
  EXPECT_TRUE(s.timed_out);
  EXPECT_NE(s.exit_code, 0);
  EXPECT_EQ(sh("ps -o args | grep -c '^sleep 100[345]' || true").stdout_text, "0\n");
  // 0 means no timeout.
  ExecOptions none;
  none.argv = {"sleep", "1"};
  none.timeout_secs = 0;
  auto n = box().run(none);
  EXPECT_FALSE(n.timed_out);
  EXPECT_EQ(n.exit_code, 0);
  ExecOptions bad;
  bad.argv = {"true"};
  bad.timeout_secs = -1;
  EXPECT_THROW(box().run(bad), Error);
}

TEST_P(ExecTest, UsersByNameOrNumberWithSupplementaryGroups) {
  ExecOptions o;
  o.argv = {"id"};
  o.user = "user";
  auto id = box().run(o).stdout_text;
  EXPECT_EQ(id.substr(0, 30), "uid=1000(user) gid=1000(user) ") << id;
  EXPECT_NE(id.find("10(wheel)"), std::string::npos) << "supplementary group missing: " << id;
  EXPECT_NE(id.find("groups="), std::string::npos) << id;
  o.user = "1000:10";
  EXPECT_EQ(box().run(o).stdout_text.substr(0, 30), "uid=1000(user) gid=10(wheel) g");
  o.user = "4321";
  EXPECT_NE(box().run(o).stdout_text.find("uid=4321"), std::string::npos);
  o.user = "user:wheel";
  EXPECT_NE(box().run(o).stdout_text.find("gid=10(wheel)"), std::string::npos);
  o.user = "nosuchuser";
  try {
    box().run(o);
    ADD_FAILURE() << "unknown user must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unable to find user nosuchuser"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sh("id -u").stdout_text, "0\n");
}

TEST_P(ExecTest, BadCwdFailsThatExecOnlyAndEnvHasPrecedence) {
  ExecOptions o;
  o.argv = {"pwd"};
  o.cwd = "/no/such/dir";
  try {
    box().run(o);
    ADD_FAILURE() << "a bad cwd must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/dir"), std::string::npos) << e.what();
  }
  o.cwd = "etc";  // relative: refused before anything runs, as the box's working_dir is
  try {
    box().run(o);
    ADD_FAILURE() << "a relative cwd must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("must be an absolute path, got 'etc'"), std::string::npos) << e.what();
  }
  o.cwd = "/etc";
  EXPECT_EQ(box().run(o).stdout_text, "/etc\n");
  // image env < box env < exec env
  auto r =
      sh("echo $IMAGE_VAR $BOX_VAR $EXEC_VAR $PATH", {{"EXEC_VAR", "from-exec"}, {"BOX_VAR", "exec-overrides-box"}});
  EXPECT_EQ(r.stdout_text, "box-overrides-image exec-overrides-box from-exec /usr/sbin:/usr/bin:/sbin:/bin\n");
  EXPECT_THROW(box().run(ExecOptions{{"true"}, {{"BAD=NAME", "x"}}}), Error);
}

TEST_P(ExecTest, AnUnreadWriterIsHeldByBackpressure) {
  ExecOptions o;
  o.argv = {"sh", "-c", "i=0; while :; do head -c 65536 /dev/zero; i=$((i+1)); echo $i > /tmp/progress; done"};
  Execution e = box().exec(o);
  ::usleep(2000000);  // read nothing for 2 s
  int progress = std::stoi(sh("cat /tmp/progress").stdout_text);
  // The window (1 MiB) plus pipe and channel buffers hold a few dozen chunks at most;
  // without backpressure this would be tens of thousands.
  EXPECT_LT(progress, 200) << "the writer was not held back";
  e.kill();
  e.wait();
}

TEST_P(ExecTest, TheBufferedApiTruncatesAtItsDocumentedMaximum) {
  auto r = sh("head -c 20000000 /dev/zero; echo err >&2");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_text.size(), kMaxBufferedOutput);
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_FALSE(r.stderr_truncated);
  EXPECT_EQ(r.stderr_text, "err\n");
}

TEST_P(ExecTest, SixtyFourConcurrentMixedExecsKeepTheirOwnOutput) {
  box().start();
  int rounds = vm() ? 2 : 20;  // TCG is ~50x slower; the vm engine still runs it fully once
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::future<std::string>> futures;
    for (int i = 0; i < 64; ++i) {
      futures.push_back(std::async(std::launch::async, [this, i]() -> std::string {
        std::string tag = "t" + std::to_string(i);
        switch (i % 4) {
          case 0: {  // stdin echoed back
            ExecOptions o;
            o.argv = {"cat"};
            o.stdin_open = true;
            Execution e = box().exec(o);
            e.write_stdin(tag + "\n");
            e.close_stdin();
            std::string out;
            while (auto c = e.next_output()) out += c->data;
            return e.wait().exit_code == 0 && out == tag + "\n" ? "" : "stdin " + tag + ": " + out;
          }
          case 1: {  // stdout and stderr kept apart
            auto r = box().run(ExecOptions{{"sh", "-c", "echo out-" + tag + "; echo err-" + tag + " >&2"}});
            return r.stdout_text == "out-" + tag + "\n" && r.stderr_text == "err-" + tag + "\n" ? "" : "streams " + tag;
          }
          case 2: {  // timeout
            ExecOptions o;
            o.argv = {"sh", "-c", "echo " + tag + "; sleep 30"};
            o.timeout_secs = 0.3;
            auto r = box().run(o);
            return r.timed_out && r.stdout_text == tag + "\n" ? "" : "timeout " + tag;
          }
          default: {  // kill
            Execution e = box().exec(ExecOptions{{"sh", "-c", "echo " + tag + "; sleep 30"}});
            std::string out = read_until(e, tag);
            e.kill();
            return e.wait().exit_code == -9 && out == tag + "\n" ? "" : "kill " + tag + ": " + out;
          }
        }
      }));
    }
    for (auto& f : futures) {
      ASSERT_EQ(f.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "round " << round << " hung";
      EXPECT_EQ(f.get(), "") << "round " << round;
    }
  }
}

TEST_P(ExecTest, CliRunWithATtyUnderTmux) {
  if (which("tmux").empty()) GTEST_SKIP() << "tmux missing (scripts/setup installs it)";
  std::string cmd = "BOXLITE_HOME=" + home_ + " BOXLITE_ENGINE=" + GetParam() + " BOXLITE_ACCEL=tcg " + cli() +
                    " run --rm -it " + image("busybox") +
                    " sh -c 'test -t 0 && echo IS-A-TTY; stty size; read x; echo GOT-$x'; sleep 30";
  TmuxSession term(home_ + "/tmux.sock", cmd, 120, 40);
  ASSERT_TRUE(term.started());
  std::string s = term.wait_for("40 120", 30);
  EXPECT_NE(s.find("IS-A-TTY"), std::string::npos) << s;
  EXPECT_NE(s.find("40 120"), std::string::npos) << s;
  term.type_line("hello");
  s = term.wait_for("GOT-hello");
  EXPECT_NE(s.find("GOT-hello"), std::string::npos) << s;
}

BOXLITE_ON_BOTH_ENGINES(ExecTest);

class CliExecTtyTest : public BoxliteTest {};

TEST_F(CliExecTtyTest, ExecItInARealTerminal) {
  if (which("tmux").empty()) GTEST_SKIP() << "tmux missing (scripts/setup installs it)";
  ::setenv("BOXLITE_ENGINE", "jail", 1);
  ASSERT_EQ(run_cli({"create", "--name", "tty", image("busybox")}).exit_code, 0);
  ASSERT_EQ(run_cli({"start", "tty"}).exit_code, 0);
  std::string cmd = "BOXLITE_HOME=" + home_ + " " + cli() +
                    " exec -it tty -- sh -c 'test -t 0 && echo IS-A-TTY; stty size; read x; echo GOT-$x'; sleep 30";
  {
    TmuxSession term(home_ + "/tmux.sock", cmd, 100, 30);
    ASSERT_TRUE(term.started());
    std::string s = term.wait_for("30 100");
    EXPECT_NE(s.find("IS-A-TTY"), std::string::npos) << s;
    EXPECT_NE(s.find("30 100"), std::string::npos) << s;
    term.type_line("typed");
    s = term.wait_for("GOT-typed");
    EXPECT_NE(s.find("GOT-typed"), std::string::npos) << s;
  }
  run_cli({"rm", "-f", "tty"});
}

}  // namespace
}  // namespace boxlite::testing
