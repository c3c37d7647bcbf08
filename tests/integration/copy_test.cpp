// Copying between the host and a box (issue 5): Box::copy_in/copy_out and
// `boxlite cp` on both engines, docker cp placement, and symlinks a hostile box
// plants on either side of a copy.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <thread>

#include "common/error_kind.hpp"
#include "support.hpp"

namespace boxlite::testing {
namespace {

namespace fs = std::filesystem;

class CopyTest : public PerEngineTest {
 protected:
  void SetUp() override {
    PerEngineTest::SetUp();
    host_ = home_ + "/h";
    make_dirs(host_);
  }
  void TearDown() override {
    box_.reset();
    rt_.reset();
    PerEngineTest::TearDown();
  }

  // One box per test: a VM boot is the expensive part.
  Box& box() {
    if (!box_) {
      rt_ = std::make_unique<Runtime>();
      BoxOptions o;
      o.rootfs_path = image("busybox");
      box_ = rt_->create(o);
      box_->start();
    }
    return *box_;
  }

  std::string sh(const std::string& script) {
    ExecOptions e;
    e.argv = {"sh", "-c", script};
    BufferedResult r = box().run(e);
    EXPECT_EQ(r.exit_code, 0) << script << ": " << r.stderr_text;
    return r.stdout_text;
  }

  std::string h(const std::string& rel) const { return host_ + "/" + rel; }

  CliResult cp(std::vector<std::string> args) {
    args.insert(args.begin(), "cp");
    return run_cli(args);
  }
  std::string in_box(const std::string& path) { return box().id() + ":" + path; }

  // Every entry below root (root itself as ""): type, mode, mtime to the
  // nanosecond, and contents or link target.
  static std::map<std::string, std::string> snapshot(const std::string& root) {
    std::map<std::string, std::string> out;
    auto describe = [](const std::string& p) {
      struct stat st {};
      if (::lstat(p.c_str(), &st) != 0) return std::string("missing");
      std::string d = std::to_string(st.st_mode & 0170000) + " " + std::to_string(st.st_mode & 07777) + " " +
                      std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
      if (S_ISREG(st.st_mode)) d += " " + read_file(p);
      if (S_ISLNK(st.st_mode)) d += " -> " + fs::read_symlink(p).string();
      return d;
    };
    out[""] = describe(root);
    if (!fs::is_directory(fs::symlink_status(root))) return out;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      out[e.path().lexically_relative(root).string()] = describe(e.path().string());
    }
    return out;
  }

  static void set_mtime(const std::string& p, time_t sec, long nsec) {
    timespec t[2] = {{sec, nsec}, {sec, nsec}};
    ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, AT_SYMLINK_NOFOLLOW), 0) << p;
  }

  static bool is_symlink(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
  }

  std::string host_;
  std::unique_ptr<Runtime> rt_;
  std::shared_ptr<Box> box_;
};

TEST_P(CopyTest, FilesAndTreesRoundTripWithModesMtimesSymlinksAndHardlinks) {
  std::string src = h("src");
  make_dirs(src + "/bin");
  make_dirs(src + "/sub/deep");
  make_dirs(src + "/empty");
  write_file_atomic(src + "/a.txt", "alpha\n", 0640);
  write_file_atomic(src + "/bin/run.sh", "#!/bin/sh\necho hi\n", 0755);
  write_file_atomic(src + "/sub/deep/f", std::string(300000, 'q'), 0600);
  ASSERT_EQ(::symlink("a.txt", (src + "/link").c_str()), 0);
  ASSERT_EQ(::symlink("/etc/hostname", (src + "/abs").c_str()), 0);
  ASSERT_EQ(::link((src + "/a.txt").c_str(), (src + "/hard").c_str()), 0);
  ASSERT_EQ(::chmod((src + "/empty").c_str(), 0700), 0);
  set_mtime(src + "/a.txt", 1600000000, 123456789);
  set_mtime(src + "/link", 1500000000, 42);
  set_mtime(src + "/bin/run.sh", 1400000000, 0);
  for (const char* d : {"/sub/deep", "/sub", "/bin", "/empty", ""}) set_mtime(src + d, 1300000000, 7);

  box().copy_in(src, "/root");
  EXPECT_EQ(
      sh("cd /root/src && cat a.txt && stat -c '%a %Y' a.txt bin/run.sh empty && readlink link && readlink abs && "
         "wc -c < sub/deep/f && [ $(stat -c %i a.txt) = $(stat -c %i hard) ] && echo hardlinked"),
      "alpha\n640 1600000000\n755 1400000000\n700 1300000000\na.txt\n/etc/hostname\n300000\nhardlinked\n");

  box().copy_out("/root/src", h("back"));  // a new destination takes the tree's contents
  EXPECT_EQ(snapshot(h("back")), snapshot(src));
  struct stat a {
  }, hard{};
  ASSERT_EQ(::lstat(h("back/a.txt").c_str(), &a), 0);
  ASSERT_EQ(::lstat(h("back/hard").c_str(), &hard), 0);
  EXPECT_EQ(a.st_ino, hard.st_ino);

  // A single file, renamed on the way in and out.
  box().copy_in(src + "/a.txt", "/root/renamed.txt");
  box().copy_out("/root/renamed.txt", h("renamed.txt"));
  EXPECT_EQ(snapshot(h("renamed.txt")), snapshot(src + "/a.txt"));
  // A symlink is copied as a link.
  box().copy_out("/root/src/link", h("link-back"));
  EXPECT_EQ(fs::read_symlink(h("link-back")).string(), "a.txt");
}

TEST_P(CopyTest, PlacementFollowsDockerCpWithAndWithoutTheParent) {
  make_dirs(h("d/inner"));
  write_file_atomic(h("d/x"), "x\n");
  write_file_atomic(h("d/inner/y"), "y\n");
  sh("mkdir -p /root/e1 /root/e2");
  box().copy_in(h("d"), "/root/e1");  // existing dir: /root/e1/d
  CopyOptions contents;
  contents.include_parent = false;
  box().copy_in(h("d"), "/root/e2", contents);  // its contents
  box().copy_in(h("d") + "/.", "/root/e3");     // a new dir: the contents
  box().copy_in(h("d/x"), "/root/e1/");         // a file into a dir
  EXPECT_EQ(sh("cd /root && find e1 e2 e3 | sort"),
            "e1\ne1/d\ne1/d/inner\ne1/d/inner/y\ne1/d/x\ne1/x\ne2\ne2/inner\ne2/inner/y\ne2/x\ne3\ne3/inner\ne3/inner/"
            "y\ne3/x\n");

  make_dirs(h("o1"));
  make_dirs(h("o2"));
  make_dirs(h("o3"));
  box().copy_out("/root/e2", h("o1"));
  box().copy_out("/root/e2", h("o2"), contents);
  box().copy_out("/root/e2/.", h("o3"));
  EXPECT_EQ(read_file(h("o1/e2/inner/y")), "y\n");
  EXPECT_EQ(read_file(h("o2/inner/y")), "y\n");
  EXPECT_EQ(read_file(h("o3/x")), "x\n");
  EXPECT_FALSE(path_exists(h("o2/e2")));

  // The same through the CLI, from another process.
  make_dirs(h("o4"));
  auto r = cp({"--include-parent=false", in_box("/root/e1"), h("o4")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(h("o4/d/inner/y")), "y\n");
  EXPECT_EQ(read_file(h("o4/x")), "x\n");
  r = cp({h("d"), in_box("/root/e2")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sh("cat /root/e2/d/inner/y"), "y\n");
  // A directory onto a file is refused.
  EXPECT_EQ(kind_of([&] { box().copy_in(h("d"), "/root/e1/x"); }), ErrorKind::InvalidArgument);
  // The whole box: its files, and the kernel's filesystems as empty directories.
  box().copy_out("/", h("rootfs"));
  EXPECT_EQ(read_file(h("rootfs/root/e1/d/x")), "x\n");
  EXPECT_TRUE(path_exists(h("rootfs/bin/busybox")));
  EXPECT_TRUE(fs::is_directory(h("rootfs/proc")));
  EXPECT_TRUE(fs::is_empty(h("rootfs/proc")));
}

TEST_P(CopyTest, NoOverwriteRefusesExistingFiles) {
  sh("echo old > /root/f");
  write_file_atomic(h("f"), "new\n");
  CopyOptions keep;
  keep.overwrite = false;
  std::string msg;
  EXPECT_EQ(kind_of([&] { box().copy_in(h("f"), "/root/f", keep); }, &msg), ErrorKind::AlreadyExists);
  EXPECT_NE(msg.find("/root/f"), std::string::npos) << msg;
  EXPECT_EQ(sh("cat /root/f"), "old\n");
  auto r = cp({"--no-overwrite", h("f"), in_box("/root/f")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  EXPECT_EQ(sh("cat /root/f"), "old\n");
  box().copy_in(h("f"), "/root/f");
  EXPECT_EQ(sh("cat /root/f"), "new\n");

  write_file_atomic(h("out.txt"), "host\n");
  EXPECT_EQ(kind_of([&] { box().copy_out("/root/f", h("out.txt"), keep); }), ErrorKind::AlreadyExists);
  EXPECT_EQ(read_file(h("out.txt")), "host\n");
  box().copy_out("/root/f", h("out.txt"));
  EXPECT_EQ(read_file(h("out.txt")), "new\n");
  // Merging into an existing directory adds new files even without overwriting.
  sh("mkdir -p /root/tree && echo 1 > /root/tree/one");
  make_dirs(h("tree"));
  write_file_atomic(h("tree/mine"), "mine\n");
  box().copy_out("/root/tree", host_, keep);
  EXPECT_EQ(read_file(h("tree/one")), "1\n");
  EXPECT_EQ(read_file(h("tree/mine")), "mine\n");
}

TEST_P(CopyTest, FollowSymlinksCopiesWhatTheNamedLinkPointsTo) {
  sh("echo real > /root/real && ln -s real /root/lnk && mkdir /root/rd && echo in > /root/rd/i && ln -s rd /root/dlnk");
  box().copy_out("/root/lnk", h("l1"));
  EXPECT_TRUE(is_symlink(h("l1")));
  CopyOptions follow;
  follow.follow_symlinks = true;
  box().copy_out("/root/lnk", h("l2"), follow);
  EXPECT_FALSE(is_symlink(h("l2")));
  EXPECT_EQ(read_file(h("l2")), "real\n");
  box().copy_out("/root/dlnk", h("d2"), follow);
  EXPECT_EQ(read_file(h("d2/i")), "in\n");
  auto r = cp({"--follow-symlinks", in_box("/root/lnk"), h("l3")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(h("l3")), "real\n");

  write_file_atomic(h("hreal"), "host real\n");
  ASSERT_EQ(::symlink("hreal", h("hlnk").c_str()), 0);
  box().copy_in(h("hlnk"), "/root/c1");
  box().copy_in(h("hlnk"), "/root/c2", follow);
  EXPECT_EQ(sh("readlink /root/c1; cat /root/c2; [ -L /root/c2 ] || echo regular"), "hreal\nhost real\nregular\n");
}

TEST_P(CopyTest, MissingPathsAreNotFoundNamingThePathAndTheBox) {
  std::string msg;
  EXPECT_EQ(kind_of([&] { box().copy_out("/nope/missing", h("x")); }, &msg), ErrorKind::NotFound);
  EXPECT_NE(msg.find("/nope/missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find(box().id()), std::string::npos) << msg;
  EXPECT_FALSE(path_exists(h("x")));
  EXPECT_EQ(kind_of([&] { box().copy_in(h("absent"), "/root"); }, &msg), ErrorKind::NotFound);
  EXPECT_NE(msg.find(h("absent")), std::string::npos) << msg;
  write_file_atomic(h("f"), "f\n");
  EXPECT_EQ(kind_of([&] { box().copy_in(h("f"), "/nodir/x"); }, &msg), ErrorKind::NotFound);
  EXPECT_NE(msg.find("/nodir"), std::string::npos) << msg;
  EXPECT_EQ(kind_of([&] { box().copy_out("/etc/passwd", h("nodir/x")); }, &msg), ErrorKind::NotFound);
  EXPECT_NE(msg.find(h("nodir")), std::string::npos) << msg;

  auto r = cp({in_box("/nope/missing"), h("x")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nope/missing"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(box().id()), std::string::npos) << r.err;
  r = cp({"nosuchbox:/etc/passwd", h("x")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("No such box: nosuchbox"), std::string::npos) << r.err;
  EXPECT_EQ(kind_of([&] { rt_->attach("nosuchbox"); }), ErrorKind::NotFound);
  EXPECT_EQ(kind_of([&] { rt_->attach("../boxes"); }), ErrorKind::NotFound);
  r = cp({h("f"), h("g")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("BOX:PATH"), std::string::npos) << r.err;
}

// Everything under root except the subtree `skip`, described as snapshot does.
std::map<std::string, std::string> outside_of(const std::string& root, const std::string& skip) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (it->path() == skip) {
      it.disable_recursion_pending();
      continue;
    }
    std::string d = it->is_symlink()        ? "link " + fs::read_symlink(it->path()).string()
                    : it->is_regular_file() ? "file " + read_file(it->path())
                                            : "dir";
    out[it->path().string()] = d;
  }
  return out;
}

// copy_out unpacks the box's archive in a child of the caller that confines itself
// first (core/copy.cpp): no_new_privs, four capabilities, and as root every mount
// read-only but the destination's. Seen from outside, mid-copy.
TEST_P(CopyTest, ABoxsArchiveIsUnpackedByAConfinedChild) {
  if (vm()) GTEST_SKIP() << "engine-independent: the host side of copy_out";
  sh("head -c 134217728 /dev/zero > /big");  // 128 MiB: long enough to look at the extraction
  std::string me = parse_stat(read_file("/proc/self/stat")).comm;
  std::atomic<bool> done{false};
  std::optional<Error> failure;
  std::thread copy([&] {
    try {
      box().copy_out("/big", h("big"));
    } catch (const Error& e) {
      failure = e;
    }
    done = true;
  });
  std::string status, mounts;
  while (!done && status.empty()) {
    for (pid_t pid : processes_whose("stat", [&](std::string& stat) {
           ProcStat p = parse_stat(stat);
           return p.comm == me && p.fields.size() > 1 && p.fields[1] == std::to_string(::getpid());
         })) {
      try {
        std::string st = read_file("/proc/" + std::to_string(pid) + "/status");
        // Confined once its capabilities are down to the four (the mounts come before).
        if (st.find("NoNewPrivs:\t1") == std::string::npos ||
            st.find("CapEff:\t000000000000001e") == std::string::npos) {
          continue;
        }
        mounts = read_file("/proc/" + std::to_string(pid) + "/mountinfo");
        status = st;
      } catch (const Error&) {
      }
    }
    ::usleep(500);
  }
  copy.join();
  ASSERT_FALSE(failure) << failure->what();
  EXPECT_EQ(fs::file_size(h("big")), 134217728u);
  ASSERT_FALSE(status.empty()) << "no extraction with no_new_privs and only four capabilities seen during a "
                                  "128 MiB copy_out";
  // Its root is read-only; the destination, bound over itself, is not.
  bool root_ro = false, dest_rw = false;
  for (const auto& line : split(mounts, '\n')) {
    auto f = split(line, ' ');
    if (f.size() < 6) continue;
    bool ro = ("," + f[5] + ",").find(",ro,") != std::string::npos;
    if (f[4] == "/") root_ro = ro;
    if (f[4] == host_) dest_rw = !ro;
  }
  EXPECT_TRUE(root_ro) << mounts;
  EXPECT_TRUE(dest_rw) << mounts;
}

TEST_P(CopyTest, HostileSymlinksInTheBoxNeverLeadACopyOutside) {
  // copy_out: links the box planted arrive as links; nothing outside dest changes.
  make_dirs(h("canary"));
  write_file_atomic(h("canary/c.txt"), "canary\n");
  make_dirs(h("dest"));
  sh("mkdir -p /tmp/out /tmp/x && echo data > /tmp/out/file && ln -s /etc /tmp/out/evil && ln -s / /tmp/x/up && "
     "ln -s " +
     h("canary") + " /tmp/out/canarylink && ln -s /etc/passwd /tmp/x/pw");
  auto before = outside_of(host_, h("dest"));
  box().copy_out("/tmp/out", h("dest"));
  EXPECT_EQ(outside_of(host_, h("dest")), before);
  std::vector<std::string> got;
  for (const auto& e : fs::recursive_directory_iterator(h("dest")))
    got.push_back(e.path().lexically_relative(h("dest")));
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"out", "out/canarylink", "out/evil", "out/file"}));
  EXPECT_EQ(fs::read_symlink(h("dest/out/evil")).string(), "/etc");
  // The box turns the links into directories and copies again over them: refused,
  // and nothing is written through the links left on the host.
  sh("rm /tmp/out/evil /tmp/out/canarylink && mkdir /tmp/out/canarylink /tmp/out/evil && "
     "echo pwned > /tmp/out/canarylink/c.txt && echo pwned > /tmp/out/evil/passwd");
  EXPECT_EQ(kind_of([&] { box().copy_out("/tmp/out", h("dest")); }), ErrorKind::AlreadyExists);
  CopyOptions contents;
  contents.include_parent = false;
  EXPECT_EQ(kind_of([&] { box().copy_out("/tmp/out", h("dest/out"), contents); }), ErrorKind::AlreadyExists);
  EXPECT_EQ(read_file(h("canary/c.txt")), "canary\n");
  EXPECT_EQ(outside_of(host_, h("dest")), before);

  // copy_in: a target holding links to / and /etc/passwd that the box planted.
  std::string guard = "md5sum /etc/passwd /etc/group; ls -a / /etc";
  std::string state = sh(guard);
  make_dirs(h("p1"));
  write_file_atomic(h("p1/pw"), "pwned\n");
  box().copy_in(h("p1/."), "/tmp/x");  // the file replaces the link
  EXPECT_EQ(sh("cat /tmp/x/pw; [ -L /tmp/x/pw ] || echo not-a-link"), "pwned\nnot-a-link\n");
  make_dirs(h("p2/up/etc"));
  write_file_atomic(h("p2/up/etc/passwd"), "pwned\n");
  write_file_atomic(h("p2/up/evil"), "pwned\n");
  EXPECT_EQ(kind_of([&] { box().copy_in(h("p2/."), "/tmp/x"); }), ErrorKind::AlreadyExists);
  EXPECT_EQ(sh(guard), state);
  EXPECT_EQ(sh("[ -e /evil ] && echo escaped; readlink /tmp/x/up"), "/\n");
}

TEST_P(CopyTest, CliCopiesBothWaysIntoABoxOfAnotherProcess) {
  write_file_atomic(h("cli.txt"), "from the cli\n", 0600);
  set_mtime(h("cli.txt"), 1234567890, 500);
  auto r = cp({h("cli.txt"), in_box("/root/cli.txt")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sh("cat /root/cli.txt; stat -c '%a %Y' /root/cli.txt"), "from the cli\n600 1234567890\n");
  r = cp({in_box("/root/cli.txt"), h("cli-back.txt")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(snapshot(h("cli-back.txt")), snapshot(h("cli.txt")));
  // The box keeps running after the CLI is done with it.
  EXPECT_EQ(sh("echo alive"), "alive\n");
  r = cp({"--no-overwrite", in_box("/root/cli.txt"), h("cli-back.txt")});
  EXPECT_EQ(r.exit_code, 1);
  // Attaching left nothing of its own behind: the box goes with its owner.
  std::string id = box().id();
  box_.reset();
  r = cp({h("cli.txt"), id + ":/root/gone.txt"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("No such box: " + id), std::string::npos) << r.err;
  expect_no_leftovers();
}

BOXLITE_ON_BOTH_ENGINES(CopyTest);

}  // namespace
}  // namespace boxlite::testing
