// The helper that holds a volume's id-mapped user namespace while its maps are
// written must never outlive the process that made it (a shim killed while it
// mounted a volume left one parked in pause() for good).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/io.hpp"
#include "engine/jail/jail.hpp"

namespace boxlite {
namespace {

constexpr const char* kLoopName = "blt-idmap-loop";

// Live processes named kLoopName (the name is inherited by the parked helpers). A
// zombie is dead: its new parent (whichever init adopted it) reaps it in its time.
std::vector<pid_t> loop_processes() {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = std::atoi(e.path().filename().c_str());
    if (pid <= 0) continue;
    auto comm = read_file_if_present(e.path().string() + "/comm");
    if (!comm || *comm != std::string(kLoopName) + "\n") continue;
    auto stat = read_file_if_present(e.path().string() + "/stat");
    if (stat && stat->rfind(')') != std::string::npos && stat->at(stat->rfind(')') + 2) == 'Z') continue;
    out.push_back(pid);
  }
  return out;
}

TEST(JailIdmapTest, TheParkedHelperDiesWithItsMakerHoweverItDies) {
  if (::geteuid() != 0) GTEST_SKIP() << "writing a user namespace's maps to host uid 1048576 needs root";
  const std::string map = "0 1048576 65536\n";
  for (int round = 0; round < 20; ++round) {
    pid_t maker = ::fork();
    ASSERT_GE(maker, 0);
    if (maker == 0) {
      ::prctl(PR_SET_NAME, kLoopName);
      for (;;) {
        try {
          engine::jail::make_idmap_userns(map, map);
        } catch (const Error&) {
          ::_exit(3);
        }
      }
    }
    ::usleep(20000 + 7000 * round);  // killed at a different point of its loop each time
    ::kill(maker, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(maker, &status, 0), maker);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the loop stopped by itself (status " << status << "): a map was refused";
    std::vector<pid_t> left;
    for (int i = 0; i < 100 && !(left = loop_processes()).empty(); ++i) ::usleep(10000);
    for (pid_t p : left) ::kill(p, SIGKILL);
    ASSERT_TRUE(left.empty()) << "round " << round << ": " << left.size()
                              << " helper(s) still parked after their maker was killed";
  }
}

}  // namespace
}  // namespace boxlite
