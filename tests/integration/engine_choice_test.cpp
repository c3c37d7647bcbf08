// Choosing the engine: option, BOXLITE_ENGINE, the home config file; and `info`.
#include <nlohmann/json.hpp>

#include <tuple>

#include "support.hpp"

namespace boxlite::testing {
namespace {

class EngineChoiceTest : public BoxliteTest {
 protected:
  // A jail shares the host's kernel, so its /proc/cmdline is the host's; a VM
  // boots its own kernel with a command line of its own.
  std::string engine_of_run(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"run", "--rm"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {image("busybox"), "cat", "/proc/cmdline"});
    auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.out.empty());
    return r.out == read_file("/proc/cmdline") ? "jail" : "vm";
  }
};

TEST_F(EngineChoiceTest, DefaultIsVmAndJailOnlyWhenAskedFor) {
  ::unsetenv("BOXLITE_ENGINE");
  EXPECT_EQ(engine_of_run(), "vm");
  EXPECT_EQ(engine_of_run({"--engine", "jail"}), "jail");
  ::setenv("BOXLITE_ENGINE", "jail", 1);
  EXPECT_EQ(engine_of_run(), "jail");
  EXPECT_EQ(engine_of_run({"--engine", "vm"}), "vm");
  ::unsetenv("BOXLITE_ENGINE");
}

TEST_F(EngineChoiceTest, HomeConfigChoosesTheEngineAndTheEnvironmentBeatsIt) {
  ::unsetenv("BOXLITE_ENGINE");
  write_file_atomic(home_ + "/config.json", R"({"engine": "jail"})");
  EXPECT_EQ(engine_of_run(), "jail");
  ::setenv("BOXLITE_ENGINE", "vm", 1);
  EXPECT_EQ(engine_of_run(), "vm");
  ::unsetenv("BOXLITE_ENGINE");
}

TEST_F(EngineChoiceTest, ABadHomeConfigIsAClearError) {
  write_file_atomic(home_ + "/config.json", R"({"engine": "teleport"})");
  auto r = run_cli({"run", "--rm", image("busybox"), "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("config.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("teleport"), std::string::npos) << r.err;
  write_file_atomic(home_ + "/config.json", "{oops");
  r = run_cli({"run", "--rm", image("busybox"), "true"});
  EXPECT_NE(r.err.find("config.json"), std::string::npos) << r.err;
}

TEST_F(EngineChoiceTest, InfoReportsEnginesAndAcceleratorsWithReasons) {
  auto r = run_cli({"info", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["engines"]["vm"]["usable"].get<bool>());
  EXPECT_TRUE(j["engines"]["jail"]["usable"].get<bool>());
  EXPECT_TRUE(j["accelerators"]["tcg"]["usable"].get<bool>());
  if (!j["accelerators"]["kvm"]["usable"].get<bool>()) {
    EXPECT_FALSE(j["accelerators"]["kvm"]["reason"].get<std::string>().empty());
  }
  EXPECT_EQ(j["default_engine"], "vm");
  auto yaml = run_cli({"info"});
  EXPECT_NE(yaml.out.find("engines:\n"), std::string::npos) << yaml.out;
}

// A host that refuses namespaces (a limit reached, a container, a policy; here a
// seccomp filter answering as the kernel does at a limit, tools/refuse_namespaces.cpp):
// `info` says the jail is not usable and why, and a jail box fails at once with that
// reason, leaving nothing. Both places a box makes namespaces: the zygote's clone
// (user, pid, mount, uts, ipc) and the first process's network namespace.
TEST_F(EngineChoiceTest, AHostRefusingNamespacesIsSaidByInfoAndAJailBoxLeavesNothing) {
  auto run_refusing = [&](const std::string& kind, std::vector<std::string> args) {
    return run_cli_under({bin_dir() + "/boxlite_refuse_namespaces", kind}, std::move(args));
  };
  for (auto [kind, limit, step] : {std::tuple{"net", "max_net_namespaces", "make the box's network namespace"},
                                   std::tuple{"pid", "max_pid_namespaces", "clone the box's namespaces"}}) {
    SCOPED_TRACE(kind);
    auto info = run_refusing(kind, {"info", "--format", "json"});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    auto jail = nlohmann::json::parse(info.out)["engines"]["jail"];
    EXPECT_FALSE(jail["usable"].get<bool>());
    EXPECT_NE(jail["reason"].get<std::string>().find(limit), std::string::npos) << jail;
    auto r = run_refusing(kind, {"run", "--rm", "--engine", "jail", image("busybox"), "true"});
    EXPECT_EQ(r.exit_code, 125) << r.err;
    EXPECT_NE(r.err.find(step), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(limit), std::string::npos) << r.err;
    EXPECT_EQ(trim(run_cli({"ls", "-a", "-q"}).out), "") << "a box of the failed run is listed";
    expect_no_leftovers();
    EXPECT_EQ(read_file("/proc/self/mountinfo").find(home_), std::string::npos) << "a mount of the box remains";
  }
  auto info = run_cli({"info", "--format", "json"});
  EXPECT_TRUE(nlohmann::json::parse(info.out)["engines"]["jail"]["usable"].get<bool>()) << info.out;
}

}  // namespace
}  // namespace boxlite::testing
