// Layers in overlayfs lowerdir format with shifted owners (the jail engine's rootfs):
// whiteout devices, opaque xattrs, id shifting, hostile input, the per-layer cache and
// a real overlay mount of the busybox test image.
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "common/error.hpp"
#include "common/io.hpp"
#include "image/oci_layout.hpp"
#include "image/test_support.hpp"
#include "image/unpack.hpp"
#include "rootfs/rootfs.hpp"

namespace boxlite::image {
namespace {

using testing::LayoutWriter;
using testing::ScratchDir;
using testing::TarWriter;

constexpr uint32_t kOffset = 100000;

struct stat lstat_of(const std::string& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p << ": " << std::strerror(errno);
  return st;
}

bool is_whiteout(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && ::major(st.st_rdev) == 0 && ::minor(st.st_rdev) == 0;
}

bool is_opaque(const std::string& p) {
  char v[8] = {};
  ssize_t n = ::lgetxattr(p.c_str(), "trusted.overlay.opaque", v, sizeof v);
  return n == 1 && v[0] == 'y';
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Everything under dir (relative paths), to prove nothing was created elsewhere.
std::vector<std::string> tree_of(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(std::filesystem::relative(it->path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class OverlayLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "shifted layers need root";
    make_dirs(layer_dir());
  }
  std::string layer_dir() const { return tmp_ / "layer"; }
  std::string at(const std::string& rel) const { return layer_dir() + "/" + rel; }
  std::string tar_path() { return tmp_ / ("layer" + std::to_string(++tars_) + ".tar"); }
  UnpackStats extract(const std::string& tar, uint32_t offset = kOffset) {
    return extract_layer_for_overlay(layer_dir(), tar, {offset, offset});
  }
  void expect_image_error(const std::string& tar, const std::vector<std::string>& fragments) {
    try {
      extract(tar);
      ADD_FAILURE() << "expected an Image error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Image) << e.what();
      for (const auto& f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
  }

  ScratchDir tmp_;
  int tars_ = 0;
};

TEST_F(OverlayLayerTest, WhiteoutBecomesCharDeviceAndOpaqueMarkerAnXattr) {
  std::string l = tar_path();
  {
    TarWriter t(l);
    t.dir("etc").file("etc/.wh.removed", "").file("etc/kept", "k");
    t.dir("var").dir("var/old").file("var/old/.wh..wh..opq", "").file("var/old/fresh", "new\n");
    t.file("deep/er/.wh.gone", "");  // no directory entries: made on the way
    t.file("etc/.wh..wh.plnk", "");  // aufs bookkeeping, not a whiteout
    t.close();
  }
  UnpackStats s = extract(l);
  EXPECT_EQ(s.whiteouts, 4u);
  EXPECT_TRUE(is_whiteout(at("etc/removed")));
  EXPECT_TRUE(is_whiteout(at("deep/er/gone")));
  EXPECT_FALSE(path_exists(at("etc/.wh.removed")));
  EXPECT_FALSE(path_exists(at("etc/.wh..wh.plnk")));
  EXPECT_FALSE(path_exists(at("etc/.wh.plnk")));
  EXPECT_TRUE(is_opaque(at("var/old")));
  EXPECT_FALSE(is_opaque(at("var")));
  EXPECT_FALSE(is_opaque(at("etc")));
  EXPECT_EQ(names_in(at("var/old")), std::vector<std::string>{"fresh"});
  EXPECT_EQ(read_file(at("etc/kept")), "k");
  EXPECT_EQ(lstat_of(at("etc/removed")).st_uid, kOffset);
}

TEST_F(OverlayLayerTest, OwnershipShiftedIntoTheRange) {
  std::string l = tar_path();
  {
    TarWriter t(l);
    t.dir("home/user", 0700, 1000, 1001).file("home/user/f", "u", 0640, 1000, 1001);
    t.file("bin/su", "su", 04755, 0, 0).file("max", "", 0644, 65535, 65535);
    t.symlink("home/user/link", "f", 1000, 1001);
    t.file("a/b/c", "implicit parents");
    t.close();
  }
  extract(l);
  struct stat f = lstat_of(at("home/user/f"));
  EXPECT_EQ(f.st_uid, 101000u);
  EXPECT_EQ(f.st_gid, 101001u);
  EXPECT_EQ(f.st_mode & 07777, 0640u);
  struct stat d = lstat_of(at("home/user"));
  EXPECT_EQ(d.st_uid, 101000u);
  EXPECT_EQ(d.st_mode & 07777, 0700u);
  struct stat ln = lstat_of(at("home/user/link"));
  EXPECT_TRUE(S_ISLNK(ln.st_mode));
  EXPECT_EQ(ln.st_uid, 101000u);
  EXPECT_EQ(ln.st_gid, 101001u);
  struct stat su = lstat_of(at("bin/su"));
  EXPECT_EQ(su.st_uid, kOffset);
  EXPECT_EQ(su.st_mode & 07777, 04755u);  // setuid survives the chown
  EXPECT_EQ(lstat_of(at("max")).st_uid, kOffset + 65535);
  for (const char* implicit : {"home", "bin", "a", "a/b"}) {
    struct stat st = lstat_of(at(implicit));
    EXPECT_EQ(st.st_uid, kOffset) << implicit;
    EXPECT_EQ(st.st_gid, kOffset) << implicit;
    EXPECT_EQ(st.st_mode & 07777, 0755u) << implicit;
  }
}

TEST_F(OverlayLayerTest, OwnerAbove65535Refused) {
  std::string l = tar_path();
  {
    TarWriter t(l);
    t.file("ok", "").file("etc/big", "x", 0644, 70000, 0);
    t.close();
  }
  expect_image_error(l, {l, "entry 'etc/big'", "70000"});
  std::string l2 = tar_path();
  {
    TarWriter t(l2);
    t.dir("d", 0755, 0, 65536);
    t.close();
  }
  remove_tree(layer_dir());
  make_dirs(layer_dir());
  expect_image_error(l2, {"entry 'd/'", "65536"});
}

TEST_F(OverlayLayerTest, WhiteoutAndEntryOfTheSameLayerInEitherOrder) {
  std::string l = tar_path();
  {
    TarWriter t(l);
    t.file("d1/x", "x").file(".wh.d1", "");   // dir first: it stays, opaque
    t.file(".wh.d2", "").file("d2/y", "y");   // whiteout first, then a path under it
    t.file(".wh.d3", "").dir("d3");           // whiteout first, then the directory
    t.file(".wh.f1", "").file("f1", "file");  // a file replaces its whiteout
    t.file("f2", "file").file(".wh.f2", "");  // a file hides the lower f2 by itself
    t.file(".wh.s", "").symlink("s", "f1");
    t.close();
  }
  extract(l);
  EXPECT_TRUE(is_opaque(at("d1")));
  EXPECT_EQ(read_file(at("d1/x")), "x");
  EXPECT_TRUE(is_opaque(at("d2")));
  EXPECT_EQ(read_file(at("d2/y")), "y");
  EXPECT_EQ(lstat_of(at("d2")).st_uid, kOffset);
  EXPECT_TRUE(is_opaque(at("d3")));
  EXPECT_TRUE(S_ISDIR(lstat_of(at("d3")).st_mode));
  EXPECT_EQ(read_file(at("f1")), "file");
  EXPECT_EQ(read_file(at("f2")), "file");
  EXPECT_TRUE(S_ISLNK(lstat_of(at("s")).st_mode));
}

TEST_F(OverlayLayerTest, HostilePathsStayInsideTheLayer) {
  std::string outside = tmp_ / "outside";
  make_dirs(outside);
  write_file_atomic(outside + "/victim", "host");
  std::string l = tar_path();
  {
    TarWriter t(l);
    t.file("../../escape", "1").file("/abs", "2");
    t.symlink("evil", outside).file("evil/pwned", "3").file("evil/.wh.victim", "").file("evil/.wh..wh..opq", "");
    t.symlink("up", "../../..").file("up/up/pwned2", "4").file("up/.wh.outside", "");
    t.node("dev/null", AE_IFCHR).node("dev/zero0", AE_IFBLK).node("fifo", AE_IFIFO);
    t.file("setid", "", 0177777);  // type bits in the mode are masked off
    t.close();
  }
  UnpackStats s = extract(l);
  EXPECT_EQ(s.skipped_devices, 3u);
  EXPECT_EQ(tree_of(outside), std::vector<std::string>{"victim"});
  EXPECT_EQ(read_file(outside + "/victim"), "host");
  EXPECT_FALSE(is_opaque(outside));
  EXPECT_FALSE(path_exists(tmp_ / "escape"));
  EXPECT_FALSE(path_exists(tmp_ / "pwned2"));
  EXPECT_EQ(read_file(at("escape")), "1");
  EXPECT_EQ(read_file(at("abs")), "2");
  // Links resolve as if the layer were "/": the writes land in the layer's copy.
  std::string inner = at(outside.substr(1));
  EXPECT_EQ(read_file(inner + "/pwned"), "3");
  EXPECT_TRUE(is_whiteout(inner + "/victim"));
  EXPECT_TRUE(is_opaque(inner));
  EXPECT_EQ(read_file(at("pwned2")), "4");
  EXPECT_TRUE(is_whiteout(at("outside")));
  EXPECT_FALSE(path_exists(at("dev/null")));
  EXPECT_FALSE(path_exists(at("fifo")));
  EXPECT_EQ(lstat_of(at("setid")).st_mode & ~07777u, static_cast<unsigned>(S_IFREG));
  // Nothing but the layer and the fixtures in the scratch dir.
  for (const auto& n : names_in(tmp_.path())) {
    EXPECT_TRUE(n == "layer" || n == "outside" || n.ends_with(".tar")) << n;
  }
}

TEST_F(OverlayLayerTest, HardlinksOnlyWithinTheLayerAndNeverToWhiteouts) {
  std::string secret = tmp_ / "outside";
  write_file_atomic(secret, "secret");
  std::string l = tar_path();
  {
    TarWriter t(l);
    t.file("a", "inner").hardlink("dir/hl", "../a");
    t.close();
  }
  UnpackStats s = extract(l);
  EXPECT_EQ(s.hardlinks, 1u);
  EXPECT_EQ(lstat_of(at("a")).st_nlink, 2u);
  EXPECT_EQ(lstat_of(secret).st_nlink, 1u);

  std::string escape = tar_path();
  {
    TarWriter t(escape);
    t.hardlink("hl", "../outside");
    t.close();
  }
  remove_tree(layer_dir());
  make_dirs(layer_dir());
  expect_image_error(escape, {"entry 'hl'", "not found inside the image root"});
  EXPECT_EQ(lstat_of(secret).st_nlink, 1u);

  std::string to_whiteout = tar_path();
  {
    TarWriter t(to_whiteout);
    t.file(".wh.gone", "").hardlink("again", "gone");
    t.close();
  }
  remove_tree(layer_dir());
  make_dirs(layer_dir());
  expect_image_error(to_whiteout, {"entry 'again'", "is a whiteout"});
}

TEST_F(OverlayLayerTest, NonEmptyDirectoryRefused) {
  write_file_atomic(at("stale"), "x");
  std::string l = tar_path();
  {
    TarWriter t(l);
    t.file("f", "");
    t.close();
  }
  try {
    extract(l);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("not empty"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(path_exists(at("f")));
}

// seteuid for the scope (the saved uid stays root, so it can be undone).
class EffectiveUid {
 public:
  explicit EffectiveUid(uid_t uid) { ok_ = ::seteuid(uid) == 0; }
  ~EffectiveUid() {
    if (ok_) {
      EXPECT_EQ(::seteuid(0), 0);
    }
  }
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

TEST_F(OverlayLayerTest, UnsupportedWhenNotRoot) {
  std::string l = tar_path();
  {
    TarWriter t(l);
    t.file("f", "");
    t.close();
  }
  EffectiveUid nobody(65534);
  ASSERT_TRUE(nobody.ok());
  try {
    extract(l);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("the jail engine needs root to prepare shifted layers"), std::string::npos)
        << e.what();
  }
}

// ---- rootfs::ensure_overlay_layers ----

class OverlayLayerCacheTest : public OverlayLayerTest {
 protected:
  std::string home() const { return tmp_ / "home"; }
  std::string layers_dir() const { return home() + "/images/layers"; }

  // Two images sharing their base layer.
  void make_images() {
    std::string base = tar_path(), top_a = tar_path(), top_b = tar_path();
    {
      TarWriter t(base, TarWriter::Compression::Gzip);
      t.dir("etc").file("etc/hello", "base\n").file("etc/gone", "x").dir("var/old").file("var/old/stale", "s");
      t.file("home/user/f", "u", 0600, 1000, 1000);
      t.close();
    }
    {
      TarWriter t(top_a);
      t.dir("etc").file("etc/.wh.gone", "").dir("var/old").file("var/old/.wh..wh..opq", "").file("var/old/fresh", "n");
      t.close();
    }
    {
      TarWriter t(top_b);
      t.file("b-only", "b");
      t.close();
    }
    LayoutWriter layout(tmp_ / "layout");
    layout.index({LayoutWriter::tagged(layout.image({{"Cmd", {"sh"}}}, {base, top_a}), "a"),
                  LayoutWriter::tagged(layout.image({{"Cmd", {"sh"}}}, {base, top_b}), "b")});
    img_a_ = open_oci_layout({layout.dir(), "a"});
    img_b_ = open_oci_layout({layout.dir(), "b"});
  }

  std::vector<std::string> leftovers() const {
    std::vector<std::string> out;
    for (const auto& n : names_in(layers_dir())) {
      if (n.starts_with(".")) out.push_back(n);
    }
    return out;
  }

  LocalImage img_a_, img_b_;
};

TEST_F(OverlayLayerCacheTest, BuildsOncePerLayerAndOffsetAndReusesTheCache) {
  make_images();
  std::vector<std::string> a = rootfs::ensure_overlay_layers(home(), img_a_, kOffset);
  ASSERT_EQ(a.size(), 2u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i], layers_dir() + "/" + img_a_.layers[i].digest.substr(7) + "-100000");
    struct stat root = lstat_of(a[i]);
    EXPECT_EQ(root.st_uid, kOffset);
    EXPECT_EQ(root.st_gid, kOffset);
    EXPECT_EQ(root.st_mode & 07777, 0755u);
  }
  EXPECT_EQ(read_file(a[0] + "/etc/hello"), "base\n");
  EXPECT_EQ(lstat_of(a[0] + "/home/user/f").st_uid, 101000u);
  EXPECT_TRUE(is_whiteout(a[1] + "/etc/gone"));
  EXPECT_TRUE(is_opaque(a[1] + "/var/old"));
  EXPECT_TRUE(path_exists(home() + "/locks/layer-" + img_a_.layers[0].digest.substr(7) + "-100000.lock"));

  struct stat before_dir = lstat_of(a[0]), before_file = lstat_of(a[0] + "/etc/hello");
  std::vector<std::string> again = rootfs::ensure_overlay_layers(home(), img_a_, kOffset);
  EXPECT_EQ(again, a);
  struct stat after_dir = lstat_of(a[0]), after_file = lstat_of(a[0] + "/etc/hello");
  EXPECT_EQ(after_dir.st_ino, before_dir.st_ino);
  EXPECT_EQ(after_file.st_ino, before_file.st_ino);
  EXPECT_EQ(after_file.st_ctim.tv_sec, before_file.st_ctim.tv_sec);
  EXPECT_EQ(after_file.st_ctim.tv_nsec, before_file.st_ctim.tv_nsec);

  // The second image reuses the shared base layer as is.
  std::vector<std::string> b = rootfs::ensure_overlay_layers(home(), img_b_, kOffset);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], a[0]);
  EXPECT_EQ(lstat_of(b[0]).st_ino, before_dir.st_ino);
  EXPECT_EQ(read_file(b[1] + "/b-only"), "b");

  // Another offset is another copy.
  std::vector<std::string> other = rootfs::ensure_overlay_layers(home(), img_a_, 200000);
  EXPECT_NE(other[0], a[0]);
  EXPECT_EQ(lstat_of(other[0] + "/home/user/f").st_uid, 201000u);
  EXPECT_EQ(names_in(layers_dir()).size(), 5u);
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(OverlayLayerCacheTest, ConcurrentBuildersExtractOnce) {
  make_images();
  constexpr int kThreads = 6;
  std::vector<std::vector<std::string>> results(kThreads);
  std::vector<std::string> errors(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        try {
          results[static_cast<size_t>(i)] = rootfs::ensure_overlay_layers(home(), i % 2 ? img_a_ : img_b_, kOffset);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(i)] = e.what();
        }
      });
    }
  }
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(errors[static_cast<size_t>(i)], "");
    EXPECT_EQ(results[static_cast<size_t>(i)].size(), 2u);
    EXPECT_EQ(results[static_cast<size_t>(i)][0], results[0][0]);
  }
  EXPECT_EQ(names_in(layers_dir()).size(), 3u);
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(OverlayLayerCacheTest, CorruptBlobAndBadLayerLeaveNothingBehind) {
  make_images();
  // Same size, other bytes: the sha256 check catches it before extraction.
  std::string blob = img_a_.layers[1].blob_path;
  std::string data = read_file(blob);
  data[data.size() / 2] ^= 1;
  write_file_atomic(blob, data);
  try {
    rootfs::ensure_overlay_layers(home(), img_a_, kOffset);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Image) << e.what();
  }
  EXPECT_EQ(names_in(layers_dir()).size(), 1u);  // the good base layer
  EXPECT_TRUE(leftovers().empty());

  // A layer whose content is refused midway: its temp dir goes too.
  std::string bad = tar_path();
  {
    TarWriter t(bad);
    t.file("a", "fine").file("b", "", 0644, 70000, 0);
    t.close();
  }
  LayoutWriter layout(tmp_ / "layout-bad");
  layout.index({LayoutWriter::tagged(layout.image({{"Cmd", {"sh"}}}, {bad}), "latest")});
  LocalImage img = open_oci_layout({layout.dir(), ""});
  EXPECT_THROW(rootfs::ensure_overlay_layers(home(), img, kOffset), Error);
  EXPECT_EQ(names_in(layers_dir()).size(), 1u);
  EXPECT_TRUE(leftovers().empty());
}

// A cached layer stands for its digest: another layout naming that digest gets it
// only if its own blob hashes to it. Once verified, a blob file is remembered (an
// fstat then suffices); a blob changed since is hashed again.
TEST_F(OverlayLayerCacheTest, ACachedLayerIsGivenOnlyToABlobThatHashesToItsDigest) {
  make_images();
  std::vector<std::string> a = rootfs::ensure_overlay_layers(home(), img_a_, kOffset);
  std::string hex = img_a_.layers[0].digest.substr(7);
  EXPECT_TRUE(path_exists(home() + "/images/verified/" + hex));
  // A copy of the layout whose base blob is other bytes of the same size.
  std::string copy = tmp_ / "copy";
  ASSERT_EQ(std::system(("cp -a " + img_a_.layout_dir + " " + copy).c_str()), 0);
  LocalImage forged = open_oci_layout({copy, "a"});
  std::string data = read_file(forged.layers[0].blob_path);
  std::fill(data.begin(), data.end(), 'x');
  write_file_atomic(forged.layers[0].blob_path, data);
  try {
    rootfs::ensure_overlay_layers(home(), forged, kOffset);
    FAIL() << "a blob that is not its digest got the cached layer";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Image);
    EXPECT_NE(std::string(e.what()).find("digest mismatch"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rootfs::ensure_overlay_layers(home(), img_a_, kOffset), a) << "the genuine layout still gets it";
  // The genuine blob rewritten with the same bytes is a new file: hashed again, fine.
  write_file_atomic(img_a_.layers[0].blob_path, read_file(img_a_.layers[0].blob_path));
  EXPECT_EQ(rootfs::ensure_overlay_layers(home(), img_a_, kOffset), a);
}

// One budget for all of an image's layers (BOXLITE_MAX_IMAGE_BYTES), cached or not,
// every entry counting a block; an image of too many layers is refused before any
// is unpacked.
TEST_F(OverlayLayerCacheTest, TheImageBudgetCoversAllItsLayersAndTheirEntries) {
  std::vector<std::string> tars;
  for (int i = 0; i < 3; ++i) {
    tars.push_back(tar_path());
    TarWriter t(tars.back());
    t.file("f" + std::to_string(i), std::string(300000, 'a' + static_cast<char>(i)));
    t.close();
  }
  LayoutWriter layout(tmp_ / "three");
  layout.index({LayoutWriter::tagged(layout.image({{"Cmd", {"sh"}}}, tars), "latest")});
  LocalImage img = open_oci_layout({layout.dir(), ""});
  ::setenv("BOXLITE_MAX_IMAGE_BYTES", "700000", 1);
  try {
    rootfs::ensure_overlay_layers(home(), img, kOffset);
    ::unsetenv("BOXLITE_MAX_IMAGE_BYTES");
    FAIL() << "three layers of 300 KB passed a 700 KB budget";
  } catch (const Error& e) {
    ::unsetenv("BOXLITE_MAX_IMAGE_BYTES");
    EXPECT_EQ(e.kind(), ErrorKind::Image);
    EXPECT_NE(std::string(e.what()).find("image size limit"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(leftovers().empty());
  // With the first two cached, the third is still refused: what is cached counts.
  ::setenv("BOXLITE_MAX_IMAGE_BYTES", "700000", 1);
  EXPECT_THROW(rootfs::ensure_overlay_layers(home(), img, kOffset), Error);
  ::unsetenv("BOXLITE_MAX_IMAGE_BYTES");
  EXPECT_EQ(rootfs::ensure_overlay_layers(home(), img, kOffset).size(), 3u) << "the default budget takes it";

  // Directories cost a block each: 300 empty ones are over a 1 MB budget.
  std::string dirs = tar_path();
  {
    TarWriter t(dirs);
    for (int i = 0; i < 300; ++i) t.dir("d" + std::to_string(i));
    t.close();
  }
  LayoutWriter dir_layout(tmp_ / "dirs");
  dir_layout.index({LayoutWriter::tagged(dir_layout.image({{"Cmd", {"sh"}}}, {dirs}), "latest")});
  ::setenv("BOXLITE_MAX_IMAGE_BYTES", "1000000", 1);
  try {
    rootfs::ensure_overlay_layers(home(), open_oci_layout({dir_layout.dir(), ""}), kOffset);
    ::unsetenv("BOXLITE_MAX_IMAGE_BYTES");
    FAIL() << "300 directories passed a 1 MB budget";
  } catch (const Error& e) {
    ::unsetenv("BOXLITE_MAX_IMAGE_BYTES");
    EXPECT_NE(std::string(e.what()).find("every entry counts"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(leftovers().empty());

  std::string tiny = tar_path();
  {
    TarWriter t(tiny);
    t.file("x", "x");
    t.close();
  }
  LayoutWriter many(tmp_ / "many");
  many.index({LayoutWriter::tagged(
      many.image({{"Cmd", {"sh"}}}, std::vector<std::string>(rootfs::kMaxOverlayLayers + 1, tiny)), "latest")});
  try {
    rootfs::ensure_overlay_layers(home(), open_oci_layout({many.dir(), ""}), kOffset);
    FAIL() << "too many layers";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the jail engine mounts at most"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(path_exists(layers_dir() + "/" + testing::sha256_hex(read_file(tiny)) + "-100000"))
      << "nothing unpacked";
}

TEST_F(OverlayLayerCacheTest, OpaqueLayerRootHidesTheLayersBelow) {
  std::string base = tar_path(), top = tar_path();
  {
    TarWriter t(base);
    t.file("old", "o");
    t.close();
  }
  {
    TarWriter t(top);
    t.file(".wh..wh..opq", "").file("new", "n");
    t.close();
  }
  LayoutWriter layout(tmp_ / "layout");
  layout.index({LayoutWriter::tagged(layout.image({{"Cmd", {"sh"}}}, {base, top}), "latest")});
  LocalImage img = open_oci_layout({layout.dir(), ""});
  std::vector<std::string> dirs = rootfs::ensure_overlay_layers(home(), img, kOffset);
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_EQ(read_file(dirs[0] + "/new"), "n");
}

TEST_F(OverlayLayerCacheTest, RepeatedLayerMountedOnceAtItsUpperPosition) {
  std::string a = tar_path(), b = tar_path();
  {
    TarWriter t(a);
    t.file("f", "from a");
    t.close();
  }
  {
    TarWriter t(b);
    t.file("f", "from b").file("g", "b");
    t.close();
  }
  LayoutWriter layout(tmp_ / "layout");
  layout.index({LayoutWriter::tagged(layout.image({{"Cmd", {"sh"}}}, {a, b, a}), "latest")});
  LocalImage img = open_oci_layout({layout.dir(), ""});
  std::vector<std::string> dirs = rootfs::ensure_overlay_layers(home(), img, kOffset);
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(read_file(dirs[0] + "/g"), "b");
  EXPECT_EQ(read_file(dirs[1] + "/f"), "from a");  // a stays on top
}

TEST_F(OverlayLayerCacheTest, OffsetWithoutRoomForTheRangeRefused) {
  make_images();
  try {
    rootfs::ensure_overlay_layers(home(), img_a_, 0xffffffffu - 100);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
  }
}

// ---- the busybox test image, mounted ----

std::string busybox_layout() {
  std::vector<std::string> candidates;
  std::error_code ec;
  auto exe_dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  if (!ec) {
    candidates.push_back(exe_dir.string() + "/test-images/busybox");
    candidates.push_back(exe_dir.parent_path().string() + "/build/test-images/busybox");  // from build-asan
  }
  const char* h = ::getenv("HOME");
  for (const auto& d :
       std::filesystem::directory_iterator(std::string(h ? h : "/root") + "/.cache/boxlite/test-images", ec)) {
    candidates.push_back(d.path().string() + "/busybox");
  }
  for (const auto& c : candidates) {
    if (path_exists(c + "/index.json")) return c;
  }
  return {};
}

// An overlay mount, unmounted at scope end whatever the test's outcome.
class OverlayMount {
 public:
  OverlayMount(const std::string& target, const std::string& options) : target_(target) {
    if (::mount("overlay", target.c_str(), "overlay", 0, options.c_str()) == 0) {
      mounted_ = true;
    } else {
      errno_ = errno;
    }
  }
  OverlayMount(const OverlayMount&) = delete;
  OverlayMount& operator=(const OverlayMount&) = delete;
  ~OverlayMount() {
    if (mounted_ && ::umount2(target_.c_str(), 0) != 0) ::umount2(target_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  int error() const { return errno_; }

 private:
  std::string target_;
  bool mounted_ = false;
  int errno_ = 0;
};

TEST_F(OverlayLayerCacheTest, BusyboxLayersMountAsTheImage) {
  std::string dir = busybox_layout();
  if (dir.empty()) GTEST_SKIP() << "no busybox test image (run scripts/build-test-images)";
  LocalImage img = open_oci_layout(parse_layout_ref(dir));
  ASSERT_EQ(img.layers.size(), 3u);
  std::vector<std::string> layers = rootfs::ensure_overlay_layers(home(), img, kOffset);
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_TRUE(is_whiteout(layers[1] + "/etc/removed-by-layer2"));
  EXPECT_TRUE(is_opaque(layers[1] + "/var/old"));
  EXPECT_EQ(lstat_of(layers[0] + "/etc/passwd").st_uid, kOffset);

  std::string upper = tmp_ / "upper", work = tmp_ / "work", mnt = tmp_ / "mnt";
  for (const auto& d : {upper, work, mnt}) make_dirs(d);
  std::string lower;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) lower += (lower.empty() ? "" : ":") + *it;
  // Declared after tmp_ (a member): unmounted before the scratch dir is removed.
  OverlayMount m(mnt, "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work);
  if (!m.mounted() && m.error() == EPERM) GTEST_SKIP() << "overlay mount not permitted here";
  ASSERT_TRUE(m.mounted()) << "mount overlay: " << std::strerror(m.error());

  EXPECT_FALSE(path_exists(mnt + "/etc/removed-by-layer2"));
  EXPECT_EQ(names_in(mnt + "/var/old"), std::vector<std::string>{"fresh"});
  EXPECT_EQ(read_file(mnt + "/var/old/fresh"), "new\n");
  EXPECT_TRUE(path_exists(mnt + "/var/keep/file"));
  EXPECT_EQ(read_file(mnt + "/etc/boxlite-image"), "busybox test image, layer 3\n");
  EXPECT_TRUE(path_exists(mnt + "/etc/passwd"));
  EXPECT_EQ(lstat_of(mnt + "/etc/passwd").st_uid, kOffset);
  EXPECT_TRUE(S_ISLNK(lstat_of(mnt + "/bin/sh").st_mode));
}

}  // namespace
}  // namespace boxlite::image
