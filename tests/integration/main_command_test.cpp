// The box's main command (issue 4): entrypoint+cmd runs as PID 1 of the box's
// processes, attach() follows it and returns its exit code, and the box stops
// when it exits; exec is then refused until the box is started again.
#include <signal.h>
#include <sys/wait.h>

#include "core/runtime.hpp"
#include "support.hpp"

namespace boxlite::testing {
namespace {

class MainCommandTest : public PerEngineTest {
 protected:
  BoxOptions opts(std::vector<std::string> cmd) {
    BoxOptions o;
    o.image = image("busybox");
    o.cmd = std::move(cmd);
    o.auto_remove = false;
    return o;
  }
  static std::string collect(Execution& e) {
    std::string out;
    while (auto c = e.next_output()) out += (c->stream == StreamKind::Stdout ? "" : "ERR:") + c->data;
    return out;
  }
  static bool wait_stopped(Box& b, double secs = 10) {
    for (int i = 0; i < secs * 20; ++i) {
      if (b.state() == BoxState::Stopped) return true;
      ::usleep(50000);
    }
    return false;
  }
};

// The box's files are made with a container's umask, not the caller's: under
// `umask 077` a box's "/" would otherwise shut out every user but root.
TEST_P(MainCommandTest, TheCallersUmaskStaysOutOfTheBox) {
  auto r = run_capture({"sh", "-c", "umask 077; exec \"$0\" \"$@\"", cli(), "run", "--rm", "-u", "1000",
                        image("busybox"), "sh", "-c", "umask; ls / >/dev/null && echo listed"});
  EXPECT_EQ(r.out, "0022\nlisted\n") << r.err;
}

TEST_P(MainCommandTest, RunsAsPid1AndItsExitStopsTheBox) {
  Runtime rt;
  auto box = rt.create(opts({"sh", "-c", "echo pid=$$; echo oops >&2; exit 7"}));
  Execution a = box->attach();  // starts the created box
  // stdout and stderr are two pipes in the box: either line may be forwarded first.
  std::string live = collect(a);
  EXPECT_TRUE(live == "pid=1\nERR:oops\n" || live == "ERR:oops\npid=1\n") << live;
  EXPECT_EQ(a.wait().exit_code, 7);
  ASSERT_TRUE(wait_stopped(*box)) << "the box must stop when its main command exits";
  EXPECT_EQ(box->main_exit_code(), 7);
  EXPECT_EQ(rt.get_info(box->id()).status, BoxState::Stopped);
  EXPECT_NE(rt.get_info(box->id()).stop_reason.find("main command exited with code 7"), std::string::npos);

  try {
    box->exec(ExecOptions{.argv = {"true"}});
    ADD_FAILURE() << "exec after the main command exited must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidState);
    EXPECT_EQ(std::string(e.what()),
              "Cannot exec box " + box->id() + ": it is stopped, and its main command has already exited");
  }
  // Attaching afterwards hands back that finished run, from another handle too.
  Execution again = rt.get(box->id())->attach();
  EXPECT_EQ(collect(again), live) << "the run as it was forwarded";
  EXPECT_EQ(again.wait().exit_code, 7);
  rt.remove(box->id());
  expect_no_leftovers();
}

// An attach that comes after the main command ended (as `run` of a quick command
// often does) hands back its output and exit code from the shim's exit record, then
// the box reads as stopped, with that exit, and a remove leaves nothing.
TEST_P(MainCommandTest, AnAttachAfterTheMainCommandEndedHandsBackItsRun) {
  Runtime rt;
  auto box = rt.create(opts({"sh", "-c", "echo done; exit 9"}));
  box->start();
  for (int i = 0; i < 200 && !path_exists(local(*box).dir() + "/exit.json"); ++i) ::usleep(25000);
  ASSERT_TRUE(path_exists(local(*box).dir() + "/exit.json")) << "the main command did not end";
  Execution late = box->attach();
  EXPECT_EQ(collect(late), "done\n");
  EXPECT_EQ(late.wait().exit_code, 9);
  ASSERT_TRUE(wait_stopped(*box));
  EXPECT_EQ(box->main_exit_code(), 9);
  EXPECT_EQ(rt.get_info(box->id()).status, BoxState::Stopped);
  rt.remove(box->id());
  expect_no_leftovers();
}

TEST_P(MainCommandTest, StartRunsItAgainAndExecWorksWhileItRuns) {
  Runtime rt;
  // Exits the first time; the second time it keeps running.
  auto box = rt.create(opts({"sh", "-c", "if [ -e /root/ran ]; then exec sleep 1000; fi; touch /root/ran; exit 3"}));
  box->start();
  ASSERT_TRUE(wait_stopped(*box));
  EXPECT_EQ(box->main_exit_code(), 3);
  box->start();
  auto r = box->run(ExecOptions{.argv = {"sh", "-c", "echo $$; cat /proc/1/status >/dev/null; ls /root"}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text.substr(r.stdout_text.find('\n') + 1), "ran\n");
  EXPECT_NE(r.stdout_text.substr(0, r.stdout_text.find('\n')), "1") << "an exec is not PID 1";
  // PID 1 of the box ignores signals it has no handler for, as in a container.
  EXPECT_EQ(box->run(ExecOptions{.argv = {"kill", "-TERM", "1"}}).exit_code, 0);
  ::usleep(500000);
  EXPECT_EQ(box->state(), BoxState::Running);
  EXPECT_FALSE(box->main_exit_code());
  EXPECT_EQ(box->run(ExecOptions{.argv = {"true"}}).exit_code, 0);
  box->stop();
  EXPECT_FALSE(box->main_exit_code()) << "a stop is not the main command exiting";
  rt.remove(box->id());
  expect_no_leftovers();
}

TEST_P(MainCommandTest, AttachWithStdinFeedsTheMainCommand) {
  Runtime rt;
  BoxOptions o = opts({"sh", "-c", "read line; echo got:$line"});
  auto box = rt.create(o);
  box->start();
  // A follower without stdin sees the same output.
  Execution watcher = box->attach();
  Execution a = box->attach(/*with_stdin=*/true);
  try {
    box->attach(/*with_stdin=*/true);
    ADD_FAILURE() << "only one client may write the main command's stdin";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidState);
  }
  a.write_stdin("hello\n");
  a.close_stdin();
  EXPECT_EQ(collect(a), "got:hello\n");
  EXPECT_EQ(a.wait().exit_code, 0);
  EXPECT_EQ(collect(watcher), "got:hello\n");
  ASSERT_TRUE(wait_stopped(*box));
  rt.remove(box->id());
  expect_no_leftovers();
}

TEST_P(MainCommandTest, ADefaultShellMainCommandKeepsTheBoxUp) {
  Runtime rt;
  BoxOptions o;
  o.image = image("busybox");  // its cmd is `sh`: waits on its (open, unwritten) stdin
  auto box = rt.create(o);
  box->start();
  ::usleep(300000);
  EXPECT_EQ(box->state(), BoxState::Running);
  EXPECT_EQ(box->run(ExecOptions{.argv = {"sh", "-c", "echo ok"}}).stdout_text, "ok\n");
  box->destroy();
  expect_no_leftovers();
}

TEST_P(MainCommandTest, CliRunFollowsTheMainCommandAndLogsKeepItsOutput) {
  auto r = run_cli({"run", "--name", "m", image("busybox"), "sh", "-c", "echo pid=$$; echo e >&2; exit 5"});
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_EQ(r.out, "pid=1\n");
  EXPECT_EQ(r.err, "e\n");
  auto logs = run_cli({"logs", "m"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "pid=1\n");
  EXPECT_EQ(logs.err, "e\n");
  EXPECT_EQ(run_cli({"rm", "m"}).exit_code, 0);

  auto missing = run_cli({"run", "--rm", image("busybox"), "no-such-command"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.err.find("not found"), std::string::npos) << missing.err;
  expect_no_leftovers();
}

// A main command that passes every check but whose exec fails (a script naming a
// missing interpreter, a file that is no program): 127 and 126 with the kernel's
// reason, and nothing left behind. In a jail this is the failure of the box's first
// process, reported once it was handed the command (engine/jail/box_init.cpp).
TEST_P(MainCommandTest, AMainCommandWhoseExecFailsSaysWhy) {
  std::string dir = home_ + "/programs";
  make_dirs(dir);
  write_file_atomic(dir + "/bad.sh", "#!/no/such/interpreter\necho never\n", 0755);
  write_file_atomic(dir + "/garbage",
                    "\x7f"
                    "ELF, but not a program",
                    0755);
  auto interp = run_cli({"run", "--rm", "-v", dir + ":/x", image("busybox"), "/x/bad.sh"});
  EXPECT_EQ(interp.exit_code, 127) << interp.err;
  EXPECT_NE(interp.err.find("exec /x/bad.sh: No such file or directory"), std::string::npos) << interp.err;
  EXPECT_EQ(interp.out, "");
  auto garbage = run_cli({"run", "--rm", "-v", dir + ":/x", image("busybox"), "/x/garbage"});
  EXPECT_EQ(garbage.exit_code, 126) << garbage.err;
  EXPECT_NE(garbage.err.find("exec /x/garbage: Exec format error"), std::string::npos) << garbage.err;
  expect_no_leftovers();
}

TEST_P(MainCommandTest, CliRunDetachedAndExecDetached) {
  auto r = run_cli({"run", "-d", "--name", "bg", image("busybox"), "sh", "-c",
                    "i=0; while true; do echo line$i; i=$((i+1)); sleep 0.1; done"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id = trim(r.out);
  EXPECT_EQ(id.size(), 12u);
  EXPECT_EQ(trim(run_cli({"inspect", "-f", "{{.State.Status}}", "bg"}).out), "running");
  auto d = run_cli({"exec", "-d", "bg", "--", "sh", "-c", "sleep 0.5; echo done > /root/bg-done"});
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, "");
  std::string seen;
  for (int i = 0; i < 50 && seen != "done\n"; ++i) {
    ::usleep(100000);
    seen = run_cli({"exec", "bg", "--", "sh", "-c", "cat /root/bg-done 2>/dev/null || true"}).out;
  }
  EXPECT_EQ(seen, "done\n") << "the detached exec must outlive the CLI that started it";
  auto tail = run_cli({"logs", "-n", "2", "bg"});
  EXPECT_EQ(tail.exit_code, 0);
  EXPECT_EQ(std::count(tail.out.begin(), tail.out.end(), '\n'), 2) << tail.out;
  EXPECT_EQ(tail.out.rfind("line", 0), 0u) << tail.out;
  EXPECT_EQ(run_cli({"rm", "-f", "bg"}).exit_code, 0);
  expect_no_leftovers();
}

// The box's /proc is its own PID namespace's, where the main command is PID 1:
// process tools agree with the shell ($!, kill), and nothing of the engine's
// (the agent, a VM's kernel threads) is listed. An exec sees the same.
TEST_P(MainCommandTest, TheBoxsProcListsOnlyTheBoxsProcesses) {
  Runtime rt;
  const std::string list = "for d in /proc/[0-9]*; do echo \"${d#/proc/} $(cat $d/comm)\"; done";
  auto box = rt.create(opts(
      {"sh", "-c",
       // (pidof finds it once the background child has exec'd sleep: it may not have yet)
       "sleep 30 & s=$!; p=; i=0; while [ -z \"$p\" ] && [ $i -lt 1000 ]; do p=$(pidof sleep); i=$((i+1)); done; echo "
       "\"bang=$s pidof=$p\"; " +
           list +
           "; if kill $p; then echo killed; else echo kill-failed; fi; echo listed; wait; while :; do sleep 1; done"}));
  Execution a = box->attach();
  std::string out;
  while (out.find("listed\n") == std::string::npos) {
    auto c = a.next_output();
    if (!c) break;
    out += c->data;
  }
  auto bang = out.find("bang=");
  ASSERT_NE(bang, std::string::npos) << out;
  std::string line = out.substr(bang, out.find('\n', bang) - bang);
  std::string pid = line.substr(5, line.find(' ') - 5);
  EXPECT_EQ(line, "bang=" + pid + " pidof=" + pid) << "pidof and $! must name the same process";
  EXPECT_NE(out.find("\n1 sh\n"), std::string::npos) << "the main command is PID 1 of the listed processes: " << out;
  EXPECT_NE(out.find("\nkilled\n"), std::string::npos) << "kill $(pidof sleep) must reach it: " << out;
  for (const char* engine_process : {"boxlite-guest", "boxlite-init", "kthreadd", "ksoftirqd"}) {
    EXPECT_EQ(out.find(engine_process), std::string::npos) << engine_process << " is listed in the box: " << out;
  }
  // The PID an exec is reported with is the box's, the one its shell calls $$.
  Execution self = box->exec(ExecOptions{.argv = {"sh", "-c", "echo $$"}});
  std::string self_out;
  while (auto c = self.next_output()) self_out += c->data;
  EXPECT_EQ(std::to_string(self.pid()) + "\n", self_out);
  auto seen = box->run(ExecOptions{.argv = {"sh", "-c", "cat /proc/1/comm; " + list}});
  EXPECT_EQ(seen.stdout_text.rfind("sh\n", 0), 0u) << seen.stdout_text << seen.stderr_text;
  EXPECT_EQ(seen.stdout_text.find("boxlite-guest"), std::string::npos) << seen.stdout_text;
  box->destroy();
  expect_no_leftovers();
}

BOXLITE_ON_BOTH_ENGINES(MainCommandTest);

class RunSignalTest : public BoxliteTest {};

// A script's single SIGTERM always ends `boxlite run`: PID 1 of the box ignores
// it, so after the grace period (10 s, docker stop's) the command is killed.
TEST_F(RunSignalTest, OneSigtermEndsARunWhoseCommandIgnoresIt) {
  SpawnOptions so;
  so.argv = {cli(), "run", "--rm", "--engine", "jail", image("busybox"), "sh", "-c", "echo up; exec sleep 1000"};
  so.stdout_path = so.stderr_path = home_ + "/cli.log";
  Child child = spawn(so);
  std::string log;
  for (int i = 0; i < 300 && log.find("up") == std::string::npos; ++i) {
    ::usleep(50000);
    log = read_file(home_ + "/cli.log");
  }
  ASSERT_NE(log.find("up"), std::string::npos) << "the box never started";
  double sent = now_ms();
  ::kill(child.pid(), SIGTERM);
  auto status = child.wait_for(30000);
  ASSERT_TRUE(status) << "boxlite run outlived a SIGTERM";
  EXPECT_EQ(WEXITSTATUS(*status), 128 + 9);
  EXPECT_GE(now_ms() - sent, 9000) << "the command had its grace period";
  expect_no_leftovers();
}

// A main command that exits at once can take the box down before `run` has
// connected to it: that is a finished run with its exit code, never a CLI killed
// by SIGPIPE writing its handshake to a shim that has gone (1 run in ~80 was).
TEST_F(RunSignalTest, ACommandThatExitsAtOnceNeverKillsTheCli) {
  for (int i = 0; i < 40; ++i) {
    auto r = run_cli({"run", "--rm", "--engine", "jail", image("busybox"), "sh", "-c", "exit 7"});
    ASSERT_EQ(r.exit_code, 7) << "run " << i << ": " << r.err;
  }
  expect_no_leftovers();
}

}  // namespace
}  // namespace boxlite::testing
