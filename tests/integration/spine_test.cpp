// The spine: `boxlite run` and the C++ API booting real microVMs (QEMU TCG).
#include <fcntl.h>
#include <openssl/evp.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <future>
#include <thread>

#include "protocol/frame.hpp"
#include "support.hpp"

namespace boxlite::testing {
namespace {

std::string host_uname_r() { return trim(run_capture({"uname", "-r"}).out); }

// Everything here must hold for both engines (issue 3): each test runs on each.
class EngineTest : public PerEngineTest {};

class VmTest : public BoxliteTest {};

TEST_P(EngineTest, RunStreamsSeparateOutputAndExitCodeInsideItsOwnKernel) {
  auto r = run_cli({"run", "--rm", image("busybox"), "sh", "-c",
                    "echo out; echo err >&2; uname -r; cat /proc/sys/kernel/random/boot_id; exit 42"});
  EXPECT_EQ(r.exit_code, 42) << r.err;
  auto lines = split(r.out, '\n');
  ASSERT_GE(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0], "out");
  EXPECT_NE(r.err.find("err\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("err"), std::string::npos) << "stderr leaked into stdout";
  if (vm()) {
    // A VM has its own kernel: not the host's release, not the host's boot.
    EXPECT_NE(lines[1], host_uname_r());
    EXPECT_NE(lines[2], trim(read_file("/proc/sys/kernel/random/boot_id")));
  }
  expect_no_leftovers();
}

TEST_P(EngineTest, ImageConfigAndLayersAreHonoured) {
  auto r = run_cli({"run", "--rm", image("busybox"), "sh", "-c",
                    "echo $IMAGE_VAR; test -e /etc/removed-by-layer2 && echo whiteout-broken; "
                    "ls /var/old; cat /var/keep/file /etc/boxlite-image; pwd"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "from-image\nfresh\nkeep\nbusybox test image, layer 3\n/\n");
}

TEST_P(EngineTest, ArgvIsNeverAShellStringAndEnvAndWorkdirApply) {
  ::setenv("BOXLITE_TEST_FROM_HOST", "host-value", 1);
  auto r = run_cli({"run", "--rm", "-e", "A=1", "-e", "IMAGE_VAR=overridden", "-e", "BOXLITE_TEST_FROM_HOST", "-w",
                    "/etc", image("busybox"), "sh", "-c", "echo \"$1|$A|$IMAGE_VAR|$BOXLITE_TEST_FROM_HOST\"; pwd",
                    "sh", "a  b $HOME ;"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "a  b $HOME ;|1|overridden|host-value\n/etc\n");
  auto echo = run_cli({"run", "--rm", image("busybox"), "echo", "$(id)", "*"});
  EXPECT_EQ(echo.out, "$(id) *\n");
}

// `nproc` in the box counts the CPUs it was given (the reference's way to check
// them), in a jail as in a VM: runtimes size their thread pools by it.
TEST_P(EngineTest, NprocInTheBoxIsTheCpusItWasGiven) {
  auto one = run_cli({"run", "--rm", image("busybox"), "nproc"});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, "1\n") << "the default is one CPU";
  if (vm()) return;  // a second vCPU costs a TCG boot more than it shows
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  int host = CPU_COUNT(&mine);
  auto two = run_cli({"run", "--rm", "--cpus", "2", image("busybox"), "nproc"});
  EXPECT_EQ(two.out, std::to_string(std::min(2, host)) + "\n") << two.err;
}

TEST_P(EngineTest, DefaultCommandComesFromTheImage) {
  // The busybox image's Cmd is ["sh"]; with stdin closed it exits 0 at once.
  auto r = run_cli({"run", "--rm", image("busybox")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_P(EngineTest, DeathBySignalIsTheNegativeSignalNumber) {
  Runtime rt;
  BoxOptions o;
  o.rootfs_path = image("busybox");
  auto box = rt.create(o);
  auto res = box->run(ExecOptions{{"sh", "-c", "kill -9 $$"}});
  EXPECT_EQ(res.exit_code, -9);
  // The CLI's main command is PID 1 of its box, which ignores signals it has no
  // handler for (as in a container): the CLI forwards the first SIGTERM, and kills
  // the command on the second; the CLI then reports death by SIGKILL as 128+9.
  SpawnOptions so;
  so.argv = {cli(), "run", "--rm", image("busybox"), "sh", "-c", "echo up; exec sleep 1000"};
  so.stdout_path = so.stderr_path = home_ + "/cli.log";
  Child child = spawn(so);
  std::string log;
  for (int i = 0; i < 600 && log.find("up") == std::string::npos; ++i) {
    ::usleep(50000);
    log = read_file(home_ + "/cli.log");
  }
  ASSERT_NE(log.find("up"), std::string::npos) << "the box never started";
  ::kill(child.pid(), SIGTERM);
  ::usleep(300000);
  ::kill(child.pid(), SIGTERM);
  auto status = child.wait_for(30000);
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 128 + 9) << read_file(home_ + "/cli.log");
}

TEST_P(EngineTest, MissingBinaryIsASpawnErrorNotExitCode127FromAShell) {
  Runtime rt;
  BoxOptions o;
  o.rootfs_path = image("busybox");
  auto box = rt.create(o);
  try {
    box->run(ExecOptions{{"nope-not-here"}});
    ADD_FAILURE() << "expected a spawn error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Execution);
    EXPECT_NE(std::string(e.what()).find("spawn_failed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not found in $PATH"), std::string::npos) << e.what();
  }
  // The box is still usable after a failed spawn.
  EXPECT_EQ(box->run(ExecOptions{{"true"}}).exit_code, 0);
  box.reset();
  auto r = run_cli({"run", "--rm", image("busybox"), "nope-not-here"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("not found in $PATH"), std::string::npos) << r.err;
  expect_no_leftovers();
}

TEST_P(EngineTest, ConcurrentExecsNeverDeadlockOrCrossTalk) {
  Runtime rt;
  BoxOptions o;
  o.rootfs_path = image("busybox");
  auto box = rt.create(o);
  box->start();
  for (int round = 0; round < 20; ++round) {
    std::vector<std::future<BufferedResult>> futures;
    for (int i = 0; i < 16; ++i) {
      futures.push_back(std::async(std::launch::async, [&box, i] {
        return box->run(ExecOptions{{"echo", "hello_" + std::to_string(i)}});
      }));
    }
    for (int i = 0; i < 16; ++i) {
      ASSERT_EQ(futures[static_cast<size_t>(i)].wait_for(std::chrono::seconds(60)), std::future_status::ready)
          << "round " << round << " exec " << i << " hung";
      auto res = futures[static_cast<size_t>(i)].get();
      EXPECT_EQ(res.exit_code, 0);
      EXPECT_EQ(res.stdout_text, "hello_" + std::to_string(i) + "\n") << "round " << round;
    }
  }
}

long rss_hwm_kib(pid_t pid) {
  std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
  auto pos = status.find("VmHWM:");
  return pos == std::string::npos ? -1 : std::stol(status.substr(pos + 6));
}

TEST_P(EngineTest, HundredMegabytesOfStdoutArriveIntactWithBoundedMemory) {
  Runtime rt;
  BoxOptions o;
  o.rootfs_path = image("busybox");
  auto box = rt.create(o);
  // The box hashes what it sends; the host hashes what it receives, chunk by chunk.
  // Peak RSS from here on only (earlier tests in this process may have used more).
  {
    UniqueFd f(::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(f.valid());
    write_all(f.get(), "5", 1);
  }
  auto exec = box->exec(ExecOptions{
      {"sh", "-c", "head -c 100000000 /dev/urandom > /tmp/blob && sha256sum /tmp/blob >&2 && cat /tmp/blob"}});
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  size_t total = 0;
  std::string err;
  while (auto chunk = exec.next_output()) {
    if (chunk->stream == StreamKind::Stdout) {
      EVP_DigestUpdate(ctx.get(), chunk->data.data(), chunk->data.size());
      total += chunk->data.size();
    } else {
      err += chunk->data;
    }
  }
  EXPECT_EQ(exec.wait().exit_code, 0) << err;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned md_len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &md_len);
  EXPECT_EQ(total, 100000000u);
  EXPECT_EQ(hex_encode(md, md_len), err.substr(0, 64));
  // Flow control keeps every host process far below the stream's size.
  EXPECT_LT(rss_hwm_kib(::getpid()), 100 * 1024) << "test process peak RSS (KiB) during the stream";
  auto shims = processes_mentioning(local(*box).dir());
  for (pid_t p : shims) {
    std::string comm = trim(read_file("/proc/" + std::to_string(p) + "/comm"));
    if (comm == "boxlite-shim") {
      EXPECT_LT(rss_hwm_kib(p), 40 * 1024) << "shim peak RSS (KiB)";
    }
  }
}

TEST_P(EngineTest, BoxesOfOneImageNeverSeeEachOthersWrites) {
  Runtime rt;
  BoxOptions o;
  o.rootfs_path = image("busybox");
  auto a = rt.create(o);
  auto b = rt.create(o);
  ASSERT_EQ(a->run(ExecOptions{{"sh", "-c", "echo secret > /root/from-a && sync"}}).exit_code, 0);
  auto seen = b->run(ExecOptions{{"sh", "-c", "cat /root/from-a 2>/dev/null || echo absent"}});
  EXPECT_EQ(seen.stdout_text, "absent\n");
  // What boxes share (the ext4 base, or the overlay lower layers) never changes.
  std::string shared = vm() ? rt.home() + "/images/disk-images" : rt.home() + "/images/layers";
  auto fingerprint = [&] {
    return run_capture({"sh", "-c",
                        "cd " + shared +
                            " && find . -name '*.json' -prune -o -print0 | sort -z | "
                            "xargs -0 ls -ld --time-style=+%s-%N | sha256sum; find . -type f ! -name '*.json' "
                            "-print0 | sort -z | xargs -0 cat | sha256sum"})
        .out;
  };
  std::string before = fingerprint();
  ASSERT_EQ(a->run(ExecOptions{{"sh", "-c", "echo more > /etc/boxlite-image && rm -f /bin/true && sync"}}).exit_code,
            0);
  a->stop();
  b->stop();
  EXPECT_EQ(fingerprint(), before) << "the shared image data changed";
}

TEST_P(EngineTest, StopKillsTheVm) {
  Runtime rt;
  BoxOptions o;
  o.rootfs_path = image("busybox");
  auto box = rt.create(o);
  box->start();
  EXPECT_FALSE(processes_mentioning(local(*box).dir()).empty());
  box->stop();
  EXPECT_TRUE(processes_mentioning(local(*box).dir()).empty());
  EXPECT_EQ(box->state(), BoxState::Stopped);
  EXPECT_EQ(read_file("/proc/self/mountinfo").find(local(*box).dir()), std::string::npos)
      << "a mount of the box remains";
}

TEST_P(EngineTest, ACliKilledWithSigkillLeavesNoVmRunning) {
  SpawnOptions so;
  so.argv = {cli(), "run", "--rm", image("busybox"), "sleep", "1000"};
  so.stdout_path = so.stderr_path = home_ + "/cli.log";
  int guests_before = count_comm("boxlite-guest");
  Child child = spawn(so);
  bool running = false;
  for (int i = 0; i < 300 && !running; ++i) {
    for (pid_t p : processes_mentioning(home_ + "/boxes/")) {
      std::string comm = trim(read_file("/proc/" + std::to_string(p) + "/comm"));
      running = running || comm.rfind("qemu", 0) == 0;
    }
    running = running || count_comm("boxlite-guest") > guests_before;
    ::usleep(100000);
  }
  ASSERT_TRUE(running) << "the box never started";
  ::usleep(500000);
  ::kill(child.pid(), SIGKILL);
  child.wait();
  for (int i = 0; i < 100 && !processes_mentioning(home_ + "/boxes/").empty(); ++i) ::usleep(100000);
  EXPECT_TRUE(processes_mentioning(home_ + "/boxes/").empty()) << "QEMU or the shim survived the CLI";
  for (int i = 0; i < 50 && count_comm("boxlite-guest") > guests_before; ++i) ::usleep(100000);
  EXPECT_EQ(count_comm("boxlite-guest"), guests_before) << "the jail's init survived the CLI";
}

TEST_F(VmTest, DebianPrebuiltKernelBootsWithItsModules) {
  auto r = run_cli(
      {"run", "--rm", "--kernel", "debian", image("busybox"), "sh", "-c", "uname -r; grep -c virtio /proc/modules"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = split(r.out, '\n');
  EXPECT_NE(lines[0].find("-amd64"), std::string::npos) << r.out;
  EXPECT_GE(std::stoi(lines[1]), 3) << "virtio modules were not loaded";
  expect_no_leftovers();
}

TEST_P(EngineTest, DebianPythonImageRunsPython) {
  auto r = run_cli({"run", "--rm", image("debian-python"), "python3", "-c", "import sys; print(sys.version_info[0])"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "3\n");
}

// --- clear errors, and nothing left behind ----------------------------------

TEST_P(EngineTest, MissingImageDirectoryIsAClearError) {
  auto r = run_cli({"run", "--rm", "/nonexistent/image-dir", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("/nonexistent/image-dir"), std::string::npos) << r.err;
  expect_no_leftovers();
}

TEST_P(EngineTest, CorruptImageIsAClearError) {
  std::string dir = home_ + "/corrupt";
  ASSERT_EQ(run_capture({"cp", "-r", image("busybox"), dir}).status, 0);
  write_file_atomic(dir + "/index.json", "{not json");
  auto r = run_cli({"run", "--rm", dir, "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("index.json"), std::string::npos) << r.err;
  // A layer whose bytes do not match its digest.
  ASSERT_EQ(run_capture({"cp", "-r", image("busybox"), dir + "2"}).status, 0);
  RunResult blobs = run_capture({"sh", "-c", "ls -S " + dir + "2/blobs/sha256 | head -1"});
  std::string biggest = dir + "2/blobs/sha256/" + trim(blobs.out);
  write_file_atomic(biggest, "garbage");
  r = run_cli({"run", "--rm", dir + "2", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("sha256"), std::string::npos) << r.err;
  expect_no_leftovers();
}

TEST_P(EngineTest, BadOptionValuesAreClearErrors) {
  auto mem = run_cli({"run", "--rm", "--memory", "1", image("busybox"), "true"});
  EXPECT_EQ(mem.exit_code, 125);
  EXPECT_NE(mem.err.find("memory_mib"), std::string::npos) << mem.err;
  auto cpus = run_cli({"run", "--rm", "--cpus", "-2", image("busybox"), "true"});
  EXPECT_NE(cpus.exit_code, 0);
  EXPECT_NE(cpus.err.find("cpus"), std::string::npos) << cpus.err;
  auto engine = run_cli({"run", "--rm", "--engine", "warp", image("busybox"), "true"});
  EXPECT_EQ(engine.exit_code, 125);
  EXPECT_NE(engine.err.find("unknown engine 'warp'"), std::string::npos) << engine.err;
  auto wd = run_cli({"run", "--rm", "-w", "relative", image("busybox"), "true"});
  EXPECT_NE(wd.err.find("absolute"), std::string::npos) << wd.err;
  // Clamped with a warning (checked without booting 255 emulated vCPUs).
  auto big = run_cli({"run", "--rm", "--cpus", "300", "--memory", "1", image("busybox"), "true"});
  EXPECT_NE(big.err.find("using 255"), std::string::npos) << big.err;
  expect_no_leftovers();
}

TEST_F(VmTest, AKernelThatWillNotBootNamesTheStageAndShowsTheConsole) {
  std::string bogus = home_ + "/bogus-kernel";
  write_file_atomic(bogus, std::string(4096, 'x'));
  auto r = run_cli({"run", "--rm", "--kernel", bogus, image("busybox"), "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("failed to boot"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("console tail"), std::string::npos) << r.err;
  expect_no_leftovers();
}

TEST_F(VmTest, AGuestThatNeverAnswersTimesOutWithTheStageNamed) {
  // A real kernel with an init that is not the agent: the console shows the panic.
  Runtime rt;
  BoxOptions o;
  o.rootfs_path = image("busybox");
  o.boot_timeout_secs = 8;
  o.kernel = bin_dir() + "/kernel/vmlinux";
  auto box = rt.create(o);
  // Replace the initramfs with one whose /init does not exist.
  std::string spec_path = local(*box).dir() + "/shim.json";
  std::string spec = read_file(spec_path);
  auto empty = home_ + "/empty.cpio";
  write_file_atomic(empty, std::string("070701") + std::string(104, '0'));
  auto pos = spec.find("initramfs-");
  ASSERT_NE(pos, std::string::npos);
  auto start = spec.rfind('"', pos) + 1;
  auto end = spec.find('"', pos);
  spec.replace(start, end - start, empty);
  write_file_atomic(spec_path, spec);
  try {
    box->start();
    ADD_FAILURE() << "boot should fail";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::Engine);
    EXPECT_NE(msg.find("failed to boot"), std::string::npos) << msg;
    EXPECT_NE(msg.find("console tail"), std::string::npos) << msg;
  }
  EXPECT_TRUE(processes_mentioning(local(*box).dir()).empty());
}

TEST_P(EngineTest, ProtocolVersionMismatchIsAClearError) {
  Runtime rt;
  BoxOptions o;
  o.rootfs_path = image("busybox");
  auto box = rt.create(o);
  box->start();
  UniqueFd fd = unix_connect(local(*box).dir() + "/shim.sock");
  proto::Hello hello;
  hello.set_version(999);
  std::string out = protocol::encode_message(0, protocol::FrameType::Hello, hello);
  write_all(fd.get(), out.data(), out.size());
  protocol::FrameDecoder dec;
  std::optional<protocol::Frame> f;
  char buf[4096];
  while (!f) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    ASSERT_GT(n, 0);
    dec.feed(buf, static_cast<size_t>(n));
    f = dec.next();
  }
  ASSERT_EQ(f->type, protocol::FrameType::Error);
  auto err = protocol::parse_message<proto::ErrorReply>(*f);
  EXPECT_NE(err.message().find("protocol version mismatch"), std::string::npos) << err.message();
  // The box keeps serving well-behaved clients.
  EXPECT_EQ(box->run(ExecOptions{{"true"}}).exit_code, 0);
}

// An image may ship the box's mount points and /etc as anything: a link to a path
// it lacks, a link out of the root, a file. A box of it still starts, with a
// directory there and its own files in it (a VM's agent mounts and writes inside
// the box's root, where mount would have followed the link out; a jail's engine
// hides them under its layer of mount points).
TEST_P(EngineTest, MountPointsAndEtcThatAreLinksOrFilesStillMakeABox) {
  std::string img = home_ + "/odd-image";
  ASSERT_TRUE(pack_busybox_image(img, [](const std::string& layer) {
    ::symlink("/nowhere/etc", (layer + "/etc").c_str());
    ::symlink("/", (layer + "/tmp").c_str());
    ::symlink("/run/proc", (layer + "/proc").c_str());
    write_file_atomic(layer + "/sys", "a file where /sys goes\n");
  }));
  auto r = run_cli({"run", "--rm", img, "sh", "-c",
                    "test -d /etc && test -d /tmp && test -d /proc/self && test -d /sys && "
                    "grep -c ' /tmp tmpfs ' /proc/mounts && grep -c nameserver /etc/resolv.conf"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1\n1\n") << r.err;
  expect_no_leftovers();
}

BOXLITE_ON_BOTH_ENGINES(EngineTest);

class AccelTest : public BoxliteTest {};

TEST_F(AccelTest, AutoChoosesTcgWithinASecondAndSaysWhy) {
  ::setenv("BOXLITE_ACCEL", "auto", 1);
  double start = now_ms();
  auto r = run_cli({"run", "--rm", image("busybox"), "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Either KVM is fast here, or TCG was chosen with a one-line warning naming the cause.
  std::string verdict = read_file(home_ + "/tmp/kvm-probe");
  if (verdict.find("unusable") != std::string::npos) {
    EXPECT_NE(r.err.find("using QEMU TCG"), std::string::npos) << r.err;
  }
  EXPECT_LT(now_ms() - start, 30000);
}

TEST_F(AccelTest, KvmRequestedWhereUnusableIsUnsupportedEngine) {
  ::setenv("BOXLITE_ACCEL", "auto", 1);
  run_cli({"run", "--rm", image("busybox"), "true"});  // records the probe verdict
  if (read_file(home_ + "/tmp/kvm-probe").find("unusable") == std::string::npos) GTEST_SKIP() << "KVM is usable here";
  Runtime rt;
  BoxOptions o;
  o.rootfs_path = image("busybox");
  o.accel = "kvm";
  try {
    rt.create(o);
    ADD_FAILURE() << "expected UnsupportedEngine";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::UnsupportedEngine);
    EXPECT_NE(std::string(e.what()).find("KVM is not usable"), std::string::npos) << e.what();
  }
  expect_no_leftovers();
}

}  // namespace
}  // namespace boxlite::testing
