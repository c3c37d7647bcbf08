// Shared fixture of the integration tests: a throwaway BOXLITE_HOME, the real CLI
// binary, the offline test images, and cleanup of every process a test started.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/io.hpp"
#include "common/process.hpp"
#include "core/runtime.hpp"
#include "engine/jail/disk.hpp"
#include "engine/jail/jail.hpp"
#include "engine/spec.hpp"

namespace boxlite::testing {

inline std::string bin_dir() { return BOXLITE_BIN_DIR; }
inline std::string cli() { return bin_dir() + "/boxlite"; }
inline std::string image(const std::string& name) {
  std::string p = bin_dir() + "/test-images/" + name;
  if (!path_exists(p + "/index.json")) {
    ADD_FAILURE() << "test image missing: " << p << " (run ./scripts/setup)";
  }
  return p;
}

// Pids of the processes (not this one) whose /proc/PID/<file> satisfies `match`.
inline std::vector<pid_t> processes_whose(const char* file, const std::function<bool(std::string&)>& match) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || pid == ::getpid()) continue;
    std::string text;
    try {
      text = read_file("/proc/" + std::string(e->d_name) + "/" + file);
    } catch (const Error&) {
      continue;
    }
    if (match(text)) out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

// A one-layer OCI image laid out at `img`: the host's busybox as /bin/busybox, with
// every busybox applet the tests use linked to it in /bin, then whatever `add` puts
// in the layer (its directory, `img` + "-layer"). False (with a failure) if it
// cannot be made.
inline bool pack_busybox_image(const std::string& img, const std::function<void(const std::string&)>& add) {
  std::string layer = img + "-layer";
  if (run_capture({"mkdir", "-p", layer + "/bin"}).status != 0 ||
      run_capture({"cp", which("busybox"), layer + "/bin/busybox"}).status != 0) {
    ADD_FAILURE() << "cannot lay out " << layer;
    return false;
  }
  for (const char* applet : {"sh", "cat", "ls", "stat", "grep", "echo", "id", "readlink", "test"}) {
    ::symlink("busybox", (layer + "/bin/" + applet).c_str());
  }
  add(layer);
  auto pack = run_capture({"python3", std::string(BOXLITE_SOURCE_DIR) + "/scripts/oci-pack.py", img, "latest",
                           R"({"Env":["PATH=/bin"],"Cmd":["sh"]})", layer});
  if (!pack.ok()) ADD_FAILURE() << pack.err;
  return pack.ok();
}

// A process's state letter and parent, from the text of its /proc/PID/stat ("pid (comm)
// S ppid ...": comm may hold spaces and parentheses); nullopt for text that is not one.
struct ProcState {
  char state;
  pid_t ppid;
};
inline std::optional<ProcState> parse_proc_stat(const std::string& stat) {
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return std::nullopt;
  return ProcState{stat[close + 2], static_cast<pid_t>(std::atoi(stat.c_str() + close + 4))};
}
inline std::optional<ProcState> proc_state(const std::string& pid) {
  auto stat = read_file_if_present("/proc/" + pid + "/stat");
  return stat ? parse_proc_stat(*stat) : std::nullopt;
}

// What a leak check found: each process's command line, state and where it sleeps, and
// the same for its children (a shim waiting on its box's init, say).
inline std::string describe_processes(const std::vector<pid_t>& pids) {
  auto field = [](pid_t pid, const std::string& file) {
    try {
      std::string t = read_file("/proc/" + std::to_string(pid) + "/" + file);
      for (auto& c : t) c = c == '\0' || c == '\n' ? ' ' : c;
      return t;
    } catch (const Error&) {
      return std::string("?");
    }
  };
  std::string out;
  for (pid_t pid : pids) {
    out += "\n  " + std::to_string(pid) + " [" + field(pid, "wchan") + "] " + field(pid, "cmdline");
    for (pid_t child : processes_whose("stat", [&](std::string& stat) {
           auto st = parse_proc_stat(stat);
           return st && st->ppid == pid;
         })) {
      out += "\n    child " + std::to_string(child) + " [" + field(child, "wchan") + "] " + field(child, "cmdline");
    }
  }
  return out;
}

// Pids of processes whose command line mentions `needle` (QEMU and shims of a home).
inline std::vector<pid_t> processes_mentioning(const std::string& needle) {
  return processes_whose("cmdline", [&](std::string& cmdline) {
    for (auto& c : cmdline) c = c == '\0' ? ' ' : c;
    return cmdline.find(needle) != std::string::npos;
  });
}

// The children of `pid` (its main thread's), as /proc lists them.
// `argv` spawned with one end of a socketpair of `type` as its fd 3 and its output
// to `output`; `ours` is the other end.
struct ChildOnSocket {
  UniqueFd ours;
  Child child;
};
inline ChildOnSocket spawn_on_socket(std::vector<std::string> argv, int type, const std::string& output) {
  int sv[2];
  if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) != 0) throw_errno(ErrorKind::Internal, "socketpair");
  UniqueFd ours(sv[0]), theirs(sv[1]);
  SpawnOptions so;
  so.argv = std::move(argv);
  so.fds = {{theirs.get(), 3}};
  so.stdout_path = so.stderr_path = output;
  Child child = spawn(so);
  return {std::move(ours), std::move(child)};
}

inline std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  try {
    std::string id = std::to_string(pid);
    for (const auto& c : split(trim(read_file("/proc/" + id + "/task/" + id + "/children")), ' ')) {
      if (!c.empty()) out.push_back(static_cast<pid_t>(std::atoi(c.c_str())));
    }
  } catch (const Error&) {
  }
  return out;
}

// /proc/PID/stat: the command name, then the fields after it ([0] is the state,
// [1] the parent, [19] the start time in clock ticks since boot).
struct ProcStat {
  std::string comm;
  std::vector<std::string> fields;
};
inline ProcStat parse_stat(const std::string& stat) {
  auto open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 > stat.size()) return {};
  return {stat.substr(open + 1, close - open - 1), split(stat.substr(close + 2), ' ')};
}
// A process's stat fields; empty if it is gone.
inline std::vector<std::string> stat_fields(pid_t pid) {
  try {
    return parse_stat(read_file("/proc/" + std::to_string(pid) + "/stat")).fields;
  } catch (const Error&) {
    return {};
  }
}

// Now, in the clock ticks of a process's start time.
inline unsigned long long boot_ticks_now() {
  double up = std::stod(read_file("/proc/uptime"));
  return static_cast<unsigned long long>(up * static_cast<double>(::sysconf(_SC_CLK_TCK)));
}

// Processes named `comm` (zombies too) whose parent died, started at `since`
// (boot_ticks_now()) or later: what a dead process left behind.
inline std::vector<pid_t> orphans_named(const std::string& comm, unsigned long long since) {
  return processes_whose("stat", [&](std::string& stat) {
    ProcStat p = parse_stat(stat);
    return p.comm == comm && p.fields.size() > 19 && p.fields[1] == "1" && std::stoull(p.fields[19]) >= since;
  });
}

// Those of them whose command line starts with `argv0_prefix`: a test that runs the
// programs from a directory of its own (BOXLITE_LIBEXEC_DIR) sees only its own,
// whatever the tests running beside it leave for a moment.
inline std::vector<pid_t> orphans_named(const std::string& comm, unsigned long long since,
                                        const std::string& argv0_prefix) {
  std::vector<pid_t> out;
  for (pid_t pid : orphans_named(comm, since)) {
    try {
      if (read_file("/proc/" + std::to_string(pid) + "/cmdline").rfind(argv0_prefix, 0) == 0) out.push_back(pid);
    } catch (const Error&) {
    }
  }
  return out;
}

// Pids of processes whose environment holds `entry` (NAME=value): everything the
// tests start inherits BOXLITE_HOME, even a shim whose command line names no box.
inline std::vector<pid_t> processes_with_env(const std::string& entry) {
  return processes_whose("environ", [&](std::string& env) {
    auto vars = split(env, '\0');
    return std::find(vars.begin(), vars.end(), entry) != vars.end();
  });
}

inline int count_comm(const std::string& comm) {
  int n = 0;
  DIR* d = ::opendir("/proc");
  if (!d) return 0;
  while (auto* e = ::readdir(d)) {
    if (std::atoi(e->d_name) <= 0) continue;
    try {
      if (trim(read_file("/proc/" + std::string(e->d_name) + "/comm")) == comm) ++n;
    } catch (const Error&) {
    }
  }
  ::closedir(d);
  return n;
}

// A real terminal for interactive CLI tests: a detached tmux session.
class TmuxSession {
 public:
  TmuxSession(const std::string& socket, const std::string& command, int cols, int rows) : socket_(socket) {
    started_ = run_capture({"tmux", "-S", socket_, "new-session", "-d", "-x", std::to_string(cols), "-y",
                            std::to_string(rows), command})
                   .ok();
  }
  ~TmuxSession() { run_capture({"tmux", "-S", socket_, "kill-server"}); }
  TmuxSession(const TmuxSession&) = delete;
  TmuxSession& operator=(const TmuxSession&) = delete;
  bool started() const { return started_; }
  std::string screen() const { return run_capture({"tmux", "-S", socket_, "capture-pane", "-p"}).out; }
  // The screen once it shows `text`, or after `seconds` whatever it shows.
  std::string wait_for(const std::string& text, double seconds = 10) const {
    std::string s = screen();
    for (int i = 0; i < seconds * 10 && s.find(text) == std::string::npos; ++i) {
      ::usleep(100000);
      s = screen();
    }
    return s;
  }
  void type_line(const std::string& text) const { run_capture({"tmux", "-S", socket_, "send-keys", text, "Enter"}); }

 private:
  std::string socket_;
  bool started_ = false;
};

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

class BoxliteTest : public ::testing::Test {
 protected:
  // The home exists before any member of a derived fixture (such as a Runtime) is
  // built, so no test ever opens the real ~/.boxlite.
  BoxliteTest() {
    char tmpl[] = "/tmp/blt-XXXXXX";  // short: unix socket paths are limited to 107 bytes
    if (::mkdtemp(tmpl)) home_ = tmpl;
    ::setenv("BOXLITE_HOME", home_.c_str(), 1);
    ::setenv("BOXLITE_ACCEL", "tcg", 1);  // KVM is unusable on these machines (DESIGN.md)
  }
  void SetUp() override {
    ASSERT_FALSE(home_.empty()) << "mkdtemp failed";
    ::setenv("BOXLITE_HOME", home_.c_str(), 1);
    ::setenv("BOXLITE_ACCEL", "tcg", 1);
  }

  void TearDown() override {
    ::unsetenv("BOXLITE_ENGINE");       // some tests choose one
    ::unsetenv("BOXLITE_LIBEXEC_DIR");  // and their programs' directory
    // Whatever a failed test left running goes now; then the home.
    for (int attempt = 0; attempt < 50; ++attempt) {
      auto pids = processes_mentioning(home_);
      if (pids.empty()) break;
      for (pid_t p : pids) ::kill(p, SIGKILL);
      ::usleep(100000);
    }
    // A shim killed above could not retire its jail box's cgroups.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(home_ + "/boxes", ec)) {
      engine::jail::remove_cgroups(e.path().filename().string());
    }
    try {
      remove_tree(home_);
    } catch (const Error&) {
    }
  }

  CliResult run_cli(std::vector<std::string> args) { return run_cli_under({}, std::move(args)); }

  // The CLI run by `wrapper` (a program that then execs the rest of its command line).
  CliResult run_cli_under(std::vector<std::string> wrapper, std::vector<std::string> args) {
    args.insert(args.begin(), cli());
    args.insert(args.begin(), wrapper.begin(), wrapper.end());
    RunResult r = run_capture(args);
    CliResult c;
    c.exit_code = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : 128 + WTERMSIG(r.status);
    c.out = r.out;
    c.err = r.err;
    return c;
  }

  // Nothing of this home may be left running, and no box directory may remain, nor
  // a loop device of a box's disk or a mount of the home's in this namespace.
  void expect_no_leftovers() {
    for (int i = 0; i < 100 && !processes_mentioning(home_).empty(); ++i) ::usleep(50000);
    EXPECT_TRUE(processes_mentioning(home_).empty())
        << "processes of " << home_ << " still running:" << describe_processes(processes_mentioning(home_));
    EXPECT_TRUE(dir_entries(home_ + "/boxes").empty()) << "box directories left in " << home_;
    expect_no_loop_devices_or_mounts();
    for (const auto& e : dir_entries(home_ + "/tmp")) {
      // The KVM probe's verdict, and where each jail shim mounts its box's root and
      // its disk in its own namespace: they stay, empty.
      if (e == "jail-root" || e == "jail-disk") {
        EXPECT_TRUE(dir_entries(home_ + "/tmp/" + e).empty()) << "files under " << home_ << "/tmp/" << e;
        continue;
      }
      // Removed jail boxes' directories kept for the next box: nothing of any box.
      if (e == "spare-box-dirs") {
        expect_only_empty_spares(home_ + "/tmp/spare-box-dirs");
        continue;
      }
      EXPECT_TRUE(e.rfind("kvm-probe", 0) == 0) << "temporary entry left: " << home_ << "/tmp/" << e;
    }
  }

  // A box's disk is released (its loop device detached, engine/jail/disk.hpp) as the
  // last reference to its file system goes, which may be a moment after its shim.
  void expect_no_loop_devices_or_mounts() {
    for (int i = 0; i < 100 && !loop_devices_under(home_).empty(); ++i) ::usleep(20000);
    auto loops = loop_devices_under(home_);
    EXPECT_TRUE(loops.empty()) << "loop devices of " << home_ << " left: " << ::testing::PrintToString(loops);
    EXPECT_EQ(read_file("/proc/self/mountinfo").find(home_ + "/"), std::string::npos)
        << "a mount under " << home_ << " remains";
  }

  // The loop devices whose backing file is (or was, deleted) under `dir`.
  static std::vector<std::string> loop_devices_under(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& dev : dir_entries("/sys/block")) {
      if (dev.rfind("loop", 0) != 0) continue;
      auto backing = read_file_if_present("/sys/block/" + dev + "/loop/backing_file");
      if (backing && backing->rfind(dir + "/", 0) == 0) out.push_back(dev + ": " + trim(*backing));
    }
    return out;
  }

  // Each spare box directory holds an empty upper/ and work/ (a box without a disk
  // left it), or nothing at all.
  static void expect_only_empty_spares(const std::string& spares) {
    for (const auto& slot : dir_entries(spares)) {
      std::string dir = spares + "/" + slot;
      auto entries = dir_entries(dir);
      std::sort(entries.begin(), entries.end());
      if (entries.empty()) continue;
      EXPECT_EQ(entries, (std::vector<std::string>{"upper", "work"})) << "in the spare " << dir;
      for (const char* layer : {"/upper", "/work"}) {
        EXPECT_TRUE(dir_entries(dir + layer).empty()) << "files under the spare " << dir << layer;
        EXPECT_LE(::llistxattr((dir + layer).c_str(), nullptr, 0), 0) << "extended attributes on " << dir << layer;
      }
    }
  }

  static std::vector<std::string> dir_entries(const std::string& path) {
    std::vector<std::string> out;
    DIR* d = ::opendir(path.c_str());
    if (!d) return out;
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(d);
    return out;
  }

  std::string home_;
};

// A jail box's upper layer as the host reaches it, for as long as this lives: in
// its directory (a box without a disk), through its running shim's mount namespace
// (where its disk is mounted), or, stopped, its disk mounted here (detached, gone
// with this object: drop it before the box starts again).
class UpperLayer {
 public:
  explicit UpperLayer(Box& public_box) {
    const auto& box = local(public_box);
    const auto& spec = box.spec().jail();
    if (spec.disk_bytes == 0) {
      path_ = box.dir() + "/upper";
      return;
    }
    if (pid_t shim = unix_listener_pid(engine::shim_socket_path(box.dir())); shim > 0) {
      path_ = "/proc/" + std::to_string(shim) + "/root" + spec.disk_mountpoint + "/" + engine::jail::kDiskUpperDir;
      return;
    }
    disk_ = engine::jail::mount_disk(engine::jail::disk_image_path(box.dir()), {});
    path_ = "/proc/self/fd/" + std::to_string(disk_.get()) + "/" + engine::jail::kDiskUpperDir;
  }
  const std::string& path() const { return path_; }

 private:
  UniqueFd disk_;
  std::string path_;
};

// Base of the tests that must hold on both engines: the parameter sets
// BOXLITE_ENGINE, so the CLI and Runtime pick that engine by default.
class PerEngineTest : public BoxliteTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    BoxliteTest::SetUp();
    ::setenv("BOXLITE_ENGINE", GetParam().c_str(), 1);
  }
  bool vm() const { return GetParam() == "vm"; }
};

// Runs every TEST_P of `suite` once per engine, named .../vm and .../jail.
#define BOXLITE_ON_BOTH_ENGINES(suite)                                      \
  INSTANTIATE_TEST_SUITE_P(Engines, suite, ::testing::Values("vm", "jail"), \
                           [](const ::testing::TestParamInfo<std::string>& i) { return i.param; })

}  // namespace boxlite::testing
