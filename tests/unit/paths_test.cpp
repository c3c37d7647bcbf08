// Where a home is when nothing names it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "common/io.hpp"
#include "core/paths.hpp"

namespace {

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The home directory /etc/passwd gives this uid, parsed independently of paths.cpp.
std::string passwd_dir_of_this_uid() {
  std::string uid = std::to_string(::getuid());
  for (const auto& line : boxlite::split(boxlite::read_file("/etc/passwd"), '\n')) {
    auto f = boxlite::split(line, ':');
    if (f.size() >= 7 && f[2] == uid) return f[5];
  }
  return "";
}

TEST(PathsTest, BoxliteHomeThenHomeThenThePasswdEntry) {
  {
    ScopedEnv home("BOXLITE_HOME", "/somewhere/bl");
    EXPECT_EQ(boxlite::core::default_home(), "/somewhere/bl");
  }
  ScopedEnv unset_boxlite_home("BOXLITE_HOME", std::nullopt);
  {
    ScopedEnv home("HOME", "/home/someone");
    EXPECT_EQ(boxlite::core::default_home(), "/home/someone/.boxlite");
  }
  ScopedEnv unset_home("HOME", std::nullopt);
  std::string dir = passwd_dir_of_this_uid();
  ASSERT_FALSE(dir.empty()) << "this test needs an /etc/passwd entry for uid " << ::getuid();
  EXPECT_EQ(boxlite::core::default_home(), dir + "/.boxlite");
}

}  // namespace
