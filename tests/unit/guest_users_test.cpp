#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "common/io.hpp"
#include "guest/users.hpp"
#include "image/test_support.hpp"

namespace boxlite::guest {
namespace {

class UsersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file_atomic(
        dir_ + "/passwd",
        "root:x:0:0:root:/root:/bin/sh\n# comment\nalice:x:1000:1000::/home/alice:/bin/sh\nbroken-line\n");
    write_file_atomic(dir_ + "/group", "root:x:0:\nalice:x:1000:\nwheel:x:10:alice,bob\ndocker:x:999:bob\n");
  }
  Identity resolve(const std::string& spec) { return resolve_identity(spec, dir_ + "/passwd", dir_ + "/group"); }
  image::testing::ScratchDir scratch_;
  std::string dir_ = scratch_.path();
};

TEST_F(UsersTest, NameResolvesUidGidHomeAndSupplementaryGroups) {
  auto id = resolve("alice");
  EXPECT_EQ(id.uid, 1000u);
  EXPECT_EQ(id.gid, 1000u);
  EXPECT_EQ(id.home, "/home/alice");
  EXPECT_EQ(id.groups, (std::vector<gid_t>{1000, 10}));
}

TEST_F(UsersTest, NumericUserAndGroupNeedNoEntries) {
  auto id = resolve("4242:77");
  EXPECT_EQ(id.uid, 4242u);
  EXPECT_EQ(id.gid, 77u);
  EXPECT_EQ(id.home, "/");
}

TEST_F(UsersTest, NumericUserFoundInPasswdGetsItsHome) {
  auto id = resolve("1000");
  EXPECT_EQ(id.home, "/home/alice");
}

TEST_F(UsersTest, GroupByName) {
  auto id = resolve("alice:wheel");
  EXPECT_EQ(id.gid, 10u);
}

TEST_F(UsersTest, UnknownNamesAreClearErrors) {
  try {
    resolve("mallory");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("unable to find user mallory"), std::string::npos);
  }
  EXPECT_THROW(resolve("alice:nogroup"), Error);
}

// A hostile image's user database: a device, a FIFO or a huge file is read neither
// forever nor whole.
TEST_F(UsersTest, ADeviceFifoOrHugeUserDatabaseIsNeverReadWhole) {
  ASSERT_EQ(::unlink((dir_ + "/passwd").c_str()), 0);
  ASSERT_EQ(::symlink("/dev/zero", (dir_ + "/passwd").c_str()), 0);
  EXPECT_EQ(resolve("4242").uid, 4242u) << "numeric users still run";
  EXPECT_THROW(resolve("alice"), Error) << "names are not found";
  ASSERT_EQ(::unlink((dir_ + "/passwd").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir_ + "/passwd").c_str(), 0600), 0);
  EXPECT_EQ(resolve("7").uid, 7u) << "no writer is waited for";
  ASSERT_EQ(::unlink((dir_ + "/passwd").c_str()), 0);
  UniqueFd f(::open((dir_ + "/passwd").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(f);
  ASSERT_EQ(::ftruncate(f.get(), off_t{64} << 20), 0);  // sparse
  try {
    resolve("alice");
    FAIL() << "a 64 MiB passwd was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("over the 16 MiB"), std::string::npos) << e.what();
  }
  EXPECT_EQ(resolve("1000").home, "/") << "a numeric user needs no name from it";
}

TEST_F(UsersTest, EmptySpecIsRoot) {
  auto id = resolve("");
  EXPECT_EQ(id.uid, 0u);
  EXPECT_EQ(id.home, "/root");
}

}  // namespace
}  // namespace boxlite::guest
