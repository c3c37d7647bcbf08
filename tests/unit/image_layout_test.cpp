// OCI image layout reading: references, tag/platform choice, verification, errors.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "common/error.hpp"
#include "common/io.hpp"
#include "image/oci_layout.hpp"
#include "image/test_support.hpp"
#include "image/unpack.hpp"

namespace boxlite::image {
namespace {

using nlohmann::json;
using testing::LayoutWriter;
using testing::ScratchDir;
using testing::TarWriter;

// The error text of f(), which must throw an Image error.
template <typename F>
std::string image_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Image) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an Image error";
  return {};
}

class LayoutTest : public ::testing::Test {
 protected:
  LayoutTest() : layout_(tmp_ / "layout") {}

  std::string make_layer(const std::string& name, const std::string& file, const std::string& content) {
    std::string path = tmp_ / name;
    TarWriter t(path);
    t.file(file, content);
    t.close();
    return path;
  }
  json basic_image() {
    json cfg = {{"Env", {"PATH=/bin", "A=1"}},
                {"Entrypoint", {"/init"}},
                {"Cmd", {"sh", "-c", "true"}},
                {"WorkingDir", "/work"},
                {"User", "1000:1000"}};
    return layout_.image(cfg, {make_layer("l1.tar", "a", "1"), make_layer("l2.tar", "b", "2")});
  }

  ScratchDir tmp_;
  LayoutWriter layout_;
};

TEST(LayoutRefTest, Parses) {
  LayoutRef r = parse_layout_ref("oci:/imgs/bb");
  EXPECT_EQ(r.dir, "/imgs/bb");
  EXPECT_EQ(r.tag, "");
  r = parse_layout_ref("oci:/imgs/bb:v1");
  EXPECT_EQ(r.dir, "/imgs/bb");
  EXPECT_EQ(r.tag, "v1");
  r = parse_layout_ref("oci:rel/dir:docker.io/library/busybox:latest");
  EXPECT_EQ(r.dir, "rel/dir");
  EXPECT_EQ(r.tag, "docker.io/library/busybox:latest");
  r = parse_layout_ref("/plain/dir");
  EXPECT_EQ(r.dir, "/plain/dir");
  EXPECT_EQ(r.tag, "");
  image_error([] { parse_layout_ref("oci:"); });
  image_error([] { parse_layout_ref("oci::tag"); });
}

TEST_F(LayoutTest, OpensImageWithConfigAndLayers) {
  json m = basic_image();
  layout_.index({LayoutWriter::tagged(m, "latest")});
  LocalImage img = open_oci_layout({layout_.dir() + "/.", ""});
  EXPECT_EQ(img.layout_dir, layout_.dir());
  EXPECT_EQ(img.tag, "latest");
  EXPECT_EQ(img.manifest_digest, m["digest"]);
  EXPECT_EQ(img.config.env, (std::vector<std::string>{"PATH=/bin", "A=1"}));
  EXPECT_EQ(img.config.entrypoint, (std::vector<std::string>{"/init"}));
  EXPECT_EQ(img.config.cmd, (std::vector<std::string>{"sh", "-c", "true"}));
  EXPECT_EQ(img.config.working_dir, "/work");
  EXPECT_EQ(img.config.user, "1000:1000");
  ASSERT_EQ(img.layers.size(), 2u);
  for (const auto& l : img.layers) {
    EXPECT_EQ(l.blob_path, layout_.dir() + "/blobs/sha256/" + l.digest.substr(7));
    EXPECT_EQ(l.media_type, "application/vnd.oci.image.layer.v1.tar");
    EXPECT_GT(l.size, 0u);
    verify_blob(l);
  }
}

TEST_F(LayoutTest, RelativeDirBecomesAbsolute) {
  layout_.index({LayoutWriter::tagged(basic_image(), "latest")});
  std::string cwd = std::filesystem::current_path();
  std::filesystem::current_path(tmp_.path());
  LocalImage img;
  EXPECT_NO_THROW(img = open_oci_layout(parse_layout_ref("oci:layout:latest")));
  std::filesystem::current_path(cwd);
  EXPECT_EQ(img.layout_dir, layout_.dir());
}

TEST_F(LayoutTest, ChoosesByTag) {
  json a = basic_image();
  json b = layout_.image({{"Cmd", {"b"}}}, {make_layer("l3.tar", "c", "3")});
  layout_.index({LayoutWriter::tagged(a, "v1"), LayoutWriter::tagged(b, "latest")});
  EXPECT_EQ(open_oci_layout({layout_.dir(), "v1"}).manifest_digest, a["digest"]);
  EXPECT_EQ(open_oci_layout({layout_.dir(), "latest"}).manifest_digest, b["digest"]);
  EXPECT_EQ(open_oci_layout({layout_.dir(), ""}).manifest_digest, b["digest"]);  // "latest" by default
}

TEST_F(LayoutTest, UnknownTagListsAvailable) {
  layout_.index({LayoutWriter::tagged(basic_image(), "latest")});
  std::string msg = image_error([&] { open_oci_layout({layout_.dir(), "foo"}); });
  EXPECT_EQ(msg, "tag 'foo' not found in " + layout_.dir() + " (available: latest)");
}

TEST_F(LayoutTest, AmbiguousWithoutTag) {
  layout_.index({LayoutWriter::tagged(basic_image(), "v1"),
                 LayoutWriter::tagged(layout_.image({}, {make_layer("l3.tar", "c", "3")}), "v2")});
  std::string msg = image_error([&] { open_oci_layout({layout_.dir(), ""}); });
  EXPECT_NE(msg.find("available: v1, v2"), std::string::npos) << msg;
}

TEST_F(LayoutTest, MissingOciLayout) {
  layout_.index({LayoutWriter::tagged(basic_image(), "latest")});
  ::unlink((layout_.dir() + "/oci-layout").c_str());
  std::string msg = image_error([&] { open_oci_layout({layout_.dir(), ""}); });
  EXPECT_EQ(msg, "not an OCI image layout: " + layout_.dir() + " (missing oci-layout)");
  msg = image_error([&] { open_oci_layout({tmp_ / "nonexistent", ""}); });
  EXPECT_NE(msg.find(tmp_ / "nonexistent"), std::string::npos) << msg;
}

TEST_F(LayoutTest, CorruptManifestBlob) {
  json m = basic_image();
  layout_.index({LayoutWriter::tagged(m, "latest")});
  std::string digest = m["digest"];
  std::string path = layout_.dir() + "/blobs/sha256/" + digest.substr(7);
  std::string data = read_file(path);
  data[data.size() / 2] ^= 1;
  write_file_atomic(path, data);
  std::string msg = image_error([&] { open_oci_layout({layout_.dir(), ""}); });
  EXPECT_EQ(msg, "corrupt blob " + digest + " in " + layout_.dir() + ": digest mismatch");
}

TEST_F(LayoutTest, CorruptLayerBlobFailsVerify) {
  layout_.index({LayoutWriter::tagged(basic_image(), "latest")});
  LocalImage img = open_oci_layout({layout_.dir(), ""});
  const Layer& l = img.layers[0];
  std::string data = read_file(l.blob_path);
  data[0] ^= 1;
  write_file_atomic(l.blob_path, data);
  std::string msg = image_error([&] { verify_blob(l); });
  EXPECT_NE(msg.find("corrupt blob " + l.digest), std::string::npos) << msg;
  EXPECT_NE(msg.find("digest mismatch"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("content is"), std::string::npos) << "never the hash of what was read: " << msg;
  // Unpacked, the blob is hashed as it is read: the same error, once read.
  ScratchDir tmp;
  std::string unpacked = image_error([&] { apply_layer_blob(tmp.path(), l); });
  EXPECT_NE(unpacked.find("corrupt blob " + l.digest), std::string::npos) << unpacked;
  EXPECT_NE(unpacked.find("digest mismatch"), std::string::npos) << unpacked;
}

// A gzip layer blob cut inside its trailer, with a digest that matches the cut bytes
// (what a registry or tool that stored a short blob would record): the digest passes,
// the gzip check refuses it and says what to do.
TEST_F(LayoutTest, GzipBlobCutInItsTrailerIsATruncatedStream) {
  std::string tar = tmp_ / "gz.tar";
  {
    TarWriter t(tar, TarWriter::Compression::Gzip);
    t.file("hello", "hi\n");
    t.close();
  }
  std::string bytes = read_file(tar);
  for (size_t cut : {1, 4, 8}) {
    std::string cut_tar = tmp_ / ("cut" + std::to_string(cut) + ".tar");
    write_file_atomic(cut_tar, bytes.substr(0, bytes.size() - cut));
    layout_.index({LayoutWriter::tagged(layout_.image({}, {cut_tar}), "latest")});
    LocalImage img = open_oci_layout({layout_.dir(), ""});
    const Layer& l = img.layers[0];
    verify_blob(l);  // its digest is right
    ScratchDir root;
    std::string msg = image_error([&] { apply_layer_blob(root.path(), l); });
    EXPECT_EQ(msg, "layer " + l.blob_path + ": truncated gzip stream (the layer blob ends early: re-pull the image)");
  }
}

// A layout is untrusted: its blobs are read only inside it and only as regular files,
// never as a host file a symlink names, nor a FIFO or device that would block or
// never end.
TEST_F(LayoutTest, ABlobIsNeverAHostFileNorAFifo) {
  layout_.index({LayoutWriter::tagged(basic_image(), "latest")});
  LocalImage img = open_oci_layout({layout_.dir(), ""});
  const Layer& l = img.layers[0];
  std::string original = read_file(l.blob_path);
  ASSERT_EQ(::unlink(l.blob_path.c_str()), 0);
  ASSERT_EQ(::symlink("/etc/passwd", l.blob_path.c_str()), 0);
  std::string out = image_error([&] { open_oci_layout({layout_.dir(), ""}); });
  EXPECT_NE(out.find("is a symlink that leads out of the layout"), std::string::npos) << out;
  ASSERT_EQ(::unlink(l.blob_path.c_str()), 0);
  ASSERT_EQ(::symlink("../../../../../../../../../../etc/passwd", l.blob_path.c_str()), 0);
  out = image_error([&] { verify_blob(l); });
  EXPECT_NE(out.find("leads out of the layout"), std::string::npos) << out;
  ASSERT_EQ(::unlink(l.blob_path.c_str()), 0);
  ASSERT_EQ(::mkfifo(l.blob_path.c_str(), 0600), 0);
  std::string fifo = image_error([&] { verify_blob(l); });  // at once: no writer is waited for
  EXPECT_NE(fifo.find("is not a regular file"), std::string::npos) << fifo;
  ASSERT_EQ(::unlink(l.blob_path.c_str()), 0);
  // Inside the layout, a symlink is followed (a tool may link equal blobs).
  write_file_atomic(layout_.dir() + "/blobs/copy", original);
  ASSERT_EQ(::symlink("../copy", l.blob_path.c_str()), 0);
  verify_blob(l);
}

// Every file of a layout is read from the directory opened when the layout was: a
// path swapped for a symlink to another layout meanwhile changes nothing.
TEST_F(LayoutTest, TheLayoutDirectoryIsPinnedWhenItIsOpened) {
  layout_.index({LayoutWriter::tagged(basic_image(), "latest")});
  LocalImage img = open_oci_layout({layout_.dir(), ""});
  const Layer& l = img.layers[0];
  std::string other = layout_.dir() + ".other", moved = layout_.dir() + ".moved";
  ASSERT_EQ(std::system(("cp -a " + layout_.dir() + " " + other).c_str()), 0);
  write_file_atomic(other + "/blobs/sha256/" + l.digest.substr(7), std::string(l.size, 'x'));
  ASSERT_EQ(::rename(layout_.dir().c_str(), moved.c_str()), 0);
  ASSERT_EQ(::symlink(other.c_str(), layout_.dir().c_str()), 0);
  verify_blob(l);  // the original's blob, still
  ScratchDir tmp;
  apply_layer_blob(tmp.path(), l);
  ASSERT_EQ(::unlink(layout_.dir().c_str()), 0);
  ASSERT_EQ(::rename(moved.c_str(), layout_.dir().c_str()), 0);
  remove_tree(other);
}

TEST_F(LayoutTest, MissingLayerBlob) {
  json m = basic_image();
  layout_.index({LayoutWriter::tagged(m, "latest")});
  LocalImage img = open_oci_layout({layout_.dir(), ""});
  ::unlink(img.layers[1].blob_path.c_str());
  std::string msg = image_error([&] { open_oci_layout({layout_.dir(), ""}); });
  EXPECT_NE(msg.find("missing blob " + img.layers[1].digest), std::string::npos) << msg;
}

TEST_F(LayoutTest, DigestCannotEscapeBlobDir) {
  json m = basic_image();
  m["digest"] = "sha256:../../../../etc/passwd";
  layout_.index({LayoutWriter::tagged(m, "latest")});
  std::string msg = image_error([&] { open_oci_layout({layout_.dir(), ""}); });
  EXPECT_NE(msg.find("malformed digest"), std::string::npos) << msg;
}

TEST_F(LayoutTest, NestedIndexPicksLinuxAmd64) {
  json arm = layout_.image({{"Cmd", {"arm"}}}, {make_layer("arm.tar", "a", "arm")}, "arm64");
  json amd = basic_image();
  arm["platform"] = {{"os", "linux"}, {"architecture", "arm64"}};
  amd["platform"] = {{"os", "linux"}, {"architecture", "amd64"}};
  json inner = {
      {"schemaVersion", 2}, {"mediaType", "application/vnd.oci.image.index.v1+json"}, {"manifests", {arm, amd}}};
  std::string data = inner.dump();
  json inner_desc =
      LayoutWriter::descriptor("application/vnd.oci.image.index.v1+json", layout_.blob(data), data.size());
  layout_.index({LayoutWriter::tagged(inner_desc, "latest")});
  LocalImage img = open_oci_layout({layout_.dir(), "latest"});
  EXPECT_EQ(img.manifest_digest, amd["digest"]);
  EXPECT_EQ(img.config.cmd, (std::vector<std::string>{"sh", "-c", "true"}));
}

TEST_F(LayoutTest, OnlyOtherPlatformsIsAnError) {
  json arm = layout_.image({}, {make_layer("arm.tar", "a", "arm")}, "arm64");
  arm["platform"] = {{"os", "linux"}, {"architecture", "arm64"}};
  json inner = {{"schemaVersion", 2}, {"manifests", {arm}}};
  std::string data = inner.dump();
  json inner_desc =
      LayoutWriter::descriptor("application/vnd.oci.image.index.v1+json", layout_.blob(data), data.size());
  layout_.index({LayoutWriter::tagged(inner_desc, "latest")});
  std::string msg = image_error([&] { open_oci_layout({layout_.dir(), ""}); });
  EXPECT_NE(msg.find("no linux/amd64 image"), std::string::npos) << msg;
  EXPECT_NE(msg.find("linux/arm64"), std::string::npos) << msg;
}

TEST_F(LayoutTest, InvalidIndexJson) {
  basic_image();
  write_file_atomic(layout_.dir() + "/index.json", "{not json");
  std::string msg = image_error([&] { open_oci_layout({layout_.dir(), ""}); });
  EXPECT_NE(msg.find("invalid JSON in " + layout_.dir() + "/index.json"), std::string::npos) << msg;
}

// The busybox test image built by scripts/build-test-images, when present.
std::string busybox_layout() {
  const char* home = ::getenv("HOME");
  std::string root = std::string(home ? home : "/root") + "/.cache/boxlite/test-images";
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(root, ec)) {
    if (path_exists(d.path().string() + "/busybox/index.json")) return d.path().string() + "/busybox";
  }
  return {};
}

TEST(BusyboxImageTest, OpensAndUnpacksWithWhiteouts) {
  std::string dir = busybox_layout();
  if (dir.empty()) GTEST_SKIP() << "no busybox test image (run scripts/build-test-images)";
  LocalImage img = open_oci_layout(parse_layout_ref("oci:" + dir + ":latest"));
  ASSERT_EQ(img.layers.size(), 3u);
  EXPECT_EQ(img.config.cmd, (std::vector<std::string>{"sh"}));
  EXPECT_NE(std::find(img.config.env.begin(), img.config.env.end(), "IMAGE_VAR=from-image"), img.config.env.end());
  ScratchDir tmp;
  UnpackStats total;
  for (const auto& l : img.layers) {
    UnpackStats s = apply_layer_blob(tmp.path(), l);
    total.whiteouts += s.whiteouts;
    total.symlinks += s.symlinks;
  }
  EXPECT_EQ(total.whiteouts, 2u);
  EXPECT_GT(total.symlinks, 100u);
  EXPECT_TRUE(path_exists(tmp / "bin/busybox"));
  EXPECT_FALSE(path_exists(tmp / "etc/removed-by-layer2"));
  EXPECT_FALSE(path_exists(tmp / "var/old/stale"));
  EXPECT_EQ(read_file(tmp / "var/old/fresh"), "new\n");
  EXPECT_EQ(read_file(tmp / "var/keep/file"), "keep\n");
  EXPECT_TRUE(path_exists(tmp / "etc/boxlite-image"));
}

}  // namespace
}  // namespace boxlite::image
