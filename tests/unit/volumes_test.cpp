// Volume validation and the documented forms (issue 8): no box is made here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/io.hpp"
#include "core/volumes.hpp"
#include "image/test_support.hpp"

namespace boxlite {
namespace {

std::string error_of(const std::function<void()>& fn, ErrorKind want = ErrorKind::InvalidArgument) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), want) << e.what();
    return e.what();
  }
  return "no error";
}

class VolumesTest : public ::testing::Test {
 protected:
  image::testing::ScratchDir scratch_;
  std::string dir_ = scratch_.path();
};

TEST_F(VolumesTest, TupleAndDictFormsMapToVolumeSpec) {
  auto v = volume_from_json(nlohmann::json::array({"/h", "/g"}));
  EXPECT_EQ(v.host_path, "/h");
  EXPECT_EQ(v.guest_path, "/g");
  EXPECT_FALSE(v.read_only);
  EXPECT_TRUE(volume_from_json(nlohmann::json::array({"/h", "/g", true})).read_only);
  EXPECT_FALSE(volume_from_json(nlohmann::json::array({"/h", "/g", false})).read_only);
  v = volume_from_json({{"host_path", "/h"}, {"guest_path", "/g"}, {"ro", true}});
  EXPECT_EQ(v.host_path, "/h");
  EXPECT_TRUE(v.read_only);
  v = volume_from_json({{"host", "/h"}, {"guest", "/g"}});
  EXPECT_FALSE(v.read_only);
  EXPECT_TRUE(volume_from_json({{"host", "/h"}, {"guest", "/g"}, {"read_only", true}}).read_only);
}

TEST_F(VolumesTest, WrongShapesGiveTheDocumentedErrors) {
  EXPECT_EQ(error_of([] {
              volume_from_json(nlohmann::json::array({"/h", "/g", "ro"}));
            }),
            "argument 'volumes': 'str' object cannot be cast as 'bool'");
  EXPECT_EQ(error_of([] { volume_from_json(nlohmann::json::array({"/h"})); }),
            "volumes tuples must be (host, guest[, read_only])");
  EXPECT_EQ(error_of([] {
              volume_from_json(nlohmann::json::array({"/h", "/g", true, 1}));
            }),
            "volumes tuples must be (host, guest[, read_only])");
  EXPECT_EQ(error_of([] { volume_from_json({{"guest", "/workspace"}}); }), "volume dict missing host/host_path");
  EXPECT_EQ(error_of([] { volume_from_json({{"host", "/h"}}); }), "volume dict missing guest/guest_path");
  EXPECT_EQ(error_of([] { volume_from_json("/h:/g"); }), "volumes entries must be tuple or dict");
}

TEST_F(VolumesTest, CliFormTakesRoAndRwStrings) {
  auto v = parse_volume_flag("/h:/g:ro");
  EXPECT_TRUE(v.read_only);
  EXPECT_EQ(v.guest_path, "/g");
  EXPECT_FALSE(parse_volume_flag("/h:/g:rw").read_only);
  EXPECT_FALSE(parse_volume_flag("/h:/g").read_only);
  EXPECT_NE(error_of([] { parse_volume_flag("/h:/g:yes"); }).find("expected ro or rw"), std::string::npos);
  EXPECT_NE(error_of([] { parse_volume_flag("/h"); }).find("HOST:GUEST[:ro|:rw]"), std::string::npos);
  EXPECT_NE(error_of([] { parse_volume_flag("/h:/g:ro:x"); }).find("HOST:GUEST[:ro|:rw]"), std::string::npos);
}

TEST_F(VolumesTest, MountPathRulesFollowTheDocumentedTable) {
  for (const char* ok : {"/data", "/mnt/models", "/srv/cache", "/workspace", "/data/"}) {
    EXPECT_NO_THROW(validate_volume({dir_, ok, false})) << ok;
  }
  auto err = [&](const std::string& g) { return error_of([&] { validate_volume({dir_, g, false}); }); };
  EXPECT_EQ(err("data"), "Invalid mount path 'data' (must be absolute)");
  EXPECT_EQ(err(""), "Invalid mount path '' (must be absolute)");
  EXPECT_NE(err("/").find("cannot mount to the root directory"), std::string::npos);
  EXPECT_NE(err("//").find("cannot mount to the root directory"), std::string::npos);
  EXPECT_NE(err("/data/../etc").find("cannot contain relative path components"), std::string::npos);
  EXPECT_NE(err("/data/./x").find("cannot contain relative path components"), std::string::npos);
  EXPECT_NE(err("/data//cache").find("cannot contain consecutive slashes"), std::string::npos);
  for (const char* sys :
       {"/proc", "/sys", "/dev", "/boot", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/etc/ssl", "/dev/"}) {
    EXPECT_NE(err(sys).find("cannot mount to system directory"), std::string::npos) << sys;
  }
  EXPECT_NO_THROW(validate_volume({dir_, "/library", false}));  // only whole components count
  EXPECT_NO_THROW(validate_volume({dir_, "/etcetera", false}));
}

TEST_F(VolumesTest, HostPathMustBeAnExistingAbsoluteDirectory) {
  EXPECT_EQ(error_of([&] {
              validate_volume({"rel/dir", "/data", false});
            }),
            "Invalid host path 'rel/dir' (must be absolute)");
  EXPECT_NE(error_of([&] {
              validate_volume({dir_ + "/missing", "/data", false});
            }).find("does not exist"),
            std::string::npos);
  write_file_atomic(dir_ + "/file", "x");
  EXPECT_NE(error_of([&] {
              validate_volume({dir_ + "/file", "/data", false});
            }).find("is not a directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              validate_volumes({{dir_, "/a", false}, {dir_, "/a/", true}});
            }).find("two volumes"),
            std::string::npos);
}

}  // namespace
}  // namespace boxlite
