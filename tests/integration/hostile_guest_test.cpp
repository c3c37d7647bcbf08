// A guest that floods what the host keeps of it: its serial console (and through
// it QEMU's log) is capped by the shim, so a box cannot fill the host's disk.
#include <sys/stat.h>

#include "core/runtime.hpp"
#include "support.hpp"

namespace boxlite::testing {
namespace {

class HostileGuestTest : public BoxliteTest {};

off_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

// The Seccomp: line of the box's QEMU (0 off, 2 filtering), "" when not found.
std::string qemu_seccomp_mode(const std::string& box_dir) {
  for (pid_t p : processes_mentioning(box_dir)) {
    if (trim(read_file("/proc/" + std::to_string(p) + "/comm")).rfind("qemu", 0) != 0) continue;
    for (const auto& line : split(read_file("/proc/" + std::to_string(p) + "/status"), '\n')) {
      if (line.rfind("Seccomp:", 0) == 0) return trim(line.substr(8));
    }
  }
  return "";
}

// The VMM a hostile guest attacks runs under QEMU's own seccomp filter unless the
// box's SecurityOptions turn seccomp off.
TEST_F(HostileGuestTest, TheVmmRunsUnderSeccompUnlessTurnedOff) {
  Runtime rt;
  for (bool seccomp : {true, false}) {
    BoxOptions o;
    o.image = image("busybox");
    o.engine = EngineKind::Vm;
    o.security.seccomp = seccomp;
    auto box = rt.create(o);
    ASSERT_EQ(box->run(ExecOptions{.argv = {"true"}}).exit_code, 0);
    EXPECT_EQ(qemu_seccomp_mode(local(*box).dir()), seccomp ? "2" : "0");
    box->destroy();
  }
}

TEST_F(HostileGuestTest, AConsoleFloodIsCappedOnTheHost) {
  Runtime rt;
  BoxOptions o;
  o.image = image("busybox");
  o.engine = EngineKind::Vm;
  auto box = rt.create(o);
  // 3 MiB through the serial console: three times what one console.log keeps.
  auto r =
      box->run(ExecOptions{.argv = {"sh", "-c", "head -c 3145728 /dev/zero | tr '\\0' x > /dev/console; echo done"}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "done\n");
  std::string log = local(*box).dir() + "/console.log";
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
