// Copy archives (image/copy_archive.hpp): the writer read back by libarchive, docker
// cp placement, and hostile archives and destinations (the box end of a copy_out is
// untrusted; so is what a box planted where a copy_in lands).
#include "image/copy_archive.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include "common/error_kind.hpp"

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <tuple>

#include "common/error.hpp"
#include "common/io.hpp"
#include "image/test_support.hpp"

namespace boxlite::image {
namespace {

using boxlite::testing::kind_of;

using testing::ScratchDir;
using testing::TarWriter;

struct ReaderDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};

std::string archive_of(const std::string& src, CopyWriteOptions o = {}) {
  std::string out;
  write_copy_archive(src, o, [&](std::string_view piece) { out.append(piece); });
  return out;
}

UnpackStats extract(const std::string& data, const std::string& dest, CopyExtractOptions o = {}) {
  std::unique_ptr<archive, ReaderDeleter> a(archive_read_new());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_empty(a.get());
  EXPECT_EQ(archive_read_open_memory(a.get(), data.data(), data.size()), ARCHIVE_OK);
  return extract_copy_archive(a.get(), dest, o);
}

// name -> (type, size) of every entry libarchive reads back.
std::map<std::string, std::pair<int, int64_t>> list(const std::string& data) {
  std::unique_ptr<archive, ReaderDeleter> a(archive_read_new());
  archive_read_support_format_tar(a.get());
  archive_read_open_memory(a.get(), data.data(), data.size());
  std::map<std::string, std::pair<int, int64_t>> out;
  archive_entry* e;
  while (archive_read_next_header(a.get(), &e) == ARCHIVE_OK) {
    out[archive_entry_pathname(e)] = {static_cast<int>(archive_entry_filetype(e)), archive_entry_size(e)};
  }
  return out;
}

struct stat lstat_of(const std::string& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st;
}

std::string link_of(const std::string& p) {
  char buf[4096];
  ssize_t n = ::readlink(p.c_str(), buf, sizeof buf);
  return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
}

void set_mtime(const std::string& p, time_t sec, long nsec) {
  timespec t[2] = {{sec, nsec}, {sec, nsec}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, AT_SYMLINK_NOFOLLOW), 0) << p;
}

class CopyArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    make_dirs(src());
    make_dirs(dst());
  }
  std::string src() const { return tmp_ / "src"; }
  std::string dst() const { return tmp_ / "dst"; }
  ScratchDir tmp_;
};

TEST_F(CopyArchiveTest, RoundTripKeepsContentsModesMtimesLinksAndOddNames) {
  std::string t = src() + "/tree";
  make_dirs(t + "/sub/deeper");
  write_file_atomic(t + "/plain.txt", "hello\n", 0640);
  write_file_atomic(t + "/run.sh", "#!/bin/sh\n", 0755);
  write_file_atomic(t + "/empty", "", 0600);
  std::string big(3 * (1 << 20) + 123, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + i % 26);
  write_file_atomic(t + "/sub/big.bin", big, 0644);
  std::string long_name(200, 'n');  // past ustar's 100-byte name field
  std::string long_dir = std::string(120, 'd');
  make_dirs(t + "/" + long_dir);
  write_file_atomic(t + "/" + long_dir + "/" + long_name, "long\n");
  std::string odd = "caf\xc3\xa9 \xff raw";  // UTF-8 and a byte that is not
  write_file_atomic(t + "/" + odd, "odd\n");
  ASSERT_EQ(::symlink("plain.txt", (t + "/link").c_str()), 0);
  ASSERT_EQ(::symlink(std::string(300, 'z').c_str(), (t + "/longlink").c_str()), 0);
  ASSERT_EQ(::link((t + "/plain.txt").c_str(), (t + "/sub/hard").c_str()), 0);
  ASSERT_EQ(::chmod((t + "/sub/deeper").c_str(), 0750), 0);
  set_mtime(t + "/plain.txt", 1600000000, 123456789);
  set_mtime(t + "/link", 1500000000, 5);
  set_mtime(t + "/sub/deeper", 1400000000, 999999999);
  set_mtime(t, 1300000000, 1);

  std::string data = archive_of(t);
  auto entries = list(data);
  EXPECT_EQ(entries.count("tree/sub/big.bin"), 1u);
  EXPECT_EQ(entries["tree/sub/big.bin"].second, static_cast<int64_t>(big.size()));
  UnpackStats s = extract(data, dst());
  EXPECT_EQ(s.hardlinks, 1u);
  std::string o = dst() + "/tree";
  EXPECT_EQ(read_file(o + "/plain.txt"), "hello\n");
  EXPECT_EQ(read_file(o + "/sub/big.bin"), big);
  EXPECT_EQ(read_file(o + "/" + long_dir + "/" + long_name), "long\n");
  EXPECT_EQ(read_file(o + "/" + odd), "odd\n");
  EXPECT_EQ(read_file(o + "/empty"), "");
  EXPECT_EQ(lstat_of(o + "/plain.txt").st_mode & 07777, 0640u);
  EXPECT_EQ(lstat_of(o + "/run.sh").st_mode & 07777, 0755u);
  EXPECT_EQ(lstat_of(o + "/sub/deeper").st_mode & 07777, 0750u);
  EXPECT_EQ(link_of(o + "/link"), "plain.txt");
  EXPECT_EQ(link_of(o + "/longlink"), std::string(300, 'z'));
  EXPECT_EQ(lstat_of(o + "/sub/hard").st_ino, lstat_of(o + "/plain.txt").st_ino);
  for (const auto& [rel, sec, nsec] : {std::tuple<std::string, time_t, long>{"plain.txt", 1600000000, 123456789},
                                       {"link", 1500000000, 5},
                                       {"sub/deeper", 1400000000, 999999999},
                                       {"", 1300000000, 1}}) {
    struct stat st = lstat_of(rel.empty() ? o : o + "/" + rel);
    EXPECT_EQ(st.st_mtim.tv_sec, sec) << rel;
    EXPECT_EQ(st.st_mtim.tv_nsec, nsec) << rel;
  }
}

TEST_F(CopyArchiveTest, PlacementFollowsDockerCp) {
  write_file_atomic(src() + "/f.txt", "file\n", 0644);
  make_dirs(src() + "/d/inner");
  write_file_atomic(src() + "/d/inner/x", "x\n");
  std::string file = archive_of(src() + "/f.txt");
  std::string dir = archive_of(src() + "/d");

  extract(file, dst());  // into an existing directory
  EXPECT_EQ(read_file(dst() + "/f.txt"), "file\n");
  extract(file, dst() + "/renamed.txt");  // a new name
  EXPECT_EQ(read_file(dst() + "/renamed.txt"), "file\n");
  write_file_atomic(dst() + "/old.txt", "old\n");
  extract(file, dst() + "/old.txt");  // overwrite
  EXPECT_EQ(read_file(dst() + "/old.txt"), "file\n");

  extract(dir, dst());  // include_parent
  EXPECT_EQ(read_file(dst() + "/d/inner/x"), "x\n");
  make_dirs(dst() + "/flat");
  CopyExtractOptions contents;
  contents.include_parent = false;
  extract(dir, dst() + "/flat", contents);
  EXPECT_EQ(read_file(dst() + "/flat/inner/x"), "x\n");
  extract(dir, dst() + "/newdir/");  // a new directory takes the contents
  EXPECT_EQ(read_file(dst() + "/newdir/inner/x"), "x\n");
  EXPECT_TRUE(copy_wants_contents("/a/b/."));
  EXPECT_TRUE(copy_wants_contents("/"));
  EXPECT_FALSE(copy_wants_contents("/a/b"));
  EXPECT_EQ(copy_top_name("/a/b/."), "b");
  EXPECT_EQ(copy_top_name("/a/b/../c/"), "c");
}

TEST_F(CopyArchiveTest, PlacementErrorsNameThePathAndCreateNothing) {
  write_file_atomic(src() + "/f.txt", "file\n");
  make_dirs(src() + "/d");
  std::string file = archive_of(src() + "/f.txt");
  std::string dir = archive_of(src() + "/d");
  std::string msg;
  EXPECT_EQ(kind_of([&] { extract(file, dst() + "/missing/x"); }, &msg), ErrorKind::NotFound);
  EXPECT_NE(msg.find(dst() + "/missing"), std::string::npos) << msg;
  EXPECT_EQ(kind_of([&] { extract(file, dst() + "/nodir/"); }), ErrorKind::NotFound);
  write_file_atomic(dst() + "/a-file", "keep\n");
  EXPECT_EQ(kind_of([&] { extract(dir, dst() + "/a-file"); }, &msg), ErrorKind::InvalidArgument);
  EXPECT_NE(msg.find("cannot copy a directory onto the non-directory"), std::string::npos) << msg;
  EXPECT_EQ(kind_of([&] { extract(file, dst() + "/a-file/"); }), ErrorKind::InvalidArgument);
  CopyExtractOptions keep;
  keep.overwrite = false;
  EXPECT_EQ(kind_of([&] { extract(file, dst() + "/a-file", keep); }, &msg), ErrorKind::AlreadyExists);
  EXPECT_NE(msg.find(dst() + "/a-file"), std::string::npos) << msg;
  EXPECT_EQ(read_file(dst() + "/a-file"), "keep\n");
  make_dirs(dst() + "/f.txt");  // a directory where the file would go
  EXPECT_EQ(kind_of([&] { extract(file, dst()); }), ErrorKind::AlreadyExists);
  EXPECT_EQ(kind_of([&] { extract("", dst() + "/never"); }), ErrorKind::Storage);
  EXPECT_FALSE(path_exists(dst() + "/never"));
  EXPECT_EQ(kind_of([&] { archive_of(src() + "/nope"); }, &msg), ErrorKind::NotFound);
  EXPECT_NE(msg.find(src() + "/nope"), std::string::npos) << msg;
  EXPECT_EQ(kind_of([&] { archive_of(src() + "/f.txt/"); }), ErrorKind::InvalidArgument);
}

TEST_F(CopyArchiveTest, SymlinksInTheSourceAreNeverFollowedExceptTheNamedOneWhenAsked) {
  make_dirs(src() + "/out");
  ASSERT_EQ(::symlink("/etc", (src() + "/out/evil").c_str()), 0);
  ASSERT_EQ(::symlink("/etc/passwd", (src() + "/out/pw").c_str()), 0);
  auto entries = list(archive_of(src() + "/out"));
  EXPECT_EQ(entries.size(), 3u);  // out/, and the two links as links
  EXPECT_EQ(entries["out/evil"].first, AE_IFLNK);
  EXPECT_EQ(entries["out/pw"].first, AE_IFLNK);

  write_file_atomic(src() + "/real", "real\n");
  ASSERT_EQ(::symlink("real", (src() + "/named").c_str()), 0);
  EXPECT_EQ(list(archive_of(src() + "/named"))["named"].first, AE_IFLNK);
  CopyWriteOptions follow;
  follow.follow_symlinks = true;
  extract(archive_of(src() + "/named", follow), dst());
  EXPECT_EQ(read_file(dst() + "/named"), "real\n");
  EXPECT_FALSE(S_ISLNK(lstat_of(dst() + "/named").st_mode));
}

// A hostile archive (what a box could send for copy_out) and a hostile destination
// (what a box could plant before a copy_in): nothing is written outside the target.
TEST_F(CopyArchiveTest, HostileArchivesStayInsideTheTarget) {
  std::string outside = tmp_ / "outside";
  make_dirs(outside);
  write_file_atomic(outside + "/canary", "canary\n");
  auto tar = [&](const std::function<void(TarWriter&)>& fill) {
    std::string p = tmp_ / "hostile.tar";
    TarWriter w(p);
    fill(w);
    w.close();
    return read_file(p);
  };
  // Siblings of the named tree, ".." and absolute paths all stay under it or fail.
  EXPECT_NE(kind_of([&] { extract(tar([](TarWriter& w) { w.dir("top/").file("other/x", "x"); }), dst()); }),
            std::nullopt);
  EXPECT_FALSE(path_exists(dst() + "/other"));
  EXPECT_NE(kind_of([&] { extract(tar([](TarWriter& w) { w.dir("top/").file("top/../../x", "x"); }), dst()); }),
            std::nullopt);
  EXPECT_FALSE(path_exists(tmp_ / "x"));
  EXPECT_FALSE(path_exists(dst() + "/x"));
  // A single file's archive carries nothing else (it would land beside the file).
  EXPECT_NE(kind_of([&] {
              extract(tar([](TarWriter& w) { w.symlink("f", "/").file("f/etc/passwd", "x"); }), dst() + "/newname");
            }),
            std::nullopt);
  EXPECT_FALSE(path_exists(dst() + "/etc"));
  // Hardlinks out of the tree.
  EXPECT_NE(kind_of([&] {
              extract(tar([&](TarWriter& w) { w.dir("top/").hardlink("top/h", outside + "/canary"); }), dst());
            }),
            std::nullopt);

  // Symlinks planted in the destination tree point outside it.
  std::string target = dst() + "/t";
  make_dirs(target + "/top");
  ASSERT_EQ(::symlink(outside.c_str(), (target + "/top/up").c_str()), 0);
  ASSERT_EQ(::symlink((outside + "/canary").c_str(), (target + "/top/f").c_str()), 0);
  // A path through the planted link resolves inside the target (RESOLVE_IN_ROOT).
  extract(tar([](TarWriter& w) { w.dir("top/").file("top/up/evil", "evil\n"); }), target);
  EXPECT_EQ(read_file(target + "/top" + outside + "/evil"), "evil\n");
  // A file over the planted link replaces the link, never writes through it.
  extract(tar([](TarWriter& w) { w.dir("top/").file("top/f", "mine\n"); }), target);
  EXPECT_EQ(read_file(target + "/top/f"), "mine\n");
  EXPECT_FALSE(S_ISLNK(lstat_of(target + "/top/f").st_mode));
  // A directory over the planted link is refused.
  EXPECT_EQ(kind_of([&] {
              extract(tar([](TarWriter& w) { w.dir("top/").dir("top/up/").file("top/up/evil2", "e"); }), target);
            }),
            ErrorKind::AlreadyExists);
  // A hardlink through the planted link finds nothing.
  ::symlink(outside.c_str(), (target + "/top/up2").c_str());
  EXPECT_NE(
      kind_of([&] { extract(tar([](TarWriter& w) { w.dir("top/").hardlink("top/h", "top/up2/canary"); }), target); }),
      std::nullopt);
  EXPECT_EQ(read_file(outside + "/canary"), "canary\n");
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(outside)) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"canary"});

  // setuid/setgid bits are dropped when asked (copy_out runs as root on the host).
  CopyExtractOptions strip;
  strip.strip_setid = true;
  extract(tar([](TarWriter& w) { w.file("suid", "x", 06755); }), dst() + "/suid", strip);
  EXPECT_EQ(lstat_of(dst() + "/suid").st_mode & 07777, 0755u);
}

// What a box sends back is checked against what was asked for: a hostile box that
// answers a request for report.txt with .bashrc (or a tree named .ssh) places
// nothing. Directories lose their set-id bits as files do, and runs of zeros are
// left as holes, so that a box's sparse file does not fill the host's disk.
TEST_F(CopyArchiveTest, AnArchiveFromABoxIsTheNameAskedForWithoutSetIdAndItsZerosStayHoles) {
  auto tar = [&](const std::function<void(TarWriter&)>& fill) {
    std::string p = tmp_ / "from-box.tar";
    TarWriter w(p);
    fill(w);
    w.close();
    return read_file(p);
  };
  CopyExtractOptions asked;
  asked.expected_top = "report.txt";
  asked.strip_setid = true;
  EXPECT_EQ(kind_of([&] { extract(tar([](TarWriter& w) { w.file(".bashrc", "evil\n"); }), dst(), asked); }),
            ErrorKind::Storage);
  EXPECT_FALSE(path_exists(dst() + "/.bashrc"));
  asked.expected_top = "results";
  EXPECT_EQ(kind_of([&] {
              extract(tar([](TarWriter& w) { w.dir(".ssh/").file(".ssh/authorized_keys", "k\n"); }), dst(), asked);
            }),
            ErrorKind::Storage);
  EXPECT_FALSE(path_exists(dst() + "/.ssh"));
  // The name asked for is placed, its directories without set-id bits.
  extract(tar([](TarWriter& w) { w.dir("results/", 07777).dir("results/sub/", 02775).file("results/f", "x"); }), dst(),
          asked);
  EXPECT_EQ(lstat_of(dst() + "/results").st_mode & 07777, 01777u);
  EXPECT_EQ(lstat_of(dst() + "/results/sub").st_mode & 07777, 0775u);
  // 8 MiB of zeros around one byte of data take a block or two, not 8 MiB.
  std::string sparse(8 << 20, '\0');
  sparse[(4 << 20) + 1] = 'x';
  asked.expected_top = "big";
  extract(tar([&](TarWriter& w) { w.file("big", sparse); }), dst(), asked);
  EXPECT_TRUE(read_file(dst() + "/big") == sparse);
  EXPECT_LE(lstat_of(dst() + "/big").st_blocks * 512, 64 * 1024);
}

TEST_F(CopyArchiveTest, ArchivesFromLibarchiveAreAcceptedToo) {
  std::string p = tmp_ / "la.tar";
  {
    TarWriter w(p);
    w.dir("top/", 0711).file("top/a", "a\n", 0600).symlink("top/l", "a");
    w.close();
  }
  extract(read_file(p), dst() + "/placed");
  EXPECT_EQ(read_file(dst() + "/placed/a"), "a\n");
  EXPECT_EQ(lstat_of(dst() + "/placed").st_mode & 07777, 0711u);
  EXPECT_EQ(link_of(dst() + "/placed/l"), "a");
}

}  // namespace
}  // namespace boxlite::image
