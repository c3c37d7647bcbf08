// A guest that floods what the host keeps of it: its serial console (and through
// it QEMU's log) is capped by the shim, so a box cannot fill the host's disk.
#include <sys/stat.h>

#include "core/runtime.hpp"
#include "support.hpp"

namespace boxlite::testing {
namespace {

class HostileGuestTest : public BoxliteTest {};

off_t file_size(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

TEST_F(HostileGuestTest, AConsoleFloodIsCappedOnTheHost) {
  Runtime rt;
  BoxOptions o;
  o.image = image("busybox");
  o.engine = "vm";
  auto box = rt.create(o);
  // 3 MiB through the serial console: three times what one console.log keeps.
  auto r = box->run(ExecOptions{.argv = {"sh", "-c", "head -c 3145728 /dev/zero | tr '\\0' x > /dev/console; echo done"}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "done\n");
  std::string log = box->dir() + "/console.log";
  EXPECT_LE(file_size(log), 1 << 20);
  EXPECT_GT(file_size(log + ".1"), 0) << "the older part moved aside";
  EXPECT_LE(file_size(log + ".1"), 1 << 20);
  EXPECT_EQ(file_size(log + ".2"), -1) << "never more than two files";
  // The newest output is what the log keeps, and the box still answers.
  EXPECT_NE(read_file(log).find("xxxxxxxx"), std::string::npos);
  EXPECT_EQ(box->run(ExecOptions{.argv = {"echo", "alive"}}).stdout_text, "alive\n");
  box->destroy();
  expect_no_leftovers();
}

}  // namespace
}  // namespace boxlite::testing
