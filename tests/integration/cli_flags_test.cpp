// The CLI's flags as the reference documents them (docs/cli.md): repeatable flags
// that take one value each, options between `exec BOX` and `--`, the documented
// names (--disk-size, --security, exec --entrypoint), rm -a without -f, ID prefixes,
// and boxes the CLI clones that outlive it. Parsing is the engine's no matter: the
// jail engine keeps these quick.
#include <elf.h>

#include <array>
#include <cstring>
#include <map>

#include "common/file_lock.hpp"
#include "support.hpp"

namespace boxlite::testing {
namespace {

class CliFlagsTest : public BoxliteTest {
 protected:
  void SetUp() override {
    BoxliteTest::SetUp();
    ::setenv("BOXLITE_ENGINE", "jail", 1);
  }
  void TearDown() override {
    run_cli({"rm", "-f", "-a"});
    BoxliteTest::TearDown();
  }
  // A box that runs until removed, named `name`.
  void running(const std::string& name) {
    auto c = run_cli({"create", "--name", name, image("busybox")});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    auto s = run_cli({"start", name});
    ASSERT_EQ(s.exit_code, 0) << s.err;
  }
  // The CLI refuses `args` with `exit_code`, saying `text`.
  void expect_refused(std::vector<std::string> args, int exit_code, const std::string& text) {
    auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, exit_code) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
  }
  // `echo INPUT | boxlite ARGS...`
  CliResult run_cli_with_input(const std::string& input, const std::string& args) {
    RunResult r = run_capture({"/bin/sh", "-c", "printf '" + input + "' | " + cli() + " " + args});
    return {WIFEXITED(r.status) ? WEXITSTATUS(r.status) : 128 + WTERMSIG(r.status), r.out, r.err};
  }
};

// The CLI starts ~2 ms sooner as a static-pie executable (src/cli/CMakeLists.txt): no
// interpreter to load it, and still a position-independent one, loaded at a random
// address. Checked here so that a build change cannot lose either quietly.
TEST_F(CliFlagsTest, TheCliIsAStaticExecutableLoadedAtARandomAddress) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "the sanitizer build's CLI is dynamic (ASan interposes operator new)";
#endif
  std::string elf = read_file(cli());
  ASSERT_GE(elf.size(), sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  ASSERT_EQ(std::memcmp(eh.e_ident, ELFMAG, SELFMAG), 0);
  EXPECT_EQ(eh.e_type, ET_DYN) << "not position-independent: it would load at a fixed address";
  bool interp = false;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    ASSERT_LE(eh.e_phoff + (i + 1) * sizeof ph, elf.size());
    std::memcpy(&ph, elf.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    interp = interp || ph.p_type == PT_INTERP;
  }
  EXPECT_FALSE(interp) << cli() << " asks for a dynamic loader";
  // And it runs: a command that needs no box.
  auto v = run_cli({"--version"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
}

// Pulls run in boxlite-pull (docs/registry.md): without it, a pull names what is
// missing and where it was looked for, and a bad reference still fails as one,
// without needing the helper at all.
TEST_F(CliFlagsTest, APullWithoutItsHelperSaysWhatIsMissing) {
  std::string env = "BOXLITE_LIBEXEC_DIR=" + home_ + "/no-libexec ";
  RunResult r = run_capture({"/bin/sh", "-c", env + cli() + " pull 127.0.0.1:9/some/image"});
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), 125) << r.err;
  EXPECT_NE(r.err.find("cannot start the image pull helper"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(home_ + "/no-libexec/boxlite-pull"), std::string::npos) << r.err;
  RunResult bad = run_capture({"/bin/sh", "-c", env + cli() + " pull 'a//b'"});
  ASSERT_TRUE(WIFEXITED(bad.status));
  EXPECT_NE(WEXITSTATUS(bad.status), 0) << bad.err;
  EXPECT_EQ(bad.err.find("pull helper"), std::string::npos) << "a bad reference needs no helper: " << bad.err;
}

TEST_F(CliFlagsTest, EachEnvFlagTakesOneValueSoTheImageAndCommandStayPositional) {
  auto r = run_cli({"run", "--rm", "-e", "MY_VAR=hello", "-e", "X=2", image("busybox"), "sh", "-c", "echo $MY_VAR $X"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello 2\n");
  running("envbox");
  auto before = run_cli({"exec", "-e", "FOO=bar", "envbox", "--", "sh", "-c", "echo $FOO"});
  EXPECT_EQ(before.out, "bar\n") << before.err;
  // As clap takes them: options after BOX, up to the `--`.
  auto after = run_cli({"exec", "envbox", "-e", "FOO=baz", "-e", "Y=1", "--", "sh", "-c", "echo $FOO $Y"});
  EXPECT_EQ(after.out, "baz 1\n") << after.err;
  // Before and after BOX alike.
  auto both = run_cli({"exec", "-e", "A=1", "envbox", "-e", "B=2", "--", "sh", "-c", "echo $A $B"});
  EXPECT_EQ(both.out, "1 2\n") << both.err;
  // A command whose own arguments hold a `--` stays a command.
  EXPECT_EQ(run_cli({"exec", "envbox", "sh", "-c", "echo -- x"}).out, "-- x\n");
  // --debug among the command's words is the command's.
  auto word = run_cli({"exec", "envbox", "echo", "hello", "--debug"});
  EXPECT_EQ(word.out, "hello --debug\n");
  EXPECT_EQ(word.err, "") << "no trace";
  expect_refused({"exec", "envbox", "--bogus", "--", "true"}, 125, "--bogus");
  // And the global flags, global as clap's are.
  auto traced = run_cli({"exec", "envbox", "--debug", "-e", "Z=3", "--", "sh", "-c", "echo $Z"});
  EXPECT_EQ(traced.out, "3\n") << traced.err;
  EXPECT_NE(traced.err.find(" cli: exiting\n"), std::string::npos) << traced.err;
  expect_refused({"exec", "envbox", "--home", home_ + "/elsewhere", "--", "true"}, 1, "No such box: envbox");
  // The global --registry likewise, after the subcommand.
  auto reg = run_cli({"run", "--rm", "--registry", "localhost:1", image("busybox"), "echo", "ok"});
  EXPECT_EQ(reg.exit_code, 0) << reg.err;
  EXPECT_EQ(reg.out, "ok\n");
}

TEST_F(CliFlagsTest, ExecEntrypointIsTheExecutableAndTheCommandItsArguments) {
  running("ep");
  EXPECT_EQ(run_cli({"exec", "--entrypoint", "/bin/echo", "ep", "--", "a", "b"}).out, "a b\n");
  EXPECT_EQ(run_cli({"exec", "ep", "--entrypoint", "/bin/echo", "--", "c"}).out, "c\n");
  EXPECT_EQ(run_cli({"exec", "--entrypoint", "/bin/pwd", "ep"}).out, "/\n") << "no command but the entrypoint";
  expect_refused({"exec", "ep"}, 125, "no command given");
}

TEST_F(CliFlagsTest, DocumentedNamesAndOutOfRangeValuesAreClearErrors) {
  expect_refused({"run", "--rm", "--cpus", "0", image("busybox"), "true"}, 125,
                 "cpus must be between 1 and 255, got 0");
  expect_refused({"run", "--rm", "--memory", "0", image("busybox"), "true"}, 125, "got 0");
  expect_refused({"create", "--disk-size", "-1", image("busybox")}, 125,
                 "--disk-size must be a positive number of GB, got -1");
  // A jail box has a disk of its own, so its size is honoured, not refused.
  auto sized = run_cli({"create", "--disk-size", "4", image("busybox")});
  EXPECT_EQ(sized.exit_code, 0) << sized.err;
  auto seccomp = [&](std::vector<std::string> flags) {
    std::vector<std::string> args = {"run", "--rm"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {image("busybox"), "sh", "-c", "grep Seccomp: /proc/self/status"});
    return run_cli(args).out;
  };
  EXPECT_EQ(seccomp({}), "Seccomp:\t2\n") << "filtered by default";
  EXPECT_EQ(seccomp({"--security", "enable"}), "Seccomp:\t2\n");
  EXPECT_EQ(seccomp({"--security", "disable"}), "Seccomp:\t0\n");
  ::setenv("BOXLITE_SECURITY", "disable", 1);
  EXPECT_EQ(seccomp({}), "Seccomp:\t0\n") << "BOXLITE_SECURITY is --security";
  ::unsetenv("BOXLITE_SECURITY");
  expect_refused({"run", "--rm", "--network", "", image("busybox"), "true"}, 125, "enabled,disabled");
  expect_refused({"logs", "-n", "-1", "x"}, 125, "must be 0 (all) or a number of lines, got -1");
  expect_refused({"run", "--rm", "--security", "off", image("busybox"), "true"}, 125, "enable");
}

TEST_F(CliFlagsTest, RmAllLeavesRunningBoxesWithoutForce) {
  running("up");
  ASSERT_EQ(run_cli({"create", "--name", "idle", image("busybox")}).exit_code, 0);
  auto both = run_cli({"rm", "-a", "up"});
  EXPECT_EQ(both.exit_code, 125) << "names or --all, not both";
  auto yes = run_cli_with_input("y\\n", "rm -a");
  EXPECT_EQ(yes.exit_code, 1) << yes.err;
  EXPECT_NE(yes.err.find("is running"), std::string::npos) << yes.err;
  EXPECT_EQ(trim(run_cli({"list", "-a", "--format", "json"}).out).find("idle"), std::string::npos) << "idle went";
  EXPECT_EQ(trim(run_cli({"inspect", "-f", "{{.State.Status}}", "up"}).out), "running") << "up stays";
  EXPECT_EQ(run_cli({"rm", "-a", "-f"}).exit_code, 0);
  EXPECT_EQ(trim(run_cli({"list", "-a", "-q"}).out), "");
}

TEST_F(CliFlagsTest, AnAmbiguousIdPrefixSaysSoAndANameMayBeAnotherBoxsIdPrefix) {
  // Boxes until two IDs share a first character (36 possible: a few suffice).
  std::map<char, std::string> by_first;
  std::string a, b;
  for (int i = 0; i < 40 && a.empty(); ++i) {
    auto r = run_cli({"create", image("busybox")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string id = trim(r.out);
    auto [it, fresh] = by_first.emplace(id[0], id);
    if (!fresh) a = it->second, b = id;
  }
  ASSERT_FALSE(a.empty());
  std::string prefix(1, a[0]);
  expect_refused({"inspect", prefix}, 125, "'" + prefix + "' is ambiguous");
  EXPECT_EQ(trim(run_cli({"inspect", "-f", "{{.Id}}", a.substr(0, 11)}).out), a) << "a unique prefix names the box";
  // A name is matched exactly, never as a prefix of another box's ID.
  auto named = run_cli({"create", "--name", b.substr(0, 4), image("busybox")});
  EXPECT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(trim(run_cli({"inspect", "-f", "{{.Name}}", b.substr(0, 4)}).out), b.substr(0, 4));
}

TEST_F(CliFlagsTest, ABoxTheCliClonedKeepsRunningAfterTheStartThatStartedIt) {
  running("source");
  ASSERT_EQ(run_cli({"exec", "source", "--", "sh", "-c", "echo m > /root/marker"}).exit_code, 0);
  auto clone = run_cli({"clone", "source", "--name", "copy"});
  ASSERT_EQ(clone.exit_code, 0) << clone.err;
  ASSERT_EQ(run_cli({"start", "copy"}).exit_code, 0);
  EXPECT_EQ(trim(run_cli({"inspect", "-f", "{{.State.Status}}/{{.Config.Detach}}", "copy"}).out), "running/true");
  auto r = run_cli({"exec", "copy", "--", "cat", "/root/marker"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "m\n");
}

}  // namespace
}  // namespace boxlite::testing

namespace boxlite::testing {
namespace {

// `image prune` also takes what a killed build left (a layer's scratch directory,
// once no builder holds its lock), and counts the layer directories it removes.
TEST_F(CliFlagsTest, ImagePruneTakesAbandonedBuildsAndCountsWhatItFrees) {
  ASSERT_EQ(run_cli({"run", "--rm", image("busybox"), "true"}).exit_code, 0);
  std::string layers = home_ + "/images/layers";
  std::string some_layer;
  for (const auto& n : dir_entries(layers)) {
    if (!n.starts_with("boxlite-") && !n.starts_with(".")) some_layer = n;
  }
  ASSERT_FALSE(some_layer.empty());
  std::string hex = some_layer.substr(0, some_layer.find('-'));
  std::string offset = some_layer.substr(some_layer.find('-') + 1);
  std::string abandoned = layers + "/.tmp-" + hex.substr(0, 12) + "-" + offset + "-aAbBcC";
  std::string building = layers + "/.tmp-" + hex.substr(0, 12) + "-" + offset + "-dDeEfF";
  for (const auto& d : {abandoned, building}) {
    make_dirs(d + "/usr/lib");
    write_file_atomic(d + "/usr/lib/big", std::string(1 << 20, 'x'));
  }
  {
    // A builder at work holds its layer's lock while its scratch exists.
    FileLock builder = FileLock::acquire(home_ + "/locks/layer-" + some_layer + ".lock");
    auto r = run_cli({"image", "prune"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(path_exists(building)) << "a build in progress is left alone";
    EXPECT_TRUE(path_exists(abandoned)) << "the same lock covers both: neither goes while it is held";
  }
  auto r = run_cli({"image", "prune"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(path_exists(abandoned));
  EXPECT_FALSE(path_exists(building));
  EXPECT_EQ(r.out.find("Total reclaimed space: 0B"), std::string::npos) << r.out;
}

TEST_F(CliFlagsTest, ImagePruneCountsTheLayerDirectoriesItRemoves) {
  ASSERT_EQ(run_cli({"run", "--rm", image("busybox"), "true"}).exit_code, 0);
  // The busybox layout is in no store: its cached layers are unused, and counted as they go.
  auto r = run_cli({"image", "prune"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const auto& n : dir_entries(home_ + "/images/layers")) EXPECT_TRUE(n.starts_with("boxlite-")) << n;
  EXPECT_EQ(r.out.find("Total reclaimed space: 0B"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace boxlite::testing

namespace boxlite::testing {
namespace {

TEST_F(CliFlagsTest, DebugTracesEachStepAndNamesErrorCodesAndUnknownCommandsAreNamed) {
  auto r = run_cli({"--debug", "run", "--rm", image("busybox"), "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(" cli: main\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" cli: exiting\n"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli({"run", "--rm", image("busybox"), "true"}).err, "") << "quiet without --debug";
  auto word = run_cli({"run", "--rm", image("busybox"), "echo", "hello", "--debug"});
  EXPECT_EQ(word.out, "hello --debug\n");
  EXPECT_EQ(word.err, "") << "a word of the box's command is not the CLI's flag";
  auto after = run_cli({"ls", "--debug"});
  EXPECT_NE(after.err.find(" cli: exiting\n"), std::string::npos) << "after the subcommand: " << after.err;
  auto missing = run_cli({"inspect", "nosuch", "--debug"});
  EXPECT_NE(missing.err.find("Error [NotFound]: No such box: nosuch"), std::string::npos) << missing.err;
  expect_refused({"bogus-cmd"}, 125, "unknown command 'bogus-cmd'");
}

TEST_F(CliFlagsTest, InspectShowsTheBoxesFoundAndEmptyListsAreEmptyInEveryFormat) {
  ASSERT_EQ(run_cli({"create", "--name", "here", image("busybox")}).exit_code, 0);
  auto r = run_cli({"inspect", "here", "nosuch"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("\"Name\": \"here\""), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("No such box: nosuch"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli({"images", "--format", "yaml"}).out, "[]\n");
  EXPECT_EQ(run_cli({"ls", "--format", "yaml"}).out, "[]\n");
  auto snaps = run_cli({"snapshot", "ls", "nosuch"});
  EXPECT_EQ(snaps.out, "") << "no header before the error";
  ASSERT_EQ(run_cli({"snapshot", "create", "here", "s1"}).exit_code, 0);
  auto listed = run_cli({"snapshot", "ls", "here"}).out;
  EXPECT_NE(listed.find("s1"), std::string::npos) << listed;
  EXPECT_NE(listed.find("Z "), std::string::npos) << "CREATED as a UTC time: " << listed;
}

TEST_F(CliFlagsTest, ADetachedRunWhoseCommandIsNotFoundKeepsItsBoxForRm) {
  auto r = run_cli({"run", "-d", "--name", "bad", image("busybox"), "no-such-command"});
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
  EXPECT_EQ(trim(r.out), trim(run_cli({"inspect", "-f", "{{.Id}}", "bad"}).out)) << "its ID, for a script's rm";
  EXPECT_EQ(trim(run_cli({"inspect", "-f", "{{.Config.AutoRemove}}", "bad"}).out), "false");
  EXPECT_EQ(run_cli({"rm", "bad"}).exit_code, 0);
}

}  // namespace
}  // namespace boxlite::testing

namespace boxlite::testing {
namespace {

// A command that cannot start exits as docker exec's does: 127 when there is no such
// file (in $PATH, at the path, or the interpreter a script names), 126 when it cannot
// be run; a path is taken from the working directory (-w), as execve there would.
TEST_F(CliFlagsTest, ACommandThatCannotStartExitsAsDockerExecDoes) {
  running("codes");
  ASSERT_EQ(run_cli({"exec", "codes", "--", "sh", "-c", "printf '#!/nonexistent\\n' > /tmp/bad; chmod +x /tmp/bad"})
                .exit_code,
            0);
  auto rel = run_cli({"exec", "-w", "/bin", "codes", "--", "./echo", "hi"});
  EXPECT_EQ(rel.exit_code, 0) << rel.err;
  EXPECT_EQ(rel.out, "hi\n");
  expect_refused({"exec", "codes", "--", "nosuch"}, 127, "executable file 'nosuch' not found in $PATH");
  expect_refused({"exec", "codes", "--", "/nope/x"}, 127, "executable file not found: /nope/x");
  expect_refused({"exec", "codes", "--", "/tmp/bad"}, 127, "exec /tmp/bad: No such file or directory");
  expect_refused({"exec", "codes", "--", "/etc/passwd"}, 126, "cannot execute /etc/passwd: permission denied");
  expect_refused({"exec", "codes", "--", "/tmp"}, 126, "cannot execute /tmp: is a directory");
  expect_refused({"exec", "-w", "/not found", "codes", "--", "true"}, 126, "working directory '/not found'");
  // A script found through a relative PATH entry, or named by a relative path, gets
  // that relative path as $0, as execvp (and runc) hand it to execve there.
  ASSERT_EQ(run_cli({"exec", "codes", "--", "sh", "-c",
                     "mkdir -p /tmp/w/bin && printf '#!/bin/sh\\necho \"$0\"\\n' > /tmp/w/bin/hello && "
                     "chmod +x /tmp/w/bin/hello"})
                .exit_code,
            0);
  for (const auto& [wd, path, cmd, zero] :
       std::vector<std::array<std::string, 4>>{{"/tmp/w", "bin:/bin", "hello", "bin/hello"},
                                               {"/tmp/w/bin", ".:/bin", "hello", "./hello"},
                                               {"/tmp/w/bin", ":/bin", "hello", "hello"},
                                               {"/tmp/w", "/bin", "./bin/hello", "./bin/hello"},
                                               {"/", "/tmp/w/bin:/bin", "hello", "/tmp/w/bin/hello"}}) {
    auto r = run_cli({"exec", "-w", wd, "-e", "PATH=" + path, "codes", "--", cmd});
    EXPECT_EQ(r.exit_code, 0) << wd << " " << path << " " << cmd << ": " << r.err;
    EXPECT_EQ(r.out, zero + "\n") << "-w " << wd << ", PATH=" << path << ", " << cmd;
  }
}

}  // namespace
}  // namespace boxlite::testing

namespace boxlite::testing {
namespace {

// The global options that take a value (--home, --registry, --config, and the remote
// selection --url, --profile, --path-prefix): their value is never taken for the
// command. Remote mode is not in this build yet: each remote flag, and
// BOXLITE_REST_URL, is named as such, before anything is done.
TEST_F(CliFlagsTest, AGlobalFlagsValueIsNeverTakenForTheCommandAndRemoteModeIsNamed) {
  ASSERT_EQ(run_cli({"create", "--name", "kept", image("busybox")}).exit_code, 0);
  auto refused_remote = [&](std::vector<std::string> args, const std::string& flag) {
    SCOPED_TRACE(args.front() + " " + args.back());
    auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 125) << r.err;
    EXPECT_EQ(r.err, "Error: " + flag + " (remote mode) is not available in this build yet: this boxlite drives " +
                         "the local runtime only; leave " + flag + " out\n");
  };
  refused_remote({"--url", "http://x", "ps"}, "--url");
  refused_remote({"--profile", "staging", "ps"}, "--profile");
  refused_remote({"--path-prefix", "tenant", "ps"}, "--path-prefix");
  refused_remote({"--url=http://x", "ps"}, "--url");
  refused_remote({"ps", "--profile", "staging"}, "--profile");
  refused_remote({"--home", home_, "--url", "http://x", "--registry", "localhost:1", "ps"}, "--url");
  // Refused before the command runs: the box is still there.
  refused_remote({"--url", "http://x", "rm", "-f", "kept"}, "--url");
  refused_remote({"rm", "-f", "kept", "--url", "http://x"}, "--url");
  refused_remote({"exec", "kept", "--path-prefix", "t", "--", "true"}, "--path-prefix");
  EXPECT_EQ(trim(run_cli({"inspect", "-f", "{{.Name}}", "kept"}).out), "kept");
  // The environment's URL is remote mode as --url is: said once, with what to do.
  auto env = run_cli_under({"env", "BOXLITE_REST_URL=http://x"}, {"--url", "http://y", "ls", "-a"});
  EXPECT_EQ(env.exit_code, 125);
  EXPECT_EQ(env.err,
            "Error: BOXLITE_REST_URL (remote mode) is not available in this build yet: unset it to drive the local "
            "runtime\n");
  EXPECT_EQ(env.out, "");
  EXPECT_EQ(run_cli_under({"env", "BOXLITE_REST_URL="}, {"ls"}).exit_code, 0) << "an empty URL is none";
  // The local global options' values likewise.
  write_file_atomic(home_ + "/cli.json", "{}");
  EXPECT_EQ(run_cli({"--home", home_, "--config", home_ + "/cli.json", "--registry", "localhost:1", "ls"}).exit_code,
            0);
  // An unknown flag before a word: the flag is what is unknown (its value may be the word).
  expect_refused({"--api-key", "secret", "ps"}, 125, "Error: unknown flag '--api-key'");
}

// The reference's commands that this build lacks say so; an unknown one stays unknown.
TEST_F(CliFlagsTest, ADocumentedCommandThisBuildLacksSaysSo) {
  for (std::string c : {"serve", "auth", "completion", "network", "volume"}) {
    auto r = run_cli({c, "--help"});
    EXPECT_EQ(r.exit_code, 125) << c;
    EXPECT_EQ(r.err, "Error: '" + c + "' is a documented boxlite command that this build does not have yet " +
                         "(see boxlite --help)\n");
  }
  auto login = run_cli({"--home", home_, "auth", "login", "--url", "http://x"});
  EXPECT_NE(login.err.find("'auth' is a documented boxlite command"), std::string::npos) << login.err;
  expect_refused({"bogus-cmd"}, 125, "Error: unknown command 'bogus-cmd' (see boxlite --help)");
  auto help = run_cli({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("not in this build yet: the commands serve, auth, completion, network, volume"),
            std::string::npos)
      << help.out;
  EXPECT_NE(help.out.find("--url"), std::string::npos) << help.out;
  // `help [COMMAND]` as clap has it; no command at all is a usage error.
  EXPECT_EQ(run_cli({"help"}).out, help.out);
  auto run_help = run_cli({"help", "run"});
  EXPECT_EQ(run_help.exit_code, 0) << run_help.err;
  EXPECT_NE(run_help.out.find("--cpus"), std::string::npos) << run_help.out;
  expect_refused({"help", "serve"}, 125, "'serve' is a documented boxlite command");
  expect_refused({"--debug"}, 125, "Error: no command given (see boxlite --help)");
}

// "No such box" is one rule for every command that takes a box: exit 1, as docker's
// "No such container" is.
TEST_F(CliFlagsTest, NoSuchBoxExitsOneForEveryCommandThatTakesABox) {
  std::string host_file = home_ + "/host.txt";
  write_file_atomic(host_file, "x");
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"start", "nosuch"},
           {"stop", "nosuch"},
           {"restart", "nosuch"},
           {"rm", "nosuch"},
           {"rm", "-f", "nosuch"},
           {"inspect", "nosuch"},
           {"exec", "nosuch", "--", "true"},
           {"exec", "-d", "nosuch", "--", "true"},
           {"logs", "nosuch"},
           {"stats", "nosuch"},
           {"cp", "nosuch:/etc/passwd", home_ + "/out"},
           {"cp", host_file, "nosuch:/tmp/x"},
           {"snapshot", "create", "nosuch", "s1"},
           {"snapshot", "ls", "nosuch"},
           {"snapshot", "rm", "nosuch", "s1"},
           {"snapshot", "restore", "nosuch", "s1"},
           {"clone", "nosuch"},
           {"export", "nosuch"},
       }) {
    SCOPED_TRACE(args[0] + " " + args[1]);
    expect_refused(args, 1, "No such box: nosuch");
  }
}

// A parse error is said as every other error ("Error: ...", exit 125, as docker's
// usage errors); a number that is not one says a whole number was expected.
TEST_F(CliFlagsTest, ParseErrorsAreErrorsLikeTheRestAndSayWhatWasExpected) {
  auto refused = [&](std::vector<std::string> args, const std::string& said) {
    SCOPED_TRACE(args[0] + " " + args[1] + " " + args[2]);
    auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 125) << r.err;
    EXPECT_EQ(r.err.rfind("Error: " + said, 0), 0u) << r.err;
    EXPECT_EQ(r.err.find("Could not convert"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  };
  std::string busybox = image("busybox");
  refused({"run", "--cpus", "abc", busybox, "true"}, "--cpus: expected a whole number, got 'abc'");
  refused({"create", "--memory", "1.5", busybox}, "--memory: expected a whole number, got '1.5'");
  refused({"create", "--memory", "", busybox}, "--memory: expected a whole number, got ''");
  refused({"create", "--disk-size", "ten", busybox}, "--disk-size: expected a whole number, got 'ten'");
  refused({"create", "--disk-size-gb", "2x", busybox}, "--disk-size: expected a whole number, got '2x'");
  refused({"create", "--cpus", "99999999999", busybox},
          "--cpus: expected a whole number from -2147483648 to 2147483647, got '99999999999'");
  refused({"logs", "-n", "abc", "x"}, "--tail: expected a whole number, got 'abc'");
  refused({"logs", "--tail", "-1", "x"}, "--tail: must be 0 (all) or a number of lines, got -1");
  refused({"run", "-p", "http:80", busybox}, "invalid port 'http' in -p http:80");
  refused({"run", "--network", "", busybox}, "--network: ");
  refused({"ps", "--format", "xml"}, "--format: ");
  refused({"run", "--bogus", "x", busybox}, "The following argument");
  refused({"stop", "--bogus", "x"}, "The following argument");
  refused({"rm", "-a", "x"}, "rm: give either BOX names or --all, not both");
  refused({"snapshot", "create", "x"}, "name is required (see boxlite snapshot create --help)");
  // CLI11 would read 010 as octal (8) and 0x10 as hex: a whole number is decimal.
  ASSERT_EQ(run_cli({"create", "--name", "ten", "--cpus", "010", busybox}).exit_code, 0);
  EXPECT_EQ(trim(run_cli({"inspect", "-f", "{{.Config.Cpus}}", "ten"}).out), "10");
  refused({"create", "--cpus", "0x10", busybox}, "--cpus: expected a whole number, got '0x10'");
}

}  // namespace
}  // namespace boxlite::testing
