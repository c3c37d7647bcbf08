// Boxes that live (issue 4): ids and names, created/running/stopped, persistence
// across stop and start, management from another process, kill -9 recovery.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "support.hpp"

namespace boxlite::testing {
namespace {

class LifecycleTest : public PerEngineTest {
 protected:
  void TearDown() override {
    run_cli({"rm", "-f", "-a"});
    PerEngineTest::TearDown();
  }
  std::string create(const std::string& name) {
    auto r = run_cli({"create", "--name", name, image("busybox")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return trim(r.out);
  }
  std::string status(const std::string& box) { return trim(run_cli({"inspect", "-f", "{{.State.Status}}", box}).out); }
  // The box's shim, by its command line (0 if none).
  pid_t shim_of(const std::string& box) {
    for (pid_t p : processes_mentioning(home_ + "/boxes/" + box)) {
      if (trim(read_file("/proc/" + std::to_string(p) + "/comm")) == "boxlite-shim") return p;
    }
    return 0;
  }
  // A jail box's cgroups are retired (no-op for a VM box).
  void expect_no_cgroups_of(const std::string& box) {
    if (vm()) return;
    for (const char* parent :
         {"/sys/fs/cgroup/memory/boxlite/", "/sys/fs/cgroup/pids/boxlite/", "/sys/fs/cgroup/boxlite/"}) {
      EXPECT_FALSE(path_exists(parent + box)) << parent << box;
    }
  }
  // `boxlite run --rm IMAGE sleep 300` as a child, and the id of its box once it runs
  // ("" if it never does; the CLI's output is in cli.out).
  Child run_rm_in_background(std::string& id) {
    SpawnOptions so;
    so.argv = {cli(), "run", "--rm", image("busybox"), "sleep", "300"};
    so.stdout_path = so.stderr_path = home_ + "/cli.out";
    Child run = spawn(so);
    for (int i = 0; i < 600 && id.empty(); ++i) {
      ::usleep(100000);
      id = trim(run_cli({"list", "-q"}).out);  // running boxes
    }
    return run;
  }
};

TEST_P(LifecycleTest, CreateIsLazyAndStopKeepsTheDisk) {
  std::string id = create("work");
  EXPECT_EQ(id.size(), 12u);
  EXPECT_EQ(status("work"), "configured");
  EXPECT_TRUE(processes_mentioning(home_ + "/boxes/" + id).empty()) << "create must boot nothing";
  EXPECT_EQ(trim(run_cli({"list", "-q"}).out), "") << "list shows running boxes only";
  EXPECT_EQ(trim(run_cli({"list", "-a", "-q"}).out), id);
  EXPECT_EQ(run_cli({"start", "work"}).exit_code, 0);
  EXPECT_EQ(status(id), "running");
  EXPECT_EQ(trim(run_cli({"ps", "-q"}).out), id);
  auto w = run_cli({"exec", "work", "--", "sh", "-c", "echo kept > /root/f; echo gone > /tmp/g"});
  EXPECT_EQ(w.exit_code, 0) << w.err;
  EXPECT_EQ(run_cli({"stop", "work"}).exit_code, 0);
  EXPECT_EQ(status("work"), "stopped");
  EXPECT_TRUE(processes_mentioning(home_ + "/boxes/" + id).empty()) << "stop must end the box's processes";
  auto refused = run_cli({"exec", "work", "--", "true"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("not running"), std::string::npos) << refused.err;
  EXPECT_EQ(run_cli({"restart", "work"}).exit_code, 0);
  auto r = run_cli({"exec", "work", "--", "sh", "-c", "cat /root/f; cat /tmp/g 2>/dev/null || echo tmp-cleared"});
  EXPECT_EQ(r.out, "kept\ntmp-cleared\n") << r.err;
  auto rm = run_cli({"rm", "work"});
  EXPECT_NE(rm.exit_code, 0) << "a running box needs -f";
  EXPECT_NE(rm.err.find("is running"), std::string::npos) << rm.err;
  EXPECT_EQ(run_cli({"rm", "-f", "work"}).exit_code, 0);
  EXPECT_EQ(run_cli({"inspect", "work"}).exit_code, 1) << "no such box";
  expect_no_leftovers();
}

TEST_P(LifecycleTest, AShimKilledWithSigkillLeavesAStoppedBoxThatStartsAgain) {
  std::string id = create("victim");
  ASSERT_EQ(run_cli({"start", id}).exit_code, 0);
  ASSERT_EQ(run_cli({"exec", id, "--", "sh", "-c", "echo survives > /root/f && sync"}).exit_code,
            0);  // synced: a crash keeps what was on disk
  pid_t shim = shim_of(id);
  ASSERT_GT(shim, 0);
  ::kill(shim, SIGKILL);
  for (int i = 0; i < 100 && !processes_mentioning(home_ + "/boxes/" + id).empty(); ++i) ::usleep(50000);
  auto info = nlohmann::json::parse(run_cli({"inspect", id}).out)[0];
  EXPECT_EQ(info["State"]["Status"], "stopped");
  EXPECT_NE(info["State"]["Error"].get<std::string>().find("killed"), std::string::npos) << info.dump();
  // The killed shim could not retire the jail's cgroups: noticing its death did.
  expect_no_cgroups_of(id);
  ASSERT_EQ(run_cli({"start", id}).exit_code, 0);
  EXPECT_EQ(run_cli({"exec", id, "--", "cat", "/root/f"}).out, "survives\n");
}

// A shim stopped with SIGSTOP (or hung) answers nothing: what needs it says so after
// the handshake's 10 s instead of calling the box not running, and `stop` kills it
// (there is no one to ask to stop the box) and records the box stopped, its cgroups
// gone, so that it starts again.
TEST_P(LifecycleTest, AFrozenShimIsKilledByStopAndWhatNeedsItSaysWhy) {
  std::string id = create("frozen");
  ASSERT_EQ(run_cli({"start", id}).exit_code, 0);
  pid_t shim = shim_of(id);
  ASSERT_GT(shim, 0);
  ASSERT_EQ(::kill(shim, SIGSTOP), 0);
  auto exec = run_cli({"exec", id, "true"});
  EXPECT_EQ(exec.exit_code, 125);
  EXPECT_NE(exec.err.find("its shim did not answer within 10 s"), std::string::npos) << exec.err;
  EXPECT_NE(exec.err.find("boxlite stop " + id), std::string::npos) << exec.err;
  auto stop = run_cli({"stop", id});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_FALSE(process_alive(shim));
  EXPECT_EQ(status(id), "stopped");
  EXPECT_TRUE(processes_mentioning(home_ + "/boxes/" + id).empty());
  expect_no_cgroups_of(id);
  ASSERT_EQ(run_cli({"start", id}).exit_code, 0);
  EXPECT_EQ(run_cli({"exec", id, "--", "echo", "again"}).out, "again\n");
}

// The engine itself (QEMU, or the jail's init) killed: its shim records why.
TEST_P(LifecycleTest, AnEngineKilledWithSigkillLeavesAStoppedBoxThatStartsAgain) {
  std::string id = create("engine-victim");
  ASSERT_EQ(run_cli({"start", id}).exit_code, 0);
  ASSERT_EQ(run_cli({"exec", id, "--", "sh", "-c", "echo survives > /root/f && sync"}).exit_code, 0);
  bool killed = false;
  if (vm()) {
    for (pid_t p : processes_mentioning(home_ + "/boxes/" + id)) {
      if (trim(read_file("/proc/" + std::to_string(p) + "/comm")).rfind("qemu", 0) == 0)
        killed = ::kill(p, SIGKILL) == 0;
    }
  } else {
    // The jail's init is the shim's child named boxlite-guest.
    std::string shim_pid = nlohmann::json::parse(run_cli({"inspect", id}).out)[0]["State"]["Pid"].dump();
    for (const auto& child : split(trim(read_file("/proc/" + shim_pid + "/task/" + shim_pid + "/children")), ' ')) {
      if (!child.empty() && trim(read_file("/proc/" + child + "/comm")) == "boxlite-guest") {
        killed = ::kill(std::stoi(child), SIGKILL) == 0;
      }
    }
  }
  ASSERT_TRUE(killed);
  for (int i = 0; i < 100 && status(id) != "stopped"; ++i) ::usleep(50000);
  auto info = nlohmann::json::parse(run_cli({"inspect", id}).out)[0];
  EXPECT_EQ(info["State"]["Status"], "stopped");
  EXPECT_NE(info["State"]["Error"].get<std::string>().find("exited unexpectedly (killed by signal"), std::string::npos)
      << info.dump();
  EXPECT_TRUE(processes_mentioning(home_ + "/boxes/" + id).empty());
  ASSERT_EQ(run_cli({"start", id}).exit_code, 0);
  EXPECT_EQ(run_cli({"exec", id, "--", "cat", "/root/f"}).out, "survives\n");
}

TEST_P(LifecycleTest, AnotherProcessReachesTheBoxThroughItsShim) {
  std::string id = create("shared");
  ASSERT_EQ(run_cli({"start", "shared"}).exit_code, 0);
  // This process never created it: it finds it by name and execs through the shim.
  Runtime rt;
  auto box = rt.get("shared");
  ASSERT_TRUE(box);
  EXPECT_EQ(box->id(), id);
  EXPECT_EQ(box->run(ExecOptions{{"echo", "from-api"}}).stdout_text, "from-api\n");
  EXPECT_EQ(rt.get_info(id.substr(0, 5)).name, "shared") << "a unique id prefix finds it";
  EXPECT_FALSE(rt.get("nosuch"));
  try {
    rt.get_info("nosuch");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
  }
  auto missing = run_cli({"exec", "nosuch", "--", "true"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("No such box: nosuch"), std::string::npos) << missing.err;
  box.reset();  // dropping a handle of another process's box leaves it running
  EXPECT_EQ(status("shared"), "running");
}

TEST_P(LifecycleTest, NamesAreUniqueAndValidated) {
  create("one");
  auto dup = run_cli({"create", "--name", "one", image("busybox")});
  EXPECT_EQ(dup.exit_code, 125);
  EXPECT_NE(dup.err.find("'one' is already in use"), std::string::npos) << dup.err;
  auto bad = run_cli({"create", "--name", "../evil", image("busybox")});
  EXPECT_EQ(bad.exit_code, 125);
  EXPECT_NE(bad.err.find("invalid box name"), std::string::npos) << bad.err;
  EXPECT_EQ(trim(run_cli({"list", "-a", "-q"}).out).size(), 12u) << "failed creates leave nothing";
}

TEST_P(LifecycleTest, ListFormatsInspectTemplatesAndRmAll) {
  std::string a = create("alpha");
  std::string b = create("beta");
  auto json = nlohmann::json::parse(run_cli({"list", "-a", "--format", "json"}).out);
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0]["Id"], b) << "newest first";
  auto yaml = run_cli({"ls", "-a", "--format", "yaml"});
  EXPECT_NE(yaml.out.find("Name: \"alpha\""), std::string::npos) << yaml.out;
  auto table = run_cli({"ps", "-a"});
  EXPECT_EQ(table.out.rfind("ID ", 0), 0u) << table.out;
  EXPECT_EQ(trim(run_cli({"inspect", "-f", "{{.Name}}/{{.State.Status}}", "alpha"}).out), "alpha/configured");
  EXPECT_EQ(nlohmann::json::parse(run_cli({"inspect", "--latest"}).out)[0]["Id"], b);
  EXPECT_EQ(run_cli({"inspect", "--latest", "alpha"}).exit_code, 125) << "--latest conflicts with BOX";
  EXPECT_EQ(run_cli({"start"}).exit_code, 125) << "start needs a BOX";
  // rm -a asks first; "n" (here: no input) aborts.
  auto no = run_cli({"rm", "-a"});
  EXPECT_NE(no.err.find("[y/N]"), std::string::npos) << no.err;
  EXPECT_EQ(trim(run_cli({"list", "-a", "-q"}).out).size(), 25u);
  EXPECT_EQ(run_cli({"rm", "-a", "-f"}).exit_code, 0);
  EXPECT_EQ(trim(run_cli({"list", "-a", "-q"}).out), "");
}

TEST_P(LifecycleTest, RunKeepsTheBoxUnlessRm) {
  EXPECT_EQ(run_cli({"run", "--rm", image("busybox"), "true"}).exit_code, 0);
  EXPECT_EQ(trim(run_cli({"list", "-a", "-q"}).out), "") << "--rm leaves nothing";
  EXPECT_EQ(run_cli({"run", "--name", "kept", image("busybox"), "sh", "-c", "echo x > /root/y"}).exit_code, 0);
  EXPECT_EQ(status("kept"), "stopped");
}

// Nobody is left to remove a --rm box whose CLI is killed: its shim stops it (the
// lifeline) and removes it, and the runtime forgets its row.
TEST_P(LifecycleTest, ARunRmWhoseCliIsKilledLeavesNothing) {
  std::string id;
  Child run = run_rm_in_background(id);
  ASSERT_FALSE(id.empty()) << "the box never ran: " << read_file(home_ + "/cli.out");
  run.kill_now();  // SIGKILL, reaped
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    ::usleep(100000);
    gone = dir_entries(home_ + "/boxes").empty() && processes_mentioning(home_).empty();
  }
  EXPECT_TRUE(gone) << "box " << id << " still has a directory or a process";
  EXPECT_EQ(trim(run_cli({"list", "-a", "-q"}).out), "") << "its row outlived it";
  EXPECT_NE(run_cli({"inspect", id}).exit_code, 0);
  expect_no_leftovers();
}

// ... unless, as destroy refuses too, a clone stands on it (a vm clone's disk is
// backed by a frozen one in the source box): then it stays, stopped, and the clone
// works. A jail clone is independent: its source goes.
TEST_P(LifecycleTest, AnAbandonedRunRmBoxOutlivesNoCloneOfIt) {
  std::string id;
  Child run = run_rm_in_background(id);
  ASSERT_FALSE(id.empty()) << "the box never ran: " << read_file(home_ + "/cli.out");
  auto clone = run_cli({"clone", id, "--name", "c1"});
  ASSERT_EQ(clone.exit_code, 0) << clone.err;
  run.kill_now();
  // The shim has decided once it is gone.
  for (int i = 0; i < 300 && !processes_mentioning(home_ + "/boxes/" + id).empty(); ++i) ::usleep(100000);
  EXPECT_EQ(path_exists(home_ + "/boxes/" + id), vm()) << "the source of a clone";
  // It boots (its disk's backing file is there). The clone is auto_remove like its
  // source, so the CLI's handle removes it again as the CLI exits.
  auto start = run_cli({"start", "c1"});
  EXPECT_EQ(start.exit_code, 0) << start.err;
  run_cli({"rm", "-f", "-a"});
  expect_no_leftovers();
}

TEST_P(LifecycleTest, DetachWithAutoRemoveIsTheDocumentedError) {
  Runtime rt;
  BoxOptions o;
  o.rootfs_path = image("busybox");
  o.detach = true;  // auto_remove defaults to true
  try {
    rt.create(o);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("remove-on-stop is incompatible with detach=true"), std::string::npos);
  }
  // detach + auto_remove=false outlives its handle.
  o.auto_remove = false;
  std::string id;
  {
    auto box = rt.create(o, "daemon");
    box->start();
    id = box->id();
  }
  EXPECT_EQ(status("daemon"), "running");
  EXPECT_EQ(run_cli({"exec", "daemon", "--", "echo", "still-here"}).out, "still-here\n");
}

// The documented "Old handle after stop()": the handle that stopped the box refuses
// exec/attach/copies with Stopped; snapshots still work on it; a fresh handle from
// get() restarts the box; start() on the old handle makes it valid again.
TEST_P(LifecycleTest, StopInvalidatesTheHandleUntilStartAndGetGivesAFreshOne) {
  const std::string kInvalidated = "Handle invalidated after stop(). Use runtime.get() to get a new handle.";
  Runtime rt;
  BoxOptions o;
  o.rootfs_path = image("busybox");
  o.auto_remove = false;
  auto box = rt.create(o, "handle");
  ASSERT_EQ(box->run(ExecOptions{{"sh", "-c", "echo kept > /root/f"}}).exit_code, 0);
  box->stop();
  auto expect_invalidated = [&](const char* what, const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << what << " on a stopped handle must fail";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Stopped) << what;
      EXPECT_EQ(std::string(e.what()), kInvalidated) << what;
    }
  };
  std::string host_file = home_ + "/in.txt";
  write_file_atomic(host_file, "x");
  expect_invalidated("exec", [&] { box->exec(ExecOptions{{"true"}}); });
  expect_invalidated("run", [&] { box->run(ExecOptions{{"true"}}); });
  expect_invalidated("attach", [&] { box->attach(); });
  expect_invalidated("copy_in", [&] { box->copy_in(host_file, "/root/in.txt"); });
  expect_invalidated("copy_out", [&] { box->copy_out("/root/f", home_ + "/out.txt"); });
  EXPECT_EQ(box->state(), BoxState::Stopped) << "the refused exec must not have restarted the box";
  // The documented restore sequence: stop(); snapshot.restore(); runtime.get().
  box->snapshot().create("s1");
  box->snapshot().restore("s1");
  EXPECT_EQ(box->snapshot().list().size(), 1u);

  auto fresh = rt.get(box->id());
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->run(ExecOptions{{"cat", "/root/f"}}).stdout_text, "kept\n");
  EXPECT_EQ(rt.get_info(box->id()).status, BoxState::Running);
  expect_invalidated("exec while another handle runs the box", [&] { box->exec(ExecOptions{{"true"}}); });
  fresh->stop();

  box->start();  // re-validates: stop(); start() keeps working on one handle
  EXPECT_EQ(box->run(ExecOptions{{"cat", "/root/f"}}).stdout_text, "kept\n");
  box->stop();
  rt.remove(box->id());
}

// A handle whose box another process removed (an `rm`, a `run --rm` finishing while
// this process came to it) is told the box is gone, as the reference does
// ("No such box: ..."), not that its directory could not be opened.
TEST_P(LifecycleTest, AHandleOfABoxRemovedByAnotherProcessSaysNoSuchBox) {
  const std::string id = create("removed-elsewhere");
  Runtime rt;
  auto box = rt.get(id);
  ASSERT_TRUE(box);
  ASSERT_EQ(run_cli({"rm", id}).exit_code, 0);
  auto expect_no_such_box = [&](const char* what, const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << what << " of a removed box must fail";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::NotFound) << what << ": " << e.what();
      EXPECT_EQ(std::string(e.what()), "No such box: " + id) << what;
    }
  };
  expect_no_such_box("start", [&] { box->start(); });
  expect_no_such_box("stop", [&] { box->stop(); });
  expect_no_such_box("remove", [&] { rt.remove(id, /*force=*/true); });
  EXPECT_FALSE(std::filesystem::exists(home_ + "/boxes/" + id)) << "nothing of it was made again";
}

// The ids of the boxes of this home whose shim is alive (its command line names
// the box's directory).
std::set<std::string> boxes_with_a_live_shim(const std::string& home) {
  std::set<std::string> ids;
  std::string boxes = home + "/boxes/";
  for (pid_t p : processes_mentioning(boxes)) {
    std::string cmdline;
    try {
      cmdline = read_file("/proc/" + std::to_string(p) + "/cmdline");
    } catch (const Error&) {
      continue;  // gone meanwhile
    }
    if (cmdline.find("boxlite-shim") == std::string::npos) continue;
    size_t at = cmdline.find(boxes) + boxes.size();
    ids.insert(cmdline.substr(at, cmdline.find_first_of(std::string("/ \0", 3), at) - at));
  }
  return ids;
}

// A detached box's start ends once its row says running with the shim's pid. A CLI
// killed before that leaves a shim nothing records: it must stop by itself (the
// start's commit never came), or `exec` would refuse the box, `stop` would not
// reach it and a second `start` would boot a second shim on the same layers. Killed
// at random points of its first milliseconds, every shim left is a running box's.
// (Jail only: the start's end comes ~10 ms in, a VM's seconds in; the protocol is
// the shim's and the core's, engine-independent.)
TEST_P(LifecycleTest, ADetachedStartWhoseCliIsKilledLeavesNoShimUnrecorded) {
  if (vm()) GTEST_SKIP() << "engine-independent; a jail's start ends within the kill window";
  // The image's layers unpacked first (~250 ms, then none): else every kill lands there.
  ASSERT_EQ(run_cli({"run", "--rm", image("busybox"), "true"}).exit_code, 0);
  for (int i = 0; i < 24; ++i) {
    SpawnOptions so;
    so.argv = {cli(), "run", "-d", image("busybox"), "sleep", "60"};
    so.stdout_path = so.stderr_path = "/dev/null";
    Child c = spawn(so);
    ::usleep(2000 + 500 * (i % 16));  // 2 to 9.5 ms: spawn, store, shim, boot, record
    c.kill_now();
  }
  // A shim whose start was called off stops its box (up to its 2 s deadline).
  std::set<std::string> unrecorded;
  for (int i = 0; i < 100; ++i) {
    unrecorded.clear();
    for (const auto& id : boxes_with_a_live_shim(home_)) {
      if (status(id) != "running") unrecorded.insert(id);
    }
    if (unrecorded.empty()) break;
    ::usleep(100000);
  }
  EXPECT_TRUE(unrecorded.empty()) << unrecorded.size() << " shims live with no record of their box running, e.g. "
                                  << *unrecorded.begin();
  // What was recorded starts once, and goes whole.
  auto ids = split(trim(run_cli({"list", "-a", "-q"}).out), '\n');
  for (const auto& id : ids) {
    if (id.empty() || status(id) == "running") continue;
    auto start = run_cli({"start", id});
    EXPECT_EQ(start.exit_code, 0) << start.err;
    EXPECT_EQ(boxes_with_a_live_shim(home_).count(id), 1u);
    break;
  }
  EXPECT_EQ(run_cli({"rm", "-f", "-a"}).exit_code, 0);
  for (int i = 0; i < 100 && !processes_mentioning(home_).empty(); ++i) ::usleep(50000);
  EXPECT_TRUE(processes_mentioning(home_).empty()) << "processes of " << home_ << " still running";
  EXPECT_EQ(read_file("/proc/self/mountinfo").find(home_), std::string::npos) << "a mount of a box remains";
}

// `start` and `rm -f` of one box at once: whichever wins, nothing of the box is
// left running (rm -f with a handle read before the start stops what it started).
TEST_P(LifecycleTest, StartRacingForcedRemovalLeavesNothingRunning) {
  if (vm()) GTEST_SKIP() << "engine-independent (the box's lock and its shim); checked with the jail";
  for (int i = 0; i < 8; ++i) {
    std::string name = "race" + std::to_string(i);
    create(name);
    SpawnOptions start, rm;
    start.argv = {cli(), "start", name};
    rm.argv = {cli(), "rm", "-f", name};
    start.stdout_path = start.stderr_path = rm.stdout_path = rm.stderr_path = "/dev/null";
    Child a = spawn(start);
    Child b = spawn(rm);
    a.wait();
    EXPECT_EQ(b.wait(), 0) << name;
    EXPECT_TRUE(boxes_with_a_live_shim(home_).empty()) << name << ": a shim outlived the box's removal";
    EXPECT_EQ(trim(run_cli({"list", "-a", "-q"}).out), "") << name;
  }
  expect_no_leftovers();
}

// Started from the CLI, a box outlives the CLI, even one a foreground `run` made
// (kept stopped, and not detached): docs/cli.md. So does a restart.
TEST_P(LifecycleTest, AStartFromTheCliOutlivesItEvenForABoxAForegroundRunMade) {
  if (vm()) GTEST_SKIP() << "engine-independent (the box's record); checked with the jail";
  auto run = run_cli({"run", "--name", "fg", image("busybox"), "sh", "-c",
                      "if [ -f /marker ]; then exec sleep 300; fi; touch /marker"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(status("fg"), "stopped");
  for (const char* verb : {"start", "restart"}) {
    auto r = run_cli({verb, "fg"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    ::usleep(300000);
    EXPECT_EQ(status("fg"), "running") << "after " << verb;
    EXPECT_EQ(run_cli({"exec", "fg", "--", "echo", "alive"}).out, "alive\n") << "after " << verb;
  }
}

// An ID prefix several boxes share names none of them: every command says so,
// `rm` and `cp` as much as `inspect` (docs/cli.md).
TEST_P(LifecycleTest, AnAmbiguousIdPrefixIsSaidSoByRmAndCp) {
  if (vm()) GTEST_SKIP() << "engine-independent (the store's lookup); checked with the jail";
  std::map<char, int> by_first;
  char shared = 0;
  for (int i = 0; i < 40 && !shared; ++i) {  // 36 letters and digits: two share one by then
    std::string id = create("amb" + std::to_string(i));
    if (!id.empty() && ++by_first[id[0]] == 2) shared = id[0];
  }
  ASSERT_NE(shared, 0);
  std::string prefix(1, shared);
  for (std::vector<std::string> args : {std::vector<std::string>{"rm", prefix},
                                        {"rm", "-f", prefix},
                                        {"cp", prefix + ":/etc/hostname", home_ + "/x"},
                                        {"inspect", prefix}}) {
    auto r = run_cli(args);
    EXPECT_NE(r.exit_code, 0) << args[0];
    EXPECT_NE(r.err.find("ambiguous"), std::string::npos) << args[0] << ": " << r.err;
  }
  EXPECT_EQ(by_first[shared], 2);
}

// A box directory whose shim runs is never swept as half-made, whatever the store
// says (a database truncated under it): the runtime says so, and once the shim is
// gone records the box again from the copy of its row in its directory (a kept box:
// `run -d` keeps it).
TEST_P(LifecycleTest, ABoxWithARunningShimIsNeverSweptWhateverTheStoreSays) {
  if (vm()) GTEST_SKIP() << "engine-independent (the runtime's sweep); checked with the jail";
  auto d = run_cli({"run", "-d", image("busybox"), "sleep", "300"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = trim(d.out);
  std::string dir = home_ + "/boxes/" + id;
  ASSERT_EQ(::truncate((home_ + "/db/boxlite.db").c_str(), 0), 0);
  auto age = [&] {
    timespec old[2] = {{::time(nullptr) - 120, 0}, {::time(nullptr) - 120, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, dir.c_str(), old, 0), 0);
  };
  age();
  auto ls = run_cli({"list", "-a", "-q"});
  EXPECT_EQ(trim(ls.out), "");
  EXPECT_NE(ls.err.find("has a running shim"), std::string::npos) << ls.err;
  EXPECT_TRUE(path_exists(dir + "/shim.json")) << "a running box's directory was swept";
  EXPECT_EQ(boxes_with_a_live_shim(home_).count(id), 1u);
  for (pid_t p : processes_mentioning(dir)) ::kill(p, SIGTERM);
  for (int i = 0; i < 100 && !processes_mentioning(dir).empty(); ++i) ::usleep(50000);
  age();
  ls = run_cli({"list", "-a", "-q"});
  EXPECT_EQ(trim(ls.out), id) << ls.err;
  EXPECT_NE(ls.err.find("recorded again, stopped"), std::string::npos) << ls.err;
  auto rm = run_cli({"rm", id});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_FALSE(path_exists(dir)) << "a removed box's directory stays";
  expect_no_leftovers();
}

// A kept box whose row was lost with the database (deleted here) is recorded again
// from the copy of its row in its directory, stopped and under its name, once the
// directory is a minute old (a create's debris is told apart by that age), and works
// as before. One whose name another box took meanwhile comes back unnamed. A
// directory without the copy (a create that died before its row) is still swept.
TEST_P(LifecycleTest, AKeptBoxWhoseRowWasLostIsRecordedAgainNotSwept) {
  if (vm()) GTEST_SKIP() << "engine-independent (the runtime's sweep); checked with the jail";
  auto made = run_cli({"create", "--name", "keep", image("busybox"), "echo", "hi"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::string id = trim(made.out), dir = home_ + "/boxes/" + id;
  auto other = run_cli({"create", "--name", "other", image("busybox")});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  std::string other_id = trim(other.out), other_dir = home_ + "/boxes/" + other_id;
  // A create that died before its row: a directory with a spec and nothing else.
  std::string debris = home_ + "/boxes/0debris0000a";
  make_dirs(debris);
  write_file_atomic(debris + "/shim.json", read_file(dir + "/shim.json"), 0600, /*durable=*/false);
  remove_tree(home_ + "/db");
  // The name "other" is taken by a new box before the lost one is seen again.
  auto taker = run_cli({"create", "--name", "other", image("busybox")});
  ASSERT_EQ(taker.exit_code, 0) << taker.err;
  std::string taker_id = trim(taker.out);
  for (const std::string& d : {dir, other_dir, debris}) {
    timespec old[2] = {{::time(nullptr) - 120, 0}, {::time(nullptr) - 120, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, d.c_str(), old, 0), 0) << d;
  }
  auto ls = run_cli({"list", "-a", "--format", "json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.err.find("box " + id + " (keep) was missing from the store"), std::string::npos) << ls.err;
  EXPECT_NE(ls.err.find("box " + other_id + " (other): its name now belongs to another box"), std::string::npos)
      << ls.err;
  auto boxes = nlohmann::json::parse(ls.out);
  std::map<std::string, std::pair<std::string, std::string>> by_id;  // id -> (name, state)
  for (const auto& b : boxes) by_id[b.at("Id")] = {b.value("Name", ""), b.at("State").at("Status")};
  EXPECT_EQ(by_id.size(), 3u) << ls.out;
  EXPECT_EQ(by_id[id], std::make_pair(std::string("keep"), std::string("stopped"))) << ls.out;
  EXPECT_EQ(by_id[other_id].first, "") << ls.out;
  EXPECT_EQ(by_id[taker_id].first, "other") << ls.out;
  EXPECT_FALSE(path_exists(debris)) << "a create's debris was not swept";
  // The box recorded again is the box it was.
  auto started = run_cli({"start", "keep"});
  EXPECT_EQ(started.exit_code, 0) << started.err;
  for (const std::string& b : {std::string("keep"), other_id, taker_id}) {
    auto rm = run_cli({"rm", "-f", b});
    EXPECT_EQ(rm.exit_code, 0) << b << ": " << rm.err;
  }
  expect_no_leftovers();
}

BOXLITE_ON_BOTH_ENGINES(LifecycleTest);

class LifecycleConcurrencyTest : public BoxliteTest {};

// 20 boxes created, started, stopped and removed in parallel from 4 threads of this
// process and a second process; the store ends consistent, nothing lost or doubled.
TEST_F(LifecycleConcurrencyTest, TwentyBoxesFromFourThreadsAndTwoProcesses) {
  ::setenv("BOXLITE_ENGINE", "jail", 1);
  // The second process: a shell loop over the real CLI.
  std::string script;
  for (int i = 0; i < 4; ++i) {
    std::string n = "cli-" + std::to_string(i);
    script += cli() + " create --name " + n + " " + image("busybox") + " >/dev/null && " + cli() + " start " + n +
              " >/dev/null && " + cli() + " exec " + n + " -- true && " + cli() + " stop " + n + " >/dev/null && " +
              cli() + " rm " + n + " >/dev/null || echo FAIL " + n + "; ";
  }
  script += cli() + " create --name cli-kept " + image("busybox") + " >/dev/null || echo FAIL kept";
  SpawnOptions so;
  so.argv = {"sh", "-c", script};
  so.stdout_path = home_ + "/second-process.log";
  Child second = spawn(so);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        Runtime rt;
        for (int i = 0; i < 4; ++i) {
          BoxOptions o;
          o.rootfs_path = image("busybox");
          o.auto_remove = false;
          std::string name = "t" + std::to_string(t) + "-" + std::to_string(i);
          auto box = rt.create(o, name);
          box->start();
          if (box->run(ExecOptions{{"echo", name}}).stdout_text != name + "\n") ++failures;
          box->stop();
          if (i < 3) rt.remove(name);  // the last of each thread stays
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  int status = second.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(read_file(home_ + "/second-process.log"), "") << "the second process failed";
  EXPECT_EQ(failures.load(), 0);
  Runtime rt;
  auto boxes = rt.list_info();
  std::set<std::string> names;
  for (const auto& b : boxes) {
    names.insert(b.name);
    EXPECT_EQ(b.status, b.name == "cli-kept" ? BoxState::Configured : BoxState::Stopped) << b.name;
    EXPECT_TRUE(path_exists(home_ + "/boxes/" + b.id + "/shim.json")) << b.name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"t0-3", "t1-3", "t2-3", "t3-3", "cli-kept"}));
  EXPECT_EQ(boxes.size(), 5u);
  EXPECT_EQ(dir_entries(home_ + "/boxes").size(), 5u) << "box directories and records disagree";
  for (const auto& b : boxes) rt.remove(b.id, true);
}

TEST_F(LifecycleConcurrencyTest, HomeFlagWorksBeforeAndAfterTheSubcommand) {
  std::string other = home_ + "/other-home";
  auto before = run_cli({"--home", other, "create", "--engine", "jail", image("busybox")});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  auto after = run_cli({"list", "-a", "-q", "--home", other});
  EXPECT_EQ(trim(after.out), trim(before.out)) << after.err;
  EXPECT_EQ(trim(run_cli({"list", "-a", "-q"}).out), "") << "the default home is another one";
  run_cli({"--home", other, "rm", "-f", "-a"});
}

class CrashSafetyTest : public BoxliteTest {};

// What a create killed with SIGKILL between its steps leaves: a box directory with
// no record. The next runtime removes it once it is clearly not in progress.
TEST_F(CrashSafetyTest, ACreateKilledHalfwayLeavesNothingBroken) {
  auto r = run_cli({"create", "--engine", "jail", "--name", "whole", image("busybox")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string old_debris = home_ + "/boxes/halfmade0001";
  std::string fresh = home_ + "/boxes/inprogress01";
  ASSERT_TRUE(run_capture({"mkdir", "-p", old_debris, fresh}).ok());
  write_file_atomic(old_debris + "/shim.json", "{");
  ASSERT_TRUE(run_capture({"touch", "-d", "10 minutes ago", old_debris}).ok());
  auto list = run_cli({"list", "-a", "--format", "json"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_FALSE(path_exists(old_debris)) << "debris of a killed create must go";
  EXPECT_TRUE(path_exists(fresh)) << "a create in progress in another process must be left alone";
  EXPECT_EQ(nlohmann::json::parse(list.out).size(), 1u);
  EXPECT_EQ(run_cli({"start", "whole"}).exit_code, 0) << "the complete box is unaffected";
  run_cli({"rm", "-f", "whole"});
  remove_tree(fresh);
}

// Killing the creating process while create runs (here: during the first image
// preparation) leaves a home that works: no record or a complete one.
TEST_F(CrashSafetyTest, SigkillDuringCreateLeavesAUsableHome) {
  for (int delay_ms : {5, 20, 60}) {
    SpawnOptions so;
    so.argv = {cli(), "create", "--engine", "jail", image("debian-python")};
    so.stdout_path = so.stderr_path = home_ + "/create.log";
    Child c = spawn(so);
    ::usleep(static_cast<useconds_t>(delay_ms) * 1000);
    c.kill_now();
    auto list = run_cli({"list", "-a", "--format", "json"});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    for (const auto& b : nlohmann::json::parse(list.out)) {
      EXPECT_EQ(run_cli({"rm", "-f", b["Id"].get<std::string>()}).exit_code, 0);
    }
  }
  auto r = run_cli({"run", "--rm", "--engine", "jail", image("debian-python"), "python3", "-c", "print(6*7)"});
  EXPECT_EQ(r.out, "42\n") << r.err;
}

// A `run --rm` killed at any point leaves no row and no process: the shim is handed
// the box before its row is written (Runtime::create_to_start), so from then on the
// shim, seeing its lifeline close, removes the box, and the runtime forgets a row
// whose directory went. Killed before the hand-off, the CLI leaves only a box
// directory with at most its spec, which the next runtime removes once it is a minute
// old (ACreateKilledHalfwayLeavesNothingBroken).
TEST_F(CrashSafetyTest, ARunRmKilledAtAnyPointLeavesNoRowOrProcess) {
  // 200 runs killed 1 to 5 ms after their start, where a run creates and starts its
  // box: a build that wrote the row before handing the shim its box left a created
  // row in ~3% of them. The image is unpacked first, or every run dies unpacking it.
  auto warm = run_cli({"run", "--rm", "--engine", "jail", image("busybox"), "true"});
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  for (int i = 0; i < 200; ++i) {
    SpawnOptions so;
    so.argv = {cli(), "run", "--rm", "--engine", "jail", image("busybox"), "sleep", "30"};
    so.stdout_path = so.stderr_path = "/dev/null";
    Child run = spawn(so);
    ::usleep(static_cast<useconds_t>(1000 + 20 * i));
    run.kill_now();
  }
  bool clean = false;
  for (int i = 0; i < 100 && !clean; ++i) {
    clean = processes_mentioning(home_).empty() && trim(run_cli({"list", "-a", "-q"}).out).empty();
    if (!clean) ::usleep(100000);
  }
  EXPECT_TRUE(clean) << "a process or a row is left: " << run_cli({"list", "-a"}).out;
  // Killed before the hand-off: a directory with at most the box's disk and spec
  // (and, taken from the spares, their empty layers), no row.
  for (const auto& d : dir_entries(home_ + "/boxes")) {
    for (const auto& e : dir_entries(home_ + "/boxes/" + d)) {
      if (e == "upper" || e == "work") {
        EXPECT_TRUE(dir_entries(home_ + "/boxes/" + d + "/" + e).empty()) << d << "/" << e << " is not empty";
        continue;
      }
      EXPECT_TRUE(e.rfind("shim.json", 0) == 0 || e.rfind(engine::jail::kDiskImageName, 0) == 0)
          << d << " holds " << e << ": more than a half-made box";
    }
    remove_tree(home_ + "/boxes/" + d);  // the sweep would, a minute on
  }
  expect_no_leftovers();
}

class ShutdownTest : public BoxliteTest {};

TEST_F(ShutdownTest, ShutdownStopsEveryBoxAndRefusesNewOnes) {
  Runtime rt;
  std::vector<std::shared_ptr<Box>> boxes;
  for (int i = 0; i < 3; ++i) {
    BoxOptions o;
    o.rootfs_path = image("busybox");
    o.engine = EngineKind::Jail;
    o.auto_remove = false;
    boxes.push_back(rt.create(o, "s" + std::to_string(i)));
    boxes.back()->start();
  }
  rt.shutdown(5);
  for (const auto& b : boxes) {
    EXPECT_EQ(b->state(), BoxState::Stopped) << b->id();
    EXPECT_EQ(rt.get_info(b->id()).status, BoxState::Stopped);
    EXPECT_TRUE(processes_mentioning(local(*b).dir()).empty());
  }
  try {
    BoxOptions o;
    o.rootfs_path = image("busybox");
    rt.create(o);
    ADD_FAILURE() << "create after shutdown must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Stopped);
    EXPECT_STREQ(e.what(), "Cannot create box: runtime has been shut down");
  }
  EXPECT_THROW(rt.shutdown(-2), Error);
  for (const auto& b : boxes) rt.remove(b->id(), true);
}

class GetOrCreateTest : public BoxliteTest {
 protected:
  // A busybox jail box kept until removed.
  BoxOptions kept_busybox() {
    BoxOptions o;
    o.rootfs_path = image("busybox");
    o.engine = EngineKind::Jail;
    o.auto_remove = false;
    return o;
  }
};

TEST_F(GetOrCreateTest, CreatesOnceThenFindsTheSameBox) {
  Runtime rt;
  BoxOptions o = kept_busybox();
  auto [first, created] = rt.get_or_create(o, "session-1");
  EXPECT_TRUE(created);
  ASSERT_EQ(first->run(ExecOptions{{"sh", "-c", "echo state > /root/s"}}).exit_code, 0);
  auto [again, created_again] = rt.get_or_create(o, "session-1");
  EXPECT_FALSE(created_again);
  EXPECT_EQ(again->id(), first->id());
  EXPECT_EQ(again->run(ExecOptions{{"cat", "/root/s"}}).stdout_text, "state\n");
  EXPECT_THROW(rt.get_or_create(o, ""), Error);
  first.reset();
  again.reset();
  rt.remove("session-1", true);
}

// A name is a name: get_or_create never takes another box whose ID starts with it,
// and an ID prefix of several boxes is no box to get (nullptr, not an error).
TEST_F(GetOrCreateTest, ANameIsNeverAnotherBoxsIdPrefix) {
  Runtime rt;
  BoxOptions o = kept_busybox();
  std::map<char, std::string> by_first;
  std::string shared;
  for (int i = 0; i < 40 && shared.empty(); ++i) {
    std::string id = rt.create(o)->id();
    if (auto [it, fresh] = by_first.emplace(id[0], id); !fresh) shared = id.substr(0, 1);
  }
  ASSERT_FALSE(shared.empty());
  EXPECT_EQ(rt.get(shared), nullptr) << "ambiguous";
  std::string other = by_first.begin()->second;
  auto [box, created] = rt.get_or_create(o, other.substr(0, 5));
  EXPECT_TRUE(created) << "a new box named " << other.substr(0, 5) << ", not " << other;
  EXPECT_NE(box->id(), other);
  auto [same, again] = rt.get_or_create(o, shared);
  EXPECT_TRUE(again) << "an ambiguous prefix as a name is a new box";
  box.reset();
  same.reset();
  for (const auto& i : rt.list_info()) rt.remove(i.id, true);
}

class LockTest : public BoxliteTest {};

// The default runtime holds the home: a second one, in another process, is refused
// with the documented message; the lock goes with its holder, even a killed one.
TEST_F(LockTest, ASecondExclusiveRuntimeOnTheHomeIsRefused) {
  auto holder = std::make_unique<Runtime>(RuntimeOptions{.home_dir = home_, .exclusive = true});
  auto try_in_child = [this] {
    pid_t pid = ::fork();
    if (pid == 0) {
      try {
        Runtime second(RuntimeOptions{.home_dir = home_, .exclusive = true});
        ::_exit(0);
      } catch (const Error& e) {
        bool documented = e.kind() == ErrorKind::InvalidState &&
                          std::string(e.what()).find("Another BoxliteRuntime is already using directory " + home_) == 0;
        ::_exit(documented ? 3 : 4);
      }
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WEXITSTATUS(status);
  };
  EXPECT_EQ(try_in_child(), 3);
  // Runtimes without the lock (what cross-process use needs) still work beside it.
  EXPECT_NO_THROW(Runtime(RuntimeOptions{.home_dir = home_}).list_info());
  holder.reset();
  EXPECT_EQ(try_in_child(), 0) << "the lock is released with its runtime";
}

// A store that cannot be used fails the runtime's constructor, or, opened in the
// background (the CLI's `run`), every use of it, with the store's own error; a
// `run` that meets it runs nothing and leaves no box directory and no process.
class StoreOpenTest : public BoxliteTest {};

TEST_F(StoreOpenTest, AnUnusableStoreFailsTheConstructorOrEveryUseWhenOpenedInTheBackground) {
  ASSERT_TRUE(run_capture({"mkdir", "-p", home_ + "/db"}).ok());
  write_file_atomic(home_ + "/db/boxlite.db", std::string(8192, 'x'), 0600, /*durable=*/false);
  auto is_database_error = [](const Error& e) {
    return e.kind() == ErrorKind::Database && std::string(e.what()).find("not a database") != std::string::npos;
  };
  try {
    Runtime rt(RuntimeOptions{.home_dir = home_});
    ADD_FAILURE() << "a runtime opened an unusable store";
  } catch (const Error& e) {
    EXPECT_TRUE(is_database_error(e)) << e.what();
  }
  {
    Runtime rt(RuntimeOptions{.home_dir = home_, .open_store_in_background = true});
    for (int i = 0; i < 2; ++i) {
      try {
        rt.list_info();
        ADD_FAILURE() << "the store's use " << i << " succeeded";
      } catch (const Error& e) {
        EXPECT_TRUE(is_database_error(e)) << e.what();
      }
    }
  }
  // The shim is handed the box before the store is read (create_to_start), but its
  // main command runs only once the box is recorded and started: never here.
  std::string out = home_ + "/out";
  make_dirs(out);
  auto r = run_cli({"run", "--rm", "--engine", "jail", "-v", out + ":/out", image("busybox"), "touch", "/out/ran"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("not a database"), std::string::npos) << r.err;
  EXPECT_FALSE(path_exists(out + "/ran")) << "the main command ran for a box that was never recorded";
  remove_tree(out);
  expect_no_leftovers();
}

// `run` hands its shim the box before it records it (create_to_start); the box's
// main command runs only once it is recorded and started. Here the record waits for
// another process's write lock on the store: meanwhile nothing runs, then it does.
TEST_F(StoreOpenTest, AHandedShimRunsNothingBeforeTheBoxIsRecorded) {
  ASSERT_EQ(run_cli({"list"}).exit_code, 0);  // the store exists
  std::string out = home_ + "/out", locked = home_ + "/locked";
  make_dirs(out);
  SpawnOptions holder;
  holder.argv = {"python3", "-c",
                 "import sqlite3, sys, time\n"
                 "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                 "c.execute('BEGIN IMMEDIATE')\n"
                 "open(sys.argv[2], 'w').close()\n"
                 "time.sleep(2)\n"
                 "c.execute('COMMIT')\n",
                 home_ + "/db/boxlite.db", locked};
  Child lock = spawn(holder);
  for (int i = 0; i < 200 && !path_exists(locked); ++i) ::usleep(10000);
  ASSERT_TRUE(path_exists(locked)) << "the lock holder did not start";
  SpawnOptions so;
  so.argv = {cli(), "run", "--rm", "--engine", "jail", "-v", out + ":/out", image("busybox"), "touch", "/out/ran"};
  so.stdout_path = so.stderr_path = home_ + "/run.log";
  Child run = spawn(so);
  ::usleep(800000);  // a box's start takes milliseconds
  EXPECT_FALSE(path_exists(out + "/ran")) << "the main command ran before its box was recorded";
  EXPECT_EQ(lock.wait(), 0);
  int status = run.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(home_ + "/run.log");
  EXPECT_TRUE(path_exists(out + "/ran")) << "the box never ran once recorded: " << read_file(home_ + "/run.log");
  remove_tree(out);
  expect_no_leftovers();
}

// The CLI's `run` starts the box's shim before it opens the runtime
// (core/shim_launch.hpp); the shim learns its box over a socket.
class ShimLaunchTest : public BoxliteTest {};

TEST_F(ShimLaunchTest, ARunThatFailsBeforeItsBoxStartsLeavesNoProcess) {
  // The programs run from a directory of this test's, so that its orphan check sees
  // its own zygotes only, not what tests running beside it leave for a moment. Links,
  // not symlinks: an exec'd shim finds boxlite-guest beside its resolved self.
  std::string libexec = home_ + "/libexec";
  make_dirs(libexec);
  for (std::string prog : {"boxlite-shim", "boxlite-guest", "boxlite-net"}) {
    std::string from = bin_dir() + "/" + prog, to = libexec + "/" + prog;
    if (::link(from.c_str(), to.c_str()) != 0) {
      std::error_code ec;
      ASSERT_TRUE(std::filesystem::copy_file(from, to, ec)) << prog << ": " << ec.message();
    }
  }
  ::setenv("BOXLITE_LIBEXEC_DIR", libexec.c_str(), 1);
  unsigned long long since = boot_ticks_now();
  for (const char* mode : {"--rm", "-d"}) {
    auto r = run_cli({"run", mode, "--engine", "jail", home_ + "/no-such-image", "true"});
    EXPECT_EQ(r.exit_code, 125) << mode << ": " << r.err;
    EXPECT_NE(r.err.find("no-such-image"), std::string::npos) << r.err;
    // The CLI kills and reaps a shim it did not use; one whose CLI died first
    // exits at EOF on its socket (AShimWhoseBoxNeverComesExitsQuietly).
    EXPECT_TRUE(processes_with_env("BOXLITE_HOME=" + home_).empty()) << mode;
    // Told at EOF rather than killed, the shim reaped the jail's zygote it had started.
    EXPECT_TRUE(orphans_named("boxlite-guest", since, libexec + "/").empty()) << mode << ": an orphaned zygote";
  }
  // An attached run spawns its shim before it parses its command line (cli/main.cpp):
  // a command line that then fails to parse, or asks for help, lets it go as well.
  for (std::vector<std::string> args :
       {std::vector<std::string>{"run", "--no-such-flag", "x"}, std::vector<std::string>{"run", "--help"}}) {
    auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, args[1] == "--help" ? 0 : 125) << args[1] << ": " << r.err;
    EXPECT_TRUE(processes_with_env("BOXLITE_HOME=" + home_).empty()) << args[1];
    EXPECT_TRUE(orphans_named("boxlite-guest", since, libexec + "/").empty()) << args[1] << ": an orphaned zygote";
  }
  ::unsetenv("BOXLITE_LIBEXEC_DIR");
  remove_tree(libexec);
  expect_no_leftovers();
}

TEST_F(ShimLaunchTest, AShimNamesItsBoxInItsCommandLine) {
  ::setenv("BOXLITE_ENGINE", "jail", 1);
  auto d = run_cli({"run", "-d", image("busybox"), "sleep", "60"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string box_dir = home_ + "/boxes/" + trim(d.out);
  int shims = 0;
  for (pid_t p : processes_mentioning(box_dir + " ")) {
    if (trim(read_file("/proc/" + std::to_string(p) + "/comm")) != "boxlite-shim") continue;
    ++shims;
    // Its one child is the box's init (the agent); the zygote it was cloned from is gone.
    std::vector<std::string> comms;
    for (pid_t c : children_of(p)) comms.push_back(trim(read_file("/proc/" + std::to_string(c) + "/comm")));
    EXPECT_EQ(comms, std::vector<std::string>{"boxlite-guest"});
  }
  EXPECT_EQ(shims, 1) << "no boxlite-shim names " << box_dir;
  EXPECT_EQ(run_cli({"rm", "-f", trim(d.out)}).exit_code, 0);
  expect_no_leftovers();
}

// An attached run spawns its shim before it parses its command line, before it
// knows its box (core/shim_launch.hpp): the shim names its box in its command line
// once handed it, so other processes (list reconciles every running box's shim) see
// the box running, and it goes with the box.
TEST_F(ShimLaunchTest, AnAttachedRunsEarlyShimNamesItsBoxAndOthersSeeItRunning) {
  ::setenv("BOXLITE_ENGINE", "jail", 1);
  SpawnOptions so;
  so.argv = {cli(), "run", "--rm", image("busybox"), "sleep", "300"};
  so.stdout_path = so.stderr_path = home_ + "/cli.out";
  Child run = spawn(so);
  std::string id;
  for (int i = 0; i < 600 && id.empty(); ++i) {
    ::usleep(100000);
    id = trim(run_cli({"list", "-q"}).out);
  }
  ASSERT_EQ(id.size(), 12u) << "the box never ran: " << read_file(home_ + "/cli.out");
  std::string box_dir = home_ + "/boxes/" + id;
  std::vector<pid_t> shims;
  for (pid_t p : processes_mentioning(box_dir + " ")) {
    if (trim(read_file("/proc/" + std::to_string(p) + "/comm")) == "boxlite-shim") shims.push_back(p);
  }
  ASSERT_EQ(shims.size(), 1u) << "no boxlite-shim names " << box_dir;
  char exe[4096] = {};
  ASSERT_GT(::readlink(("/proc/" + std::to_string(shims[0]) + "/exe").c_str(), exe, sizeof exe - 1), 0);
  EXPECT_EQ(std::string(exe), bin_dir() + "/boxlite-shim");
  std::vector<std::string> comms;
  for (pid_t c : children_of(shims[0])) comms.push_back(trim(read_file("/proc/" + std::to_string(c) + "/comm")));
  EXPECT_EQ(comms, std::vector<std::string>{"boxlite-guest"}) << "the box's init, cloned from the exec'd zygote";
  EXPECT_EQ(trim(run_cli({"inspect", "-f", "{{.State.Status}}", id}).out), "running");
  EXPECT_EQ(run_cli({"rm", "-f", id}).exit_code, 0);
  auto st = run.wait_for(20000);
  ASSERT_TRUE(st.has_value()) << "the CLI outlived its box";
  EXPECT_FALSE(process_alive(shims[0]));
  expect_no_leftovers();
}

// Runtime::create_to_start (the CLI's run) hands the runtime's early shim its box as
// soon as the box's spec is written, under the box's lock, so the shim boots the box
// while its row is written (a named box's after it). A box dropped unstarted has that
// shim stopped and leaves nothing: no process, directory, row or cgroup; one that is
// started takes the shim that is booting it, and runs; anything else in the process
// that locks the box (a removal by id, here) stops the shim first instead of waiting
// on the lock it holds.
TEST_F(ShimLaunchTest, AShimHandedItsBoxAtCreateIsTakenByStartOrStopped) {
  BoxOptions o;
  o.rootfs_path = image("busybox");
  o.engine = EngineKind::Jail;
  for (std::string how : {"drop", "start", "remove", "named"}) {
    Runtime rt(RuntimeOptions{.home_dir = home_, .early_shim = EarlyShim::start(/*detached=*/false)});
    auto box = rt.create_to_start(o, how == "named" ? "handed" : "");
    std::string id = box->id();
    // The handed shim boots the box before anyone starts it: its init appears.
    bool booting = false;
    for (int i = 0; i < 500 && !booting; ++i) {
      for (pid_t p : processes_mentioning(local(*box).dir() + " ")) {
        for (pid_t c : children_of(p))
          booting = booting || trim(read_file("/proc/" + std::to_string(c) + "/comm")) == "boxlite-guest";
      }
      if (!booting) ::usleep(10000);
    }
    EXPECT_TRUE(booting) << how << ": no shim of box " << id << " had a child";
    if (how == "start" || how == "named") {
      box->start();
      ExecOptions e;
      e.argv = {"sh", "-c", "echo started"};
      auto r = box->run(e);
      EXPECT_EQ(r.exit_code, 0) << how << ": " << r.stderr_text;
      EXPECT_EQ(r.stdout_text, "started\n") << how;
    }
    if (how == "remove") {
      std::thread remover([&] { rt.remove(id, /*force=*/true); });
      for (int i = 0; i < 1000 && rt.get(id); ++i) ::usleep(10000);
      EXPECT_FALSE(rt.get(id)) << "the removal waits on the lock the handed shim holds";
      remover.join();  // hangs the test if it never finished
    }
    box.reset();  // auto_remove: destroyed
    EXPECT_FALSE(rt.get(id)) << how << ": box " << id << " was not removed";
    for (const char* c : {"memory", "pids", "cpu"}) {
      EXPECT_FALSE(path_exists(std::string("/sys/fs/cgroup/") + c + "/boxlite/" + id)) << how << ": " << c;
    }
    EXPECT_FALSE(path_exists("/sys/fs/cgroup/boxlite/" + id)) << how;
    expect_no_leftovers();
  }
}

TEST_F(ShimLaunchTest, AShimWhoseBoxNeverComesExitsQuietly) {
  auto [ours, shim] =
      spawn_on_socket({bin_dir() + "/boxlite-shim", "--box-dir-fd", "3"}, SOCK_STREAM, home_ + "/shim.out");
  // Waiting, it has started the jail's zygote (engine/jail/jail.hpp), which goes with it.
  std::vector<pid_t> zygote;
  for (int i = 0; i < 200; ++i) {
    zygote = children_of(shim.pid());
    if (!zygote.empty() && trim(read_file("/proc/" + std::to_string(zygote[0]) + "/comm")) == "boxlite-guest") break;
    ::usleep(10000);
  }
  ASSERT_EQ(zygote.size(), 1u) << "the waiting shim has no zygote";
  std::vector<std::string> before = stat_fields(zygote[0]);
  ASSERT_GT(before.size(), 19u);
  ours.reset();
  auto st = shim.wait_for(10000);
  ASSERT_TRUE(st.has_value()) << "the shim did not exit at EOF";
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << describe_status(*st);
  std::vector<std::string> after = stat_fields(zygote[0]);
  EXPECT_TRUE(after.size() <= 19 || after[19] != before[19])
      << "the zygote outlived its shim, or was left for init to reap (state " << after[0] << ")";
  EXPECT_EQ(read_file(home_ + "/shim.out"), "");
  // Without its socket (a box directory alone, or nothing) it is a usage error.
  for (std::vector<std::string> args : {std::vector<std::string>{}, {home_}, {home_, "--ready-fd", "1"}}) {
    args.insert(args.begin(), bin_dir() + "/boxlite-shim");
    RunResult r = run_capture(args);
    EXPECT_EQ(WEXITSTATUS(r.status), 2);
    EXPECT_NE(r.err.find("usage: boxlite-shim"), std::string::npos) << r.err;
  }
}

// Two processes starting the same box at once boot it once: the box lock
// serialises them and the second joins the first one's shim.
TEST_F(LockTest, ConcurrentStartsOfOneBoxBootItOnce) {
  ::setenv("BOXLITE_ENGINE", "jail", 1);
  auto c = run_cli({"create", "--name", "once", image("busybox")});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  std::string id = trim(c.out);
  std::vector<std::thread> starters;
  std::atomic<int> failures{0};
  for (int i = 0; i < 4; ++i) {
    starters.emplace_back([&] { failures += run_cli({"start", "once"}).exit_code != 0; });
  }
  for (auto& t : starters) t.join();
  EXPECT_EQ(failures, 0);
  int shims = 0;
  for (pid_t p : processes_mentioning(home_ + "/boxes/" + id)) {
    shims += trim(read_file("/proc/" + std::to_string(p) + "/comm")) == "boxlite-shim";
  }
  EXPECT_EQ(shims, 1);
  EXPECT_EQ(run_cli({"exec", "once", "--", "echo", "ok"}).out, "ok\n");
  EXPECT_EQ(run_cli({"rm", "-f", "once"}).exit_code, 0);
  expect_no_leftovers();
}

}  // namespace
}  // namespace boxlite::testing
