// ext4 base images and qcow2 overlays, checked with debugfs and qemu-img.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "image/oci_layout.hpp"
#include "image/test_support.hpp"
#include "rootfs/rootfs.hpp"

namespace boxlite::rootfs {
namespace {

using image::testing::LayoutWriter;
using image::testing::ScratchDir;
using image::testing::TarWriter;
using nlohmann::json;

std::string tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    std::string p = std::string(dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return which(name);
}

// debugfs prints the request's output on stdout and its banner on stderr.
std::string debugfs(const std::string& image, const std::string& request) {
  RunResult r = run_capture({tool("debugfs"), "-R", request, image});
  EXPECT_TRUE(r.ok()) << r.err;
  return r.out;
}

size_t count_entries(const std::string& dir) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator(); ++it)
    ++n;
  return n;
}

class RootfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tool("mkfs.ext4").empty() || tool("debugfs").empty()) GTEST_SKIP() << "e2fsprogs not installed";
  }
  std::string home() const { return tmp_ / "home"; }

  image::LocalImage tiny_image() {
    std::string l1 = tmp_ / "l1.tar", l2 = tmp_ / "l2.tar";
    {
      TarWriter t(l1, TarWriter::Compression::Gzip);
      t.dir("etc").file("etc/hello", "hello from layer 1\n").file("etc/gone", "x");
      t.file("bin/su", "su", 04755, 0, 0).file("home/user/f", "u", 0600, 1000, 1000).symlink("sh", "bin/su");
      t.close();
    }
    {
      TarWriter t(l2);
      t.file("etc/.wh.gone", "").file("etc/added", "layer 2\n");
      t.close();
    }
    LayoutWriter layout(tmp_ / "layout");
    layout.index({LayoutWriter::tagged(layout.image({{"Cmd", {"sh"}}, {"Env", {"A=1"}}}, {l1, l2}), "latest")});
    return image::open_oci_layout({layout.dir(), ""});
  }

  ScratchDir tmp_;
};

TEST_F(RootfsTest, BuildsBaseImageOnceWithLayerContents) {
  image::LocalImage img = tiny_image();
  std::string hex = img.manifest_digest.substr(7);
  std::string path = ensure_base_ext4(home(), img);
  EXPECT_EQ(path, home() + "/images/disk-images/" + hex + ".ext4");
  ASSERT_TRUE(path_exists(path));

  EXPECT_EQ(debugfs(path, "cat /etc/hello"), "hello from layer 1\n");
  EXPECT_EQ(debugfs(path, "cat /etc/added"), "layer 2\n");
  std::string ls = debugfs(path, "ls -l /etc");
  EXPECT_EQ(ls.find("gone"), std::string::npos) << ls;
  std::string su = debugfs(path, "stat /bin/su");
  EXPECT_NE(su.find("Mode:  04755"), std::string::npos) << su;
  if (::geteuid() == 0) {
    std::string f = debugfs(path, "stat /home/user/f");
    EXPECT_NE(f.find("User:  1000"), std::string::npos) << f;
  }
  EXPECT_NE(debugfs(path, "stat /sh").find("Type: symlink"), std::string::npos);
  std::string root = debugfs(path, "stat /");
  EXPECT_NE(root.find("User:     0"), std::string::npos) << root;
  EXPECT_NE(root.find("Mode:  0755"), std::string::npos) << root;

  // Sparse, sized content*1.25 + 256 MiB, whole MiB.
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size % (1 << 20), 0);
  EXPECT_GE(st.st_size, 256 << 20);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, static_cast<uint64_t>(st.st_size));

  json meta = json::parse(read_file(home() + "/images/disk-images/" + hex + ".json"));
  EXPECT_EQ(meta["manifest_digest"], img.manifest_digest);
  EXPECT_EQ(meta["config"]["Cmd"], json({"sh"}));
  EXPECT_EQ(meta["config"]["Env"], json({"A=1"}));

  // Cached: the second call returns the same file without rebuilding it.
  EXPECT_EQ(ensure_base_ext4(home(), img), path);
  struct stat st2;
  ASSERT_EQ(::stat(path.c_str(), &st2), 0);
  EXPECT_EQ(st.st_ino, st2.st_ino);
  EXPECT_EQ(count_entries(home() + "/tmp"), 0u);
  EXPECT_EQ(count_entries(home() + "/images/disk-images"), 2u);  // .ext4 + .json, no temp files
  EXPECT_TRUE(path_exists(home() + "/locks/image-" + hex + ".lock"));
}

TEST_F(RootfsTest, ConcurrentBuildersShareOneBuild) {
  image::LocalImage img = tiny_image();
  std::string a, b;
  std::thread t1([&] { a = ensure_base_ext4(home(), img); });
  std::thread t2([&] { b = ensure_base_ext4(home(), img); });
  t1.join();
  t2.join();
  EXPECT_EQ(a, b);
  EXPECT_EQ(debugfs(a, "cat /etc/added"), "layer 2\n");
  EXPECT_EQ(count_entries(home() + "/tmp"), 0u);
  EXPECT_EQ(count_entries(home() + "/images/disk-images"), 2u);
}

TEST_F(RootfsTest, CorruptLayerLeavesNothingBehind) {
  image::LocalImage img = tiny_image();
  std::string blob = img.layers[1].blob_path;
  std::string data = read_file(blob);
  data[data.size() - 1] ^= 1;
  write_file_atomic(blob, data);
  try {
    ensure_base_ext4(home(), img);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Image);
    EXPECT_NE(std::string(e.what()).find("digest mismatch"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_entries(home() + "/tmp"), 0u);
  EXPECT_EQ(count_entries(home() + "/images/disk-images"), 0u);
}

TEST_F(RootfsTest, BadLayerContentCleansTempDir) {
  // A layer that verifies but fails to apply: the scratch tree must still go.
  std::string l1 = tmp_ / "bad.tar";
  {
    TarWriter t(l1);
    t.file("a", "x").hardlink("b", "missing");
    t.close();
  }
  LayoutWriter layout(tmp_ / "badlayout");
  layout.index({LayoutWriter::tagged(layout.image({}, {l1}), "latest")});
  image::LocalImage img = image::open_oci_layout({layout.dir(), ""});
  EXPECT_THROW(ensure_base_ext4(home(), img), Error);
  EXPECT_EQ(count_entries(home() + "/tmp"), 0u);
  EXPECT_EQ(count_entries(home() + "/images/disk-images"), 0u);
}

class OverlayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tool("qemu-img").empty()) GTEST_SKIP() << "qemu-img not installed";
    base_ = tmp_ / "base.ext4";
    UniqueFd fd(::open(base_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(::ftruncate(fd.get(), 64 << 20), 0);
  }
  json info(const std::string& overlay) {
    RunResult r = run_capture({tool("qemu-img"), "info", "--output=json", "-U", overlay});
    EXPECT_TRUE(r.ok()) << r.err;
    return json::parse(r.out);
  }
  ScratchDir tmp_;
  std::string base_;
};

TEST_F(OverlayTest, CreatesQcow2OverBase) {
  std::string ov = tmp_ / "box.qcow2";
  create_overlay(base_, ov);
  json j = info(ov);
  EXPECT_EQ(j["format"], "qcow2");
  EXPECT_EQ(j["backing-filename"], base_);
  EXPECT_EQ(j["backing-filename-format"], "raw");
  EXPECT_EQ(j["virtual-size"], 64 << 20);
}

TEST_F(OverlayTest, GrowsToRequestedSizeAndStoresAbsoluteBacking) {
  std::string cwd = std::filesystem::current_path();
  std::filesystem::current_path(tmp_.path());
  std::string ov = tmp_ / "big.qcow2";
  EXPECT_NO_THROW(create_overlay("base.ext4", ov, uint64_t{1} << 30));
  std::filesystem::current_path(cwd);
  json j = info(ov);
  EXPECT_EQ(j["virtual-size"], uint64_t{1} << 30);
  EXPECT_EQ(j["backing-filename"], base_);
}

TEST_F(OverlayTest, MissingBaseIsStorageError) {
  try {
    create_overlay(tmp_ / "nope.ext4", tmp_ / "ov.qcow2");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Storage);
    EXPECT_NE(std::string(e.what()).find("nope.ext4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_entries(tmp_.path()), 1u);  // only base.ext4
}

TEST_F(OverlayTest, QemuImgFailureCarriesStderr) {
  make_dirs(tmp_ / "ro");
  try {
    create_overlay(base_, tmp_ / "missing-dir/ov.qcow2");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Storage);
    std::string msg = e.what();
    EXPECT_NE(msg.find("qemu-img create"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing-dir"), std::string::npos) << msg;
  }
}

std::string busybox_layout() {
  const char* h = ::getenv("HOME");
  std::error_code ec;
  for (const auto& d :
       std::filesystem::directory_iterator(std::string(h ? h : "/root") + "/.cache/boxlite/test-images", ec)) {
    if (path_exists(d.path().string() + "/busybox/index.json")) return d.path().string() + "/busybox";
  }
  return {};
}

TEST_F(RootfsTest, BusyboxBaseImage) {
  std::string dir = busybox_layout();
  if (dir.empty()) GTEST_SKIP() << "no busybox test image (run scripts/build-test-images)";
  image::LocalImage img = image::open_oci_layout(image::parse_layout_ref(dir));
  std::string path = ensure_base_ext4(home(), img);
  EXPECT_EQ(debugfs(path, "cat /etc/boxlite-image"), "busybox test image, layer 3\n");
  EXPECT_EQ(debugfs(path, "cat /var/old/fresh"), "new\n");
  std::string etc = debugfs(path, "ls /etc");
  EXPECT_EQ(etc.find("removed-by-layer2"), std::string::npos) << etc;
  EXPECT_EQ(debugfs(path, "ls /var/old").find("stale"), std::string::npos);
  EXPECT_NE(debugfs(path, "stat /bin/sh").find("Type: symlink"), std::string::npos);
}

}  // namespace
}  // namespace boxlite::rootfs
