// The jail engine against a hostile guest: each test runs an attack inside a jail
// box and checks it fails and the host is unchanged.
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <tuple>

#include "engine/jail/box_init.hpp"
#include "support.hpp"

namespace boxlite::testing {
namespace {

class JailEscapeTest : public BoxliteTest {
 protected:
  void SetUp() override {
    BoxliteTest::SetUp();
    secret_ = "host-secret-" + random_hex(8);
    secret_path_ = home_ + "/host-secret";
    write_file_atomic(secret_path_, secret_ + "\n");
  }

  std::shared_ptr<Box> jail(const std::string& img = "busybox", std::optional<int> memory_mib = std::nullopt) {
    BoxOptions o;
    o.rootfs_path = image(img);
    o.engine = EngineKind::Jail;
    o.memory_mib = memory_mib;
    auto box = rt().create(o);
    boxes_.push_back(box);
    return box;
  }

  // The output of a busybox jail box's main command (`o`'s); a failed exit fails the test.
  std::string main_command_output(BoxOptions o) {
    o.rootfs_path = image("busybox");
    o.engine = EngineKind::Jail;
    auto box = rt().create(o);
    boxes_.push_back(box);
    Execution a = box->attach();
    std::string out;
    while (auto c = a.next_output()) out += c->data;
    EXPECT_EQ(a.wait().exit_code, 0) << out;
    return out;
  }

  BufferedResult sh(const std::shared_ptr<Box>& box, const std::string& script, double timeout = 30) {
    ExecOptions e;
    e.argv = {"sh", "-c", script};
    e.timeout_secs = timeout;
    return box->run(e);
  }

  // `boxlite run --rm --engine jail` of the debian-python image running `script`.
  CliResult python_run(const std::string& script) {
    std::vector<std::string> args = {"run",     "--rm", "--engine", "jail", image("debian-python"),
                                     "python3", "-c",   script};
    if (!without_disks_) return run_cli(args);
    // /dev/loop-control is /dev/null for the CLI: no box gets a disk, each keeps its
    // writable layer in its directory (engine/jail/disk.hpp).
    return run_cli_under({"unshare", "-m", "--propagation", "private", "sh", "-c",
                          "mount --bind /dev/null /dev/loop-control && exec \"$@\"", "sh"},
                         args);
  }
  bool without_disks_ = false;

  // A jail box of a one-layer image: busybox and its applets in /bin, then
  // whatever `add` puts in the layer. Null (with a failure) if the image cannot be made.
  std::shared_ptr<Box> busybox_image_box(const std::string& name, const std::function<void(const std::string&)>& add,
                                         const std::string& user = "") {
    std::string img = home_ + "/" + name;
    if (!pack_busybox_image(img, add)) return nullptr;
    BoxOptions o;
    o.rootfs_path = img;
    o.engine = EngineKind::Jail;
    o.user = user;
    auto box = rt().create(o);
    boxes_.push_back(box);
    return box;
  }

  // The running box's shim and agent (the shim's boxlite-guest child), on the host;
  // 0 for what is not found.
  std::pair<pid_t, pid_t> shim_and_agent(const std::shared_ptr<Box>& box) {
    pid_t shim = 0, agent = 0;
    for (pid_t p : processes_mentioning(home_ + "/boxes/" + box->id() + " ")) {
      if (trim(read_file("/proc/" + std::to_string(p) + "/comm")) == "boxlite-shim") shim = p;
    }
    for (pid_t c : shim > 0 ? children_of(shim) : std::vector<pid_t>{}) {
      if (trim(read_file("/proc/" + std::to_string(c) + "/comm")) == "boxlite-guest") agent = c;
    }
    return {shim, agent};
  }

  void expect_no_secret(const BufferedResult& r) {
    EXPECT_EQ(r.stdout_text.find(secret_), std::string::npos) << "host file read from the box: " << r.stdout_text;
    EXPECT_EQ(r.stderr_text.find(secret_), std::string::npos) << r.stderr_text;
  }

  // Made on first use: SetUp has chosen the test's home by then.
  std::unique_ptr<Runtime> rt_;
  Runtime& rt() {
    if (!rt_) rt_ = std::make_unique<Runtime>(RuntimeOptions{.home_dir = home_});
    return *rt_;
  }
  std::vector<std::shared_ptr<Box>> boxes_;
  std::string secret_, secret_path_;
};

TEST_F(JailEscapeTest, HostFilesAreNotReachableThroughProcOrDotDot) {
  auto box = jail();
  const std::string& p = secret_path_;
  auto r = sh(box, "cat /proc/1/root" + p + " /proc/self/root" + p + " /proc/*/root" + p + " /proc/*/cwd" + p +
                       " ../../../../../.." + p + " /proc/self/cwd/../../../.." + p +
                       " 2>&1; "
                       "for f in /proc/self/fd/* /proc/1/fd/*; do cat $f" +
                       p +
                       " 2>/dev/null; done; "
                       "ls -la /proc/1/fd/ 2>&1; true");
  expect_no_secret(r);
  // The agent's fds (the channel, the guest binary) do not lead out either.
  auto fds = sh(box, "for f in /proc/1/fd/*; do readlink $f; done 2>&1; true");
  EXPECT_EQ(fds.stdout_text.find(home_), std::string::npos) << fds.stdout_text;
}

// Descriptors the host side holds, or was handed without CLOEXEC (here: one the
// CLI's caller leaks into it, one this test process leaks into the runtime),
// never reach a box's commands; nor does the agent's channel to the host.
TEST_F(JailEscapeTest, NoHostDescriptorReachesTheBox) {
  const std::string list = "for f in /proc/self/fd/*; do readlink $f; done; true";
  RunResult via_cli = run_capture({"sh", "-c", "exec \"$0\" \"$@\" 9<" + secret_path_, cli(), "run", "--rm", "--engine",
                                   "jail", image("busybox"), "sh", "-c", list});
  int leaked = ::open(secret_path_.c_str(), O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaked, 0);
  auto via_api = sh(jail(), list);
  ::close(leaked);
  EXPECT_EQ(via_cli.status, 0) << via_cli.err;
  EXPECT_EQ(via_api.exit_code, 0) << via_api.stderr_text;
  for (const std::string* out : {&via_cli.out, &via_api.stdout_text}) {
    EXPECT_NE(out->find("pipe:"), std::string::npos) << "the listing ran: " << *out;
    EXPECT_EQ(out->find(secret_path_), std::string::npos) << "a host file's descriptor reached the box: " << *out;
    EXPECT_EQ(out->find("socket:"), std::string::npos) << "the agent's channel reached a command: " << *out;
  }
}

// The agent runs as the box's root but outside the box's PID namespace: the box's
// /proc does not list it, so its memory, descriptors and maps are out of reach.
TEST_F(JailEscapeTest, TheAgentIsOutOfReachOfTheBoxsRoot) {
  auto r = sh(jail(),
              "cat /proc/*/comm; cat /proc/*/maps 2>&1; readlink /proc/*/exe 2>&1; ls -l /proc/*/fd 2>&1; "
              "for p in /proc/[0-9]*; do if (exec 3<$p/mem) 2>/dev/null; then echo MEM-OPENED; fi; done");
  EXPECT_EQ(r.stdout_text.find("boxlite-guest"), std::string::npos) << "the agent is listed: " << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("MEM-OPENED"), std::string::npos)
      << "the box's own processes are its root's: " << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find(bin_dir()), std::string::npos) << "the agent's maps or exe: " << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("socket:"), std::string::npos) << "the agent's descriptors: " << r.stdout_text;
}

// Whether `pid`'s readable memory holds `needle` (this test runs as host root, which
// may read any process's /proc/PID/mem).
bool memory_holds(pid_t pid, const std::string& needle) {
  std::string id = std::to_string(pid);
  UniqueFd mem(::open(("/proc/" + id + "/mem").c_str(), O_RDONLY | O_CLOEXEC));
  if (!mem) {
    ADD_FAILURE() << "cannot open /proc/" << id << "/mem: " << std::strerror(errno);
    return false;
  }
  for (const auto& line : split(read_file("/proc/" + id + "/maps"), '\n')) {
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &start, &end, perms) != 3 || perms[0] != 'r') continue;
    std::string bytes(end - start, '\0');
    ssize_t n = ::pread(mem.get(), bytes.data(), bytes.size(), static_cast<off_t>(start));
    if (n > 0 && bytes.substr(0, static_cast<size_t>(n)).find(needle) != std::string::npos) return true;
  }
  return false;
}

// The box's init runs the agent without an exec, cloned from a zygote the shim
// started with no environment before it read the box's spec: neither the
// network's secrets (which the box is only ever given placeholders of) nor the
// environment of whoever started the box (glibc's own copies included) are in the
// agent's memory. The shim holds them all, and the agent its box's hostname: the
// controls that the memory was read at all.
TEST_F(JailEscapeTest, TheAgentHoldsNoneOfTheHostsSecrets) {
  std::string env_secret = "host-env-secret-" + random_hex(8), net_secret = "net-secret-" + random_hex(8);
  std::string tunable_secret = "tunable" + random_hex(8);
  ::setenv("BOXLITE_TEST_HOST_SECRET", env_secret.c_str(), 1);
  ::setenv("GLIBC_TUNABLES", ("glibc.malloc.check=0:boxlite.test=" + tunable_secret).c_str(), 1);
  BoxOptions o;
  o.rootfs_path = image("busybox");
  o.engine = EngineKind::Jail;
  o.secrets.push_back(Secret{"testkey", net_secret, {"api.secret.test"}, ""});
  auto box = rt().create(o);
  boxes_.push_back(box);
  auto r = sh(box, "echo $BOXLITE_SECRET_TESTKEY; hostname");
  ::unsetenv("BOXLITE_TEST_HOST_SECRET");
  ::unsetenv("GLIBC_TUNABLES");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::string hostname = trim(r.stdout_text.substr(r.stdout_text.find('\n') + 1));
  ASSERT_FALSE(hostname.empty()) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find(net_secret), std::string::npos) << "the box got the secret: " << r.stdout_text;
  auto [shim, agent] = shim_and_agent(box);
  ASSERT_GT(shim, 0) << "no shim for " << box->id();
  ASSERT_GT(agent, 0) << "no agent under the shim " << shim;
  EXPECT_TRUE(memory_holds(shim, net_secret)) << "control: the shim holds the box's network secrets";
  EXPECT_TRUE(memory_holds(shim, env_secret)) << "control: the shim holds its caller's environment";
  EXPECT_TRUE(memory_holds(shim, tunable_secret)) << "control: and glibc's copy of GLIBC_TUNABLES";
  EXPECT_TRUE(memory_holds(agent, hostname)) << "control: the agent holds its box's hostname " << hostname;
  EXPECT_FALSE(memory_holds(agent, net_secret)) << "the agent holds a network secret";
  EXPECT_FALSE(memory_holds(agent, env_secret)) << "the agent holds the caller's environment";
  EXPECT_FALSE(memory_holds(agent, tunable_secret)) << "the agent holds the caller's GLIBC_TUNABLES";
}

// A box that dies with its owner must not get the owner's terminal: run from a
// terminal (here a pty made the CLI's controlling terminal), the box has none.
TEST_F(JailEscapeTest, TheOwnersTerminalIsOutOfReach) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  std::string slave_name = ::ptsname(master);
  std::vector<std::string> args = {
      cli(),      "run",  "--rm",
      "--engine", "jail", image("busybox"),
      "sh",       "-c",   "if (: >/dev/tty) 2>/dev/null; then echo GOT-TTY; else echo NO-TTY; fi"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setsid();
    int slave = ::open(slave_name.c_str(), O_RDWR);
    if (slave < 0 || ::ioctl(slave, TIOCSCTTY, 0) != 0) ::_exit(120);
    ::dup2(slave, 0);
    ::dup2(slave, 1);
    ::dup2(slave, 2);
    ::execv(argv[0], argv.data());
    ::_exit(121);
  }
  std::string out;
  int status = 0;
  bool exited = false;
  for (int waited_ms = 0; waited_ms < 60000;) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      char buf[4096];
      ssize_t n = ::read(master, buf, sizeof buf);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (exited) break;  // EIO: every holder of the terminal is gone
    } else {
      waited_ms += 100;
      if (exited) break;
    }
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) exited = true;
  }
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ::close(master);
  EXPECT_TRUE(exited) << "the CLI did not finish: " << out;
  EXPECT_NE(out.find("NO-TTY"), std::string::npos) << out;
  EXPECT_EQ(out.find("GOT-TTY"), std::string::npos) << "the box wrote to its owner's terminal: " << out;
}

TEST_F(JailEscapeTest, MountAndUmountFail) {
  auto box = jail();
  EXPECT_NE(sh(box, "mkdir -p /mnt && mount -t tmpfs x /mnt").exit_code, 0);
  EXPECT_NE(sh(box, "umount /proc/kcore").exit_code, 0);
  EXPECT_NE(sh(box, "umount /proc/kallsyms").exit_code, 0);
  EXPECT_NE(sh(box, "umount -l /proc").exit_code, 0);
  EXPECT_NE(sh(box, "mount -o remount,rw /sys").exit_code, 0);
  EXPECT_NE(sh(box, "mount --bind / /mnt").exit_code, 0);
  // The masks are still in place afterwards.
  EXPECT_EQ(sh(box, "cat /proc/kcore | wc -c").stdout_text, "0\n");
  EXPECT_EQ(sh(box, "cat /proc/kallsyms | wc -c").stdout_text, "0\n");
}

// The mounts the shim makes for a box (its root, /tmp, its volumes) reach the box's
// mount namespace locked: even a process with every capability in the box's user
// namespace (more than the box's root keeps) cannot unmount one to see what is
// under it, nor make a read-only volume writable. nsenter from the host gives that
// process; its view of the volume's file is the control that it is inside.
TEST_F(JailEscapeTest, TheBoxsMountsAreLockedEvenForAFullyCapableProcess) {
  std::string vol = home_ + "/locked-volume";
  make_dirs(vol);
  write_file_atomic(vol + "/f", "volume-file\n", 0644);
  BoxOptions o;
  o.rootfs_path = image("busybox");
  o.engine = EngineKind::Jail;
  o.volumes.push_back(VolumeSpec{vol, "/vol", true});
  auto box = rt().create(o);
  boxes_.push_back(box);
  ASSERT_EQ(sh(box, "true").exit_code, 0);
  auto [shim, agent] = shim_and_agent(box);
  ASSERT_GT(agent, 0) << "no agent for " << box->id();
  auto r = run_capture({"nsenter", "-t", std::to_string(agent), "-U", "-m", "/bin/sh", "-c",
                        "cat /vol/f; umount /vol && echo VOL-UNMOUNTED; umount /tmp && echo TMP-UNMOUNTED; "
                        "mount -o remount,rw /vol && echo VOL-WRITABLE; touch /vol/g && echo VOL-WRITTEN; true"});
  EXPECT_NE(r.out.find("volume-file"), std::string::npos) << "control: not inside the box: " << r.out << r.err;
  for (const char* bad : {"VOL-UNMOUNTED", "TMP-UNMOUNTED", "VOL-WRITABLE", "VOL-WRITTEN"}) {
    EXPECT_EQ(r.out.find(bad), std::string::npos) << bad << ": " << r.out << r.err;
  }
  EXPECT_FALSE(path_exists(vol + "/g"));
}

// Docker's masked /proc paths are masked on the box's /proc (its own PID
// namespace's, mounted after the box's first process exists): each one this
// kernel has reads empty, and the read-only ones refuse writes.
TEST_F(JailEscapeTest, ProcPathsAreMaskedAndReadOnly) {
  auto box = jail();
  for (const char* masked : {"/proc/keys", "/proc/kallsyms", "/proc/timer_list", "/proc/interrupts", "/proc/kmsg",
                             "/proc/kcore", "/proc/sched_debug", "/proc/sysrq-trigger", "/proc/latency_stats"}) {
    if (!path_exists(masked)) continue;  // not in this host's kernel
    auto r = sh(box, std::string("wc -c < ") + masked);
    EXPECT_EQ(r.stdout_text, "0\n") << masked << " is readable in the box: " << r.stdout_text << r.stderr_text;
  }
  for (const char* dir : {"/proc/acpi", "/proc/asound", "/proc/scsi"}) {
    if (!path_exists(dir)) continue;
    auto r = sh(box, std::string("ls -A ") + dir + " | wc -l; touch " + dir + "/x 2>/dev/null && echo WROTE");
    EXPECT_EQ(r.stdout_text, "0\n") << dir << ": " << r.stdout_text;
  }
  auto mounts = sh(box, "cat /proc/self/mountinfo");
  for (const char* ro : {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"}) {
    auto at = mounts.stdout_text.find(std::string(" ") + ro + " ro,");
    EXPECT_NE(at, std::string::npos) << ro << " is not mounted read-only: " << mounts.stdout_text;
  }
  EXPECT_NE(sh(box, "echo 1 > /proc/sys/kernel/ns_last_pid").exit_code, 0);
}

// Beneath the box's /proc (box_init.cpp, put_inner_proc_in_place) is nothing of the
// agent's: uncovered by a process with every capability of the box's namespaces
// (nsenter from the host, as root there), it shows nothing of the host's (no
// /proc/sys, kcore or uptime) and not the agent, PID 1 of the agent's namespace.
TEST_F(JailEscapeTest, WhatLiesBeneathTheBoxsProcShowsNothingMore) {
  auto box = jail();
  ASSERT_EQ(sh(box, "true").exit_code, 0);
  EXPECT_EQ(sh(box, "grep -c ' /proc .* - proc ' /proc/self/mountinfo").stdout_text, "1\n");
  auto [shim, agent] = shim_and_agent(box);
  ASSERT_GT(agent, 0) << "no agent for " << box->id();
  auto r = run_capture({"nsenter", "-t", std::to_string(agent), "-U", "-m", "/bin/sh", "-c",
                        "umount -l /proc && echo UNMOUNTED; ls -a /proc | tr '\\n' ' '"});
  EXPECT_NE(r.out.find("UNMOUNTED"), std::string::npos) << "control: /proc was not uncovered: " << r.out << r.err;
  for (const char* host : {" sys ", " uptime ", " kcore ", " sysrq-trigger ", " 1 "}) {
    EXPECT_EQ((" " + r.out).find(host), std::string::npos) << host << " under the box's /proc: " << r.out;
  }
}

TEST_F(JailEscapeTest, PtraceOfAnyProcessFails) {
  auto box = jail("debian-python");
  std::string py =
      "import ctypes, os\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "for pid in (1, " +
      std::to_string(::getpid()) +
      ", os.getppid()):\n"
      "    r = libc.ptrace(16, pid, 0, 0)\n"  // PTRACE_ATTACH
      "    print('attach', pid, r, ctypes.get_errno())\n"
      "try:\n"
      "    os.kill(" +
      std::to_string(::getpid()) +
      ", 0); print('host pid visible')\n"
      "except OSError as e:\n"
      "    print('kill', e.errno)\n";
  auto r = box->run(ExecOptions{{"python3", "-c", py}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text.find(" 0 0\n"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("attach 1 -1"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("host pid visible"), std::string::npos) << r.stdout_text;
}

TEST_F(JailEscapeTest, ModuleLoadingAndKexecFail) {
  auto box = jail("debian-python");
  std::string py =
      "import ctypes\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "fd = open('/bin/true', 'rb').fileno()\n"
      "for name, nr, args in (('finit_module', 313, (fd, b'', 0)), ('init_module', 175, (0, 0, b'')),\n"
      "                       ('delete_module', 176, (b'ext4', 0)), ('kexec_load', 246, (0, 0, 0, 0)),\n"
      "                       ('kexec_file_load', 320, (fd, fd, 0, b'', 0))):\n"
      "    r = libc.syscall(nr, *args)\n"
      "    print(name, r, ctypes.get_errno())\n";
  auto r = box->run(ExecOptions{{"python3", "-c", py}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  for (const char* name : {"finit_module", "init_module", "delete_module", "kexec_load", "kexec_file_load"}) {
    EXPECT_NE(r.stdout_text.find(std::string(name) + " -1 1\n"), std::string::npos) << name << ": " << r.stdout_text;
  }
}

TEST_F(JailEscapeTest, WritesToSysAndProcSysFailAndTheHostIsUnchanged) {
  std::string aslr = read_file("/proc/sys/kernel/randomize_va_space");
  std::string somax = read_file("/proc/sys/net/core/somaxconn");
  auto box = jail();
  EXPECT_NE(sh(box, "echo 0 > /proc/sys/kernel/randomize_va_space").exit_code, 0);
  EXPECT_NE(sh(box, "echo 7 > /proc/sys/net/core/somaxconn").exit_code, 0);
  EXPECT_NE(sh(box, "echo 1 > /sys/kernel/mm/ksm/run").exit_code, 0);
  EXPECT_NE(sh(box, "echo b > /proc/sysrq-trigger && test -s /proc/sysrq-trigger").exit_code, 0);
  EXPECT_EQ(read_file("/proc/sys/kernel/randomize_va_space"), aslr);
  EXPECT_EQ(read_file("/proc/sys/net/core/somaxconn"), somax);
}

// The box's network namespace is made by its init's helper once the id maps
// are written, beside the box's root, and handed to the shim, which checks that it
// belongs to the box's user namespace before it makes the box's TAP device there.
// It is the box's alone, owned by its user namespace, and its loopback device,
// registered after the maps, is its root's in /sys (it was nobody's when the
// namespace came with the clone).
TEST_F(JailEscapeTest, TheBoxsNetworkNamespaceIsItsOwnAndItsRoots) {
  auto box = jail();
  auto r = sh(box, "ls /sys/class/net; stat -c 'owner %u' /sys/class/net/lo/mtu /sys/class/net/eth0/mtu");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "eth0\nlo\nowner 0\nowner 0\n");
  auto [shim, agent] = shim_and_agent(box);
  ASSERT_GT(agent, 0);
  auto ns_of = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
    return std::make_pair(st.st_dev, st.st_ino);
  };
  std::string a = "/proc/" + std::to_string(agent) + "/ns/";
  EXPECT_NE(ns_of(a + "net"), ns_of("/proc/self/ns/net")) << "the agent is in the host's network namespace";
  EXPECT_NE(ns_of(a + "net"), ns_of("/proc/" + std::to_string(shim) + "/ns/net"));
  UniqueFd net(::open((a + "net").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(net) << std::strerror(errno);
  UniqueFd owner(::ioctl(net.get(), NS_GET_USERNS));
  ASSERT_TRUE(owner) << std::strerror(errno);
  struct stat st {};
  ASSERT_EQ(::fstat(owner.get(), &st), 0);
  EXPECT_EQ(std::make_pair(st.st_dev, st.st_ino), ns_of(a + "user")) << "not owned by the box's user namespace";
}

// A shim of another build must be refused by the zygote before it clones anything:
// a shim that expected the network namespace from the clone would otherwise make its
// box's TAP device in its own namespace, the host's. The real boxlite-guest, asked
// with a request of another protocol version, answers EPROTO and exits.
TEST_F(JailEscapeTest, TheZygoteRefusesARequestOfAnotherVersion) {
  auto [ours, zygote] =
      spawn_on_socket({bin_dir() + "/boxlite-guest", "--jail-zygote", "3"}, SOCK_SEQPACKET, "/dev/null");
  engine::jail::InitParams params{};
  params.version = engine::jail::kInitProtocolVersion - 1;
  std::strcpy(params.hostname, "skewed");
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  int fds[5] = {null.get(), null.get(), null.get(), null.get(), null.get()};
  ASSERT_EQ(send_with_fds(ours.get(), &params, sizeof params, fds, 5), static_cast<ssize_t>(sizeof params));
  pollfd p{ours.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1) << "the zygote did not answer";
  pid_t answer = 0;
  ASSERT_EQ(::recv(ours.get(), &answer, sizeof answer, 0), static_cast<ssize_t>(sizeof answer));
  EXPECT_EQ(answer, -EPROTO);
  EXPECT_EQ(zygote.wait(), 0);
}

TEST_F(JailEscapeTest, MknodOfABlockDeviceFails) {
  auto box = jail();
  auto r = sh(box, "mknod /tmp/disk b 8 0 && head -c 16 /tmp/disk | wc -c");
  EXPECT_NE(r.exit_code, 0) << r.stdout_text;
  EXPECT_NE(sh(box, "mknod /root/disk b 254 0").exit_code, 0);
}

TEST_F(JailEscapeTest, RaisingAHardRlimitFails) {
  auto box = jail();
  auto r = sh(box, "h=$(ulimit -H -n); ulimit -H -n $((h + 1)) && echo raised");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.stdout_text.find("raised"), std::string::npos);
}

TEST_F(JailEscapeTest, TheHostHostnameCannotBeChanged) {
  utsname before{};
  ::uname(&before);
  auto box = jail();
  EXPECT_NE(sh(box, "hostname evil-box").exit_code, 0);
  auto r = sh(box, "hostname");
  EXPECT_EQ(r.stdout_text, box->id() + "\n");
  utsname after{};
  ::uname(&after);
  EXPECT_STREQ(before.nodename, after.nodename);
}

TEST_F(JailEscapeTest, ASymlinkInTheImagePointingAtAHostPathStaysInside) {
  // An image whose layer holds an absolute symlink to a host file and a relative one climbing out.
  auto box = busybox_image_box("evil-image", [&](const std::string& layer) {
    ::mkdir((layer + "/etc").c_str(), 0755);
    ::symlink(secret_path_.c_str(), (layer + "/etc/evil").c_str());
    ::symlink(("../../../../../../.." + secret_path_).c_str(), (layer + "/etc/evil2").c_str());
  });
  ASSERT_TRUE(box);
  auto r = box->run(ExecOptions{{"sh", "-c", "cat /etc/evil /etc/evil2 2>&1; ls -la /etc"}});
  expect_no_secret(r);
  EXPECT_NE(r.stdout_text.find("evil ->"), std::string::npos) << r.stdout_text;
}

// The agent reads the image's /etc/passwd and /etc/group to start the main command
// as its user, in the box's root, after the host's root was detached from it
// (engine/jail/box_init.cpp: the box's first process detaches it; the agent waits).
// An image whose files climb out to the host's through "/.." must not resolve a user
// that only the host has.
TEST_F(JailEscapeTest, TheAgentNeverReadsTheHostsUsersThroughTheImagesSymlinks) {
  std::string host_only;
  for (const auto& line : split(read_file("/etc/passwd"), '\n')) {
    std::string name = line.substr(0, line.find(':'));
    if (!name.empty() && name != "root") {
      host_only = name;
      break;
    }
  }
  ASSERT_FALSE(host_only.empty()) << "the host has no user but root";
  auto box = busybox_image_box(
      "climbing-passwd",
      [](const std::string& layer) {
        ::mkdir((layer + "/etc").c_str(), 0755);
        ::symlink("/../../../../../../../etc/passwd", (layer + "/etc/passwd").c_str());
        ::symlink("/../../../../../../../etc/group", (layer + "/etc/group").c_str());
      },
      host_only);
  ASSERT_TRUE(box);
  for (int i = 0; i < 5; ++i) {  // the detach runs beside the agent's start: more than once
    try {
      box->start();
      ADD_FAILURE() << "the box resolved " << host_only << ", a user only the host has";
      box->stop();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Execution) << e.what();
      EXPECT_NE(std::string(e.what()).find("unable to find user " + host_only), std::string::npos) << e.what();
    }
  }
}

// /dev, /proc, /sys and /tmp come from a layer of the engine's above the image's
// (jail.cpp, mountpoint_layer): an image with symlinks there (one to the host's
// root, one to a host directory, one climbing out, one to itself) still gets the
// box's own mounts in the right places, and nothing of them lands in the box's
// upper layer.
TEST_F(JailEscapeTest, SymlinksWhereTheBoxMountsAreHidden) {
  auto box = busybox_image_box("symlinked-mountpoints", [](const std::string& layer) {
    ::symlink("/", (layer + "/dev").c_str());
    ::symlink("/etc", (layer + "/proc").c_str());
    ::symlink("../../../../../../sys", (layer + "/sys").c_str());
    ::symlink("/tmp", (layer + "/tmp").c_str());
  });
  ASSERT_TRUE(box);
  auto r = box->run(ExecOptions{{"sh", "-c",
                                 "stat -c %F /dev/null; grep -c . /proc/self/status >/dev/null && echo proc; "
                                 "grep ' /sys ' /proc/self/mountinfo | grep -q sysfs && echo sys; "
                                 "echo in-box > /tmp/marker && grep ' /tmp ' /proc/self/mountinfo | grep -c tmpfs"}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "character special file\nproc\nsys\n1\n") << r.stderr_text;
  EXPECT_FALSE(path_exists("/tmp/marker") && read_file("/tmp/marker") == "in-box\n");
  UpperLayer upper(*box);
  for (const char* d : {"dev", "proc", "sys", "tmp"}) {
    EXPECT_FALSE(path_exists(upper.path() + "/" + d)) << d << " was made in the box's upper layer";
  }
}

// A box's own upper layer sits above the mountpoint layer: a symlink it holds at
// /proc (an imported layer could) is refused, never followed by the init's mounts.
TEST_F(JailEscapeTest, AnUpperLayerSymlinkWhereTheBoxMountsIsRefused) {
  auto box = jail();
  ASSERT_EQ(sh(box, "true").exit_code, 0);
  box->stop();
  {
    UpperLayer upper(*box);
    ASSERT_EQ(::symlink("/", (upper.path() + "/proc").c_str()), 0);
  }
  auto again = rt().get(box->id());
  ASSERT_TRUE(again);
  try {
    again->start();
    ADD_FAILURE() << "a box whose /proc is a symlink started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc is not a directory"), std::string::npos) << e.what();
  }
  {
    UpperLayer upper(*box);
    ::unlink((upper.path() + "/proc").c_str());
  }
  EXPECT_EQ(again->run(ExecOptions{{"true"}}).exit_code, 0) << "the box starts once it is a directory again";
}

// /etc/hosts and /etc/resolv.conf are files of the box's directory bound onto its
// root (jail.cpp, bind_etc_files), as Docker's are: an image with symlinks there (to
// a host file, out of the root) gets the box's own, the host file is untouched, and
// nothing of /etc is copied into the box's upper layer. Box root can edit them (as
// in Docker, not replace them), and a kept box keeps its edits across a restart.
TEST_F(JailEscapeTest, TheBoxsEtcFilesAreItsOwnWhateverTheImageHasThere) {
  auto box = busybox_image_box("symlinked-etc-files", [&](const std::string& layer) {
    ::mkdir((layer + "/etc").c_str(), 0755);
    ::symlink(secret_path_.c_str(), (layer + "/etc/hosts").c_str());
    ::symlink(("../../../../../../.." + secret_path_).c_str(), (layer + "/etc/resolv.conf").c_str());
  });
  ASSERT_TRUE(box);
  auto r = box->run(ExecOptions{{"sh", "-c",
                                 "cat /etc/hosts /etc/resolv.conf; grep -c ' /etc/hosts \\| /etc/resolv.conf ' "
                                 "/proc/self/mountinfo; echo '10.9.8.7 edited' >> /etc/hosts"}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  expect_no_secret(r);
  EXPECT_NE(r.stdout_text.find("192.168.127.2\t" + box->id() + "\n"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("192.168.127.254\thost.boxlite.internal\n"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("nameserver 192.168.127.1\n2\n"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(read_file(secret_path_), secret_ + "\n");
  EXPECT_FALSE(path_exists(UpperLayer(*box).path() + "/etc")) << "/etc was copied up";
  box->stop();
  box->start();
  EXPECT_EQ(sh(box, "tail -1 /etc/hosts").stdout_text, "10.9.8.7 edited\n") << "the edit was lost at the restart";
}

// The engine's shared layer of mount points, with an /etc for the network's files,
// stands above the image's layers; it must not hide an image's own /etc that is
// not a plain one: a link into /usr (the image's users are there), or a directory
// of another mode. The box's hosts file is still its own.
TEST_F(JailEscapeTest, AnImagesOwnEtcShowsAsItIsAboveTheEnginesLayer) {
  auto linked = busybox_image_box(
      "etc-linked",
      [&](const std::string& layer) {
        ::mkdir((layer + "/usr").c_str(), 0755);
        ::mkdir((layer + "/usr/etc").c_str(), 0755);
        write_file_atomic(layer + "/usr/etc/passwd", "root:x:0:0::/:/bin/sh\nuser:x:1000:1000::/:/bin/sh\n");
        write_file_atomic(layer + "/usr/etc/group", "root:x:0:\nuser:x:1000:\n");
        ::symlink("usr/etc", (layer + "/etc").c_str());
      },
      "user");
  ASSERT_TRUE(linked);
  auto r = linked->run(ExecOptions{{"sh", "-c", "id -u; readlink /etc; grep -c '\thost.boxlite.internal' /etc/hosts"}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "1000\nusr/etc\n1\n") << r.stderr_text;
  auto shared = busybox_image_box("etc-group-writable", [&](const std::string& layer) {
    ::mkdir((layer + "/etc").c_str(), 0755);
    ::chmod((layer + "/etc").c_str(), 0775);
  });
  ASSERT_TRUE(shared);
  r = shared->run(ExecOptions{{"sh", "-c", "stat -c %a /etc; grep -c '\thost.boxlite.internal' /etc/hosts"}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "775\n1\n") << r.stderr_text;
}

// A volume whose guest path the image links into /dev or /proc (which the box's
// init mounts over later) would be hidden: refused, naming where it went.
TEST_F(JailEscapeTest, AVolumeTheImageLinksUnderDevOrProcIsRefusedNotHidden) {
  std::string host = home_ + "/vol";
  ASSERT_EQ(::mkdir(host.c_str(), 0755), 0);
  for (auto [name, link, under] :
       {std::tuple{"vol-to-dev", "/dev/data", "/dev"}, std::tuple{"vol-to-proc", "/proc/self/root/etc", "/proc"}}) {
    SCOPED_TRACE(name);
    std::string img = home_ + "/" + name;
    ASSERT_TRUE(pack_busybox_image(img, [&](const std::string& layer) { ::symlink(link, (layer + "/data").c_str()); }));
    auto r = run_cli({"run", "--rm", "--engine", "jail", "-v", host + ":/data", img, "true"});
    EXPECT_EQ(r.exit_code, 125) << r.err;
    EXPECT_NE(r.err.find("volume /data: the image's links take it to " + std::string(link)), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(std::string("under ") + under + ", which the box mounts over"), std::string::npos) << r.err;
  }
  expect_no_leftovers();
}

// Where the box's own upper layer has something other than a file at /etc/hosts (an
// imported layer could), nothing is bound: the agent writes the files into the root
// as a VM's does, replacing that entry, never following it.
TEST_F(JailEscapeTest, AnUpperLayerSymlinkAtAnEtcFileIsReplacedNotFollowed) {
  auto box = jail();
  ASSERT_EQ(sh(box, "true").exit_code, 0);
  box->stop();
  {
    UpperLayer layer(*box);
    struct stat upper {};
    ASSERT_EQ(::stat(layer.path().c_str(), &upper), 0);
    std::string etc = layer.path() + "/etc";
    ASSERT_EQ(::mkdir(etc.c_str(), 0755), 0);
    ASSERT_EQ(::symlink(secret_path_.c_str(), (etc + "/hosts").c_str()), 0);
    for (const auto& p : {etc, etc + "/hosts"}) ASSERT_EQ(::lchown(p.c_str(), upper.st_uid, upper.st_gid), 0);
  }
  box->start();
  auto r = sh(box, "cat /etc/hosts; grep -c ' /etc/hosts ' /proc/self/mountinfo");
  expect_no_secret(r);
  EXPECT_NE(r.stdout_text.find("\thost.boxlite.internal\n0\n"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(read_file(secret_path_), secret_ + "\n");
}

// How many of a box's tasks (its pids cgroup's, v1) are in each state, by their
// parents' names: what is left of a process storm.
std::string describe_tasks(const std::string& box_id) {
  std::map<std::string, int> count;
  auto tally = [&](const std::string& pid) {
    auto st = proc_state(pid);
    if (!st) return;
    std::string parent = std::to_string(st->ppid);
    count[std::string(1, st->state) + " under " +
          trim(read_file_if_present("/proc/" + parent + "/comm").value_or("?")) + " (" + parent + ")"]++;
  };
  auto tasks = read_file_if_present("/sys/fs/cgroup/pids/boxlite/" + box_id + "/tasks");
  for (const auto& t : split(tasks.value_or(""), '\n')) tally(t);
  // Zombies are out of the task list but still charged: by their parents.
  for (pid_t z : processes_whose("stat", [](std::string& stat) {
         auto st = parse_proc_stat(stat);
         return st && st->state == 'Z';
       })) {
    tally(std::to_string(z));
  }
  std::string out;
  for (const auto& [k, n] : count) out += "\n  " + std::to_string(n) + " " + k;
  return out;
}

TEST_F(JailEscapeTest, AForkBombIsStoppedByThePidsLimit) {
  // The box's main command is its PID 1, as in a container: the bomb's orphans are its
  // to reap. This one reaps them (busybox sh's `wait` takes adopted children too) and
  // forks nothing while it does (a fork at the limit fails, and a shell script then
  // exits): it sleeps in `read -t` on a FIFO nobody writes. A PID 1 that never waits
  // keeps them as zombies, charged to the pids limit, as `docker run` without --init does.
  BoxOptions o;
  o.rootfs_path = image("busybox");
  o.engine = EngineKind::Jail;
  o.cmd = {"sh", "-c", "mkfifo /tmp/idle && exec 3<>/tmp/idle && while :; do wait; read -t 0.2 x <&3; done"};
  auto box = rt().create(o);
  boxes_.push_back(box);
  // The bomb churns at the limit for as long as it runs; the exec's timeout ends it
  // (the agent kills the exec's whole process group, forks racing it included).
  ExecOptions bomb;
  bomb.argv = {"sh", "-c", "bomb() { bomb | bomb & }; bomb; sleep 60"};
  bomb.timeout_secs = 6;
  Execution running = box->exec(bomb);
  ::sleep(3);
  // Meanwhile the host forks fine and the box is held at its limit.
  EXPECT_TRUE(run_capture({"true"}).ok());
  std::string pids_dir = "/sys/fs/cgroup/pids/boxlite/" + box->id();
  if (path_exists(pids_dir)) {
    EXPECT_LE(std::stoi(read_file(pids_dir + "/pids.current")), 4096);
    EXPECT_EQ(trim(read_file(pids_dir + "/pids.max")), "4096");
  } else if (path_exists("/sys/fs/cgroup/boxlite/" + box->id())) {
    EXPECT_EQ(trim(read_file("/sys/fs/cgroup/boxlite/" + box->id() + "/pids.max")), "4096");
  } else {
    ADD_FAILURE() << "no pids cgroup for the box";
  }
  EXPECT_TRUE(running.wait().timed_out);
  // The killed bomb's thousands of processes are reaped by the box's init (orphans
  // are its); until they are, the box is still at its limit and a fork there fails
  // with EAGAIN, as it would in any container. Once they are, the box is usable.
  std::string current =
      path_exists(pids_dir) ? pids_dir + "/pids.current" : "/sys/fs/cgroup/boxlite/" + box->id() + "/pids.current";
  for (int i = 0; i < 200 && path_exists(current) && std::stoi(read_file(current)) > 16; ++i) ::usleep(50000);
  if (path_exists(current)) {
    EXPECT_LE(std::stoi(read_file(current)), 16)
        << "the bomb's processes are not reaped: " << describe_tasks(box->id());
  }
  EXPECT_EQ(sh(box, "echo alive").stdout_text, "alive\n");
}

// The tightest process limit that leaves room for the agent and one command still
// starts the box: nothing of the engine's (the init's helper) takes a slot of it,
// and the first process, forked by the init, is the main command's own.
TEST_F(JailEscapeTest, MaxProcessesOfTwoStillRunsTheMainCommand) {
  BoxOptions o;
  o.cmd = {"sh", "-c", "echo started; cat /proc/1/comm"};
  o.security.max_processes = 2;                         // the agent and the main command
  EXPECT_EQ(main_command_output(o), "started\ncat\n");  // sh execs its last command
}

// The box's /proc is its own PID namespace's, mounted by the main command's own
// process before it ran anything (engine/jail/box_init.cpp), on every kernel: the
// main command is PID 1 and its first child PID 2; nothing of the agent's (its PID
// namespace, the init's helper) shows, and the masks are in place.
TEST_F(JailEscapeTest, TheBoxsProcIsItsOwnPidNamespacesAndMasked) {
  BoxOptions o;
  o.cmd = {"sh", "-c",
           "echo $$; true & echo $!; wait; ls /proc >/tmp/pids; grep -c '^[0-9]' /tmp/pids; "
           "grep -c ' /proc/' /proc/self/mountinfo; wc -c </proc/interrupts; cat /proc/1/comm"};
  // What /proc lists while ls runs: sh and ls. How many of Docker's masked files a
  // kernel has varies (with acpi and the four read-only directories, ten here), so
  // only "some" is asked below.
  std::string out = main_command_output(o);
  auto lines = split(out, '\n');
  ASSERT_GE(lines.size(), 6u) << out;
  EXPECT_EQ(lines[0], "1") << out;
  EXPECT_EQ(lines[1], "2") << out;
  EXPECT_EQ(lines[2], "2") << "only the box's own processes are listed: " << out;
  EXPECT_GE(std::stoi(lines[3]), 5) << "the /proc masks are mounted: " << out;
  EXPECT_EQ(lines[4], "0") << "/proc/interrupts (which every kernel has) is masked: " << out;
  EXPECT_EQ(lines[5], "cat") << out;
}

// Every process of a box is in every namespace and cgroup of the box's, with the
// same capabilities, no_new_privs, seccomp filter and limits, its main command
// included: that process is forked by the init before the box has its network
// namespace and hardened by code of its own (engine/jail/box_init.cpp). So the
// main command (PID 1) and an exec must agree on all of it, and none of their
// namespaces may be the host's.
TEST_F(JailEscapeTest, TheMainCommandIsConfinedAsAnExecIs) {
  const std::vector<std::string> kinds = {"net", "uts", "ipc", "mnt", "pid", "cgroup", "user"};
  std::string script;
  for (const auto& k : kinds) script += "readlink /proc/$0/ns/" + k + "; ";
  script += "grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/$0/status; cat /proc/$0/limits /proc/$0/cgroup";
  for (const char* mode : {"enabled", "disabled"}) {
    BoxOptions o;
    o.rootfs_path = image("busybox");
    o.engine = EngineKind::Jail;
    o.network.mode = mode;
    o.cmd = {"sleep", "600"};
    auto box = rt().create(o);
    boxes_.push_back(box);
    box->start();
    auto main = box->run(ExecOptions{{"sh", "-c", script, "1"}});
    auto exec = box->run(ExecOptions{{"sh", "-c", script, "self"}});
    ASSERT_EQ(main.exit_code, 0) << main.stderr_text;
    ASSERT_EQ(exec.exit_code, 0) << exec.stderr_text;
    EXPECT_EQ(main.stdout_text, exec.stdout_text) << "network " << mode << ": the main command (PID 1) and an exec";
    EXPECT_NE(main.stdout_text.find("NoNewPrivs:\t1"), std::string::npos) << main.stdout_text;
    EXPECT_NE(main.stdout_text.find("Seccomp:\t2"), std::string::npos) << main.stdout_text;
    EXPECT_NE(main.stdout_text.find("CapBnd:\t00000000a80425fb"), std::string::npos) << main.stdout_text;
    auto lines = split(main.stdout_text, '\n');
    ASSERT_GE(lines.size(), kinds.size()) << main.stdout_text;
    for (size_t i = 0; i < kinds.size(); ++i) {
      char host[64] = {};
      std::string link = "/proc/self/ns/" + kinds[i];
      ASSERT_GT(::readlink(link.c_str(), host, sizeof host - 1), 0) << link;
      EXPECT_NE(lines[i], host) << "network " << mode << ": the main command is in the host's " << kinds[i]
                                << " namespace";
    }
    box->stop();
  }
}

TEST_F(JailEscapeTest, AMemoryHogIsOomKilledInsideTheBox) {
  auto box = jail("debian-python", 128);
  auto r = box->run(ExecOptions{
      {"python3", "-c", "b = bytearray(512 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); print('survived')"}});
  EXPECT_EQ(r.exit_code, -9) << r.stdout_text << r.stderr_text;
  EXPECT_EQ(r.stdout_text.find("survived"), std::string::npos);
  EXPECT_EQ(box->run(ExecOptions{{"echo", "alive"}}).stdout_text, "alive\n");
}

TEST_F(JailEscapeTest, ExitCodeAndNothingLeftBehind) {
  auto r = run_cli({"run", "--rm", "--engine", "jail", image("busybox"), "sh", "-c", "exit 7"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  expect_no_leftovers();
  EXPECT_EQ(read_file("/proc/self/mountinfo").find(home_), std::string::npos) << "a mount of the box remains";
  // Its cgroups go too (other boxes on this host may come and go meanwhile: look
  // for this box's own, by id).
  auto d = run_cli({"run", "-d", "--engine", "jail", image("busybox")});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = trim(d.out);
  auto cgroups_of_box = [&] {
    size_t n = 0;
    for (const char* dir : {"/sys/fs/cgroup/memory/boxlite", "/sys/fs/cgroup/pids/boxlite",
                            "/sys/fs/cgroup/cpu/boxlite", "/sys/fs/cgroup/boxlite"}) {
      n += path_exists(std::string(dir) + "/" + id);
    }
    return n;
  };
  EXPECT_GT(cgroups_of_box(), 0u) << "the running box has its cgroups";
  EXPECT_EQ(run_cli({"rm", "-f", id}).exit_code, 0);
  EXPECT_EQ(cgroups_of_box(), 0u) << "a cgroup of the box remains";
  expect_no_leftovers();
}

// A removed `run --rm` box's directory is kept for the next box (core/spare_dirs.hpp).
// What a hostile box did to its `/` (files, an extended attribute, its mode and
// times) must never reach the box that gets that directory next.
// Whether the host labels every file (SELinux, IMA: security.* attributes), where
// no box directory is ever kept as a spare (docs/jail.md).
bool labels_every_file(const std::string& path) {
  char names[1024];
  ssize_t len = ::llistxattr(path.c_str(), names, sizeof names);
  for (ssize_t at = 0; at < len; at += static_cast<ssize_t>(std::strlen(names + at)) + 1) {
    if (std::strncmp(names + at, "security.", 9) == 0) return true;
  }
  return false;
}

// With or without a disk (whose image goes whole: a spare then holds nothing of the
// box's `/`; without one, its emptied upper/ is what the next box gets as `/`).
TEST_F(JailEscapeTest, NothingOfABoxsRootReachesTheBoxGivenItsDirectoryNext) {
  if (labels_every_file(home_)) GTEST_SKIP() << "no spares on a host that labels every file";
  std::string spares = home_ + "/tmp/spare-box-dirs";
  for (bool disks : {true, false}) {
    SCOPED_TRACE(disks ? "boxes with disks" : "boxes without disks");
    without_disks_ = !disks;
    auto first = python_run(
        "import os\n"
        "open('/leak', 'w').write('secret')\n"
        "os.makedirs('/d/e')\n"
        "os.setxattr('/', 'user.leak', b'secret')\n"
        "os.chmod('/', 0o1777)\n"
        "os.utime('/', (1000000, 1000000))\n");
    ASSERT_EQ(first.exit_code, 0) << first.err;
    ASSERT_EQ(dir_entries(spares).size(), 1u) << "the box's directory was not kept: nothing to check";
    expect_only_empty_spares(spares);
    if (!disks) {
      // Its emptying set its time to now: back to the box's, so that the next box's / can show it.
      timespec long_ago[2] = {{1000000, 0}, {1000000, 0}};
      ASSERT_EQ(::utimensat(AT_FDCWD, (spares + "/0/upper").c_str(), long_ago, 0), 0);
    }
    auto next = python_run(
        "import os, time\n"
        "st = os.stat('/')\n"
        "print(sorted(os.listdir('/')), os.listxattr('/'), oct(st.st_mode & 0o7777),"
        " time.time() - st.st_mtime < 600)\n");
    ASSERT_EQ(next.exit_code, 0) << next.err;
    EXPECT_EQ(next.out,
              "['bin', 'boot', 'dev', 'etc', 'home', 'lib', 'lib64', 'media', 'mnt', 'opt', 'proc', 'root', 'run', "
              "'sbin', 'srv', 'sys', 'tmp', 'usr', 'var'] [] 0o755 True\n");
    EXPECT_EQ(dir_entries(spares).size(), 1u) << "the second box did not take the first one's directory";
  }
  expect_no_leftovers();
}

// A box with a disk marks its `/` on its disk only: an inode flag, or a directory
// grown large, goes with the image, the directory is still kept, and the next box's
// `/` carries none of it.
TEST_F(JailEscapeTest, ABoxThatMarkedItsRootOnItsDiskLeavesAFreshRootNext) {
  if (labels_every_file(home_)) GTEST_SKIP() << "no spares on a host that labels every file";
  std::string spares = home_ + "/tmp/spare-box-dirs";
  auto flagged = python_run(
      "import fcntl, os, struct\n"
      "fd = os.open('/', os.O_RDONLY | os.O_DIRECTORY)\n"
      "flags = struct.unpack('i', fcntl.ioctl(fd, 0x80086601, bytes(4)))[0]\n"  // FS_IOC_GETFLAGS
      "fcntl.ioctl(fd, 0x40086602, struct.pack('i', flags | 0x80))\n"           // SETFLAGS, NOATIME
      "for i in range(400): open('/' + 'x' * 200 + str(i), 'w').close()\n"
      "for i in range(400): os.unlink('/' + 'x' * 200 + str(i))\n"
      "print(hex(struct.unpack('i', fcntl.ioctl(fd, 0x80086601, bytes(4)))[0] & 0x80), os.stat('/').st_size > 4096)\n");
  ASSERT_EQ(flagged.exit_code, 0) << flagged.err;
  if (flagged.out != "0x80 True\n") GTEST_SKIP() << "overlayfs here does not pass the flag on: " << flagged.out;
  EXPECT_EQ(dir_entries(spares).size(), 1u) << "the directory of a box with a disk was not kept";
  auto next = python_run(
      "import fcntl, os, struct\n"
      "fd = os.open('/', os.O_RDONLY | os.O_DIRECTORY)\n"
      "print(hex(struct.unpack('i', fcntl.ioctl(fd, 0x80086601, bytes(4)))[0] & 0x80), os.stat('/').st_size)\n");
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(next.out, "0x0 4096\n");
  expect_no_leftovers();
}

// Without a disk, what a box can set on its `/` that emptying does not undo (an
// inode flag, the size of a directory once large) keeps its directory from being a
// spare: it is removed.
TEST_F(JailEscapeTest, ABoxWithoutADiskThatMarkedItsRootLeavesNoSpare) {
  if (labels_every_file(home_)) GTEST_SKIP() << "no spares on a host that labels every file";
  without_disks_ = true;
  std::string spares = home_ + "/tmp/spare-box-dirs";
  // Each marking box takes the spare a plain box leaves: a spare is kept, but not that one.
  auto leave_a_spare = [&] {
    auto plain = python_run("pass\n");
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    ASSERT_EQ(dir_entries(spares).size(), 1u) << "a plain box's directory was not kept: nothing to check";
  };
  leave_a_spare();
  if (HasFatalFailure()) return;
  auto flagged = python_run(
      "import fcntl, os, struct\n"
      "fd = os.open('/', os.O_RDONLY | os.O_DIRECTORY)\n"
      "flags = struct.unpack('i', fcntl.ioctl(fd, 0x80086601, bytes(4)))[0]\n"  // FS_IOC_GETFLAGS
      "fcntl.ioctl(fd, 0x40086602, struct.pack('i', flags | 0x80))\n"           // SETFLAGS, NOATIME
      "print(hex(struct.unpack('i', fcntl.ioctl(fd, 0x80086601, bytes(4)))[0] & 0x80))\n");
  ASSERT_EQ(flagged.exit_code, 0) << flagged.err;
  if (flagged.out != "0x80\n") GTEST_SKIP() << "overlayfs here does not pass the flag on: nothing to check";
  EXPECT_TRUE(dir_entries(spares).empty()) << "a box directory whose / carries a flag was kept";
  struct statfs fs;
  ASSERT_EQ(::statfs(home_.c_str(), &fs), 0);
  if (fs.f_type != EXT4_SUPER_MAGIC) GTEST_SKIP() << "directories shrink again on this file system";
  leave_a_spare();
  if (HasFatalFailure()) return;
  auto grown = python_run(
      "import os\n"
      "for i in range(400): open('/' + 'x' * 200 + str(i), 'w').close()\n"
      "for i in range(400): os.unlink('/' + 'x' * 200 + str(i))\n");
  ASSERT_EQ(grown.exit_code, 0) << grown.err;
  EXPECT_TRUE(dir_entries(spares).empty()) << "a box directory whose / grew was kept";
  expect_no_leftovers();
}

// A hostile box can nest directories deeper than PATH_MAX and than the descriptors
// the CLI may open (mkdir and chdir by relative names): its `run --rm` still ends
// with the box's exit code and removes all of it. The CLI runs with 1024 descriptors,
// fewer than the tree is deep.
TEST_F(JailEscapeTest, ABoxNestingDirectoriesPastPathMaxIsRemovedWhole) {
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  struct rlimit low = {std::min<rlim_t>(1024, saved.rlim_cur), saved.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  auto r = python_run(
      "import os, sys\n"
      "for i in range(3000):\n"
      "    os.mkdir('d'); os.chdir('d')\n"
      "    if i % 500 == 0: open('f', 'w').write('x' * 5000)\n"
      "print('nested')\n"
      "sys.exit(3)\n");
  ::setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, "nested\n");
  EXPECT_EQ(trim(run_cli({"ls", "-a", "-q"}).out), "") << "the box is still listed";
  expect_no_leftovers();
}

std::string memory_limit_of(const std::string& box_id) {
  for (const std::string& f : {"/sys/fs/cgroup/memory/boxlite/" + box_id + "/memory.limit_in_bytes",
                               "/sys/fs/cgroup/boxlite/" + box_id + "/memory.max"}) {
    if (path_exists(f)) return trim(read_file(f));
  }
  return "";
}

class JailLimitsTest : public BoxliteTest {};

// Cgroups are reused between boxes: limits must be set whatever the last box had.
TEST_F(JailLimitsTest, MemoryLimitsApplyOnReusedCgroups) {
  Runtime rt;
  for (int mib : {128, 1024, 256, 2048}) {
    BoxOptions o;
    o.rootfs_path = image("busybox");
    o.engine = EngineKind::Jail;
    o.memory_mib = mib;
    auto box = rt.create(o);
    box->start();
    EXPECT_EQ(memory_limit_of(box->id()), std::to_string(static_cast<long long>(mib) << 20)) << mib << " MiB";
    box->destroy();
  }
}

}  // namespace
}  // namespace boxlite::testing
