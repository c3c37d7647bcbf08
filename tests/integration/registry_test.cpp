// Pulling from real registries: Debian's docker-registry on 127.0.0.1, started by
// scripts/test-registry in its http, tls, basic-auth and token-auth variants, with
// the offline test images pushed into it. Drives the real CLI and the C++ API.
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "integration/support.hpp"
#include "registry/pull.hpp"
#include "registry/store.hpp"

namespace boxlite::testing {
namespace {

std::string script() { return std::string(BOXLITE_SOURCE_DIR) + "/scripts/test-registry"; }

// One registry process (and for "token" its token server), killed on destruction.
class TestRegistry {
 public:
  explicit TestRegistry(const std::string& variant, bool push = true, int random_mb = 0) : variant_(variant) {
    char tmpl[] = "/tmp/blreg-XXXXXX";
    if (!::mkdtemp(tmpl)) throw Error(ErrorKind::Storage, "mkdtemp");
    dir_ = tmpl;
    start();
    if (push) {
      std::vector<std::string> argv = {script(), "push", dir_};
      if (random_mb) argv.insert(argv.end(), {"--random-mb", std::to_string(random_mb)});
      RunResult r = run_capture(argv);
      if (!r.ok()) ADD_FAILURE() << "push failed: " << r.err;
    }
  }
  ~TestRegistry() {
    stop();
    try {
      remove_tree(dir_);
    } catch (const Error&) {
    }
  }
  TestRegistry(const TestRegistry&) = delete;
  TestRegistry& operator=(const TestRegistry&) = delete;

  void start() {
    std::vector<std::string> argv = {script(), "start", dir_, "--variant", variant_};
    if (port_) argv.insert(argv.end(), {"--port", std::to_string(port_)});
    RunResult r = run_capture(argv);
    if (!r.ok()) throw Error(ErrorKind::Internal, "test-registry start failed: " + r.err);
    port_ = std::stoi(trim(r.out));
  }
  void stop() { run_capture({script(), "stop", dir_}); }

  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string ref(const std::string& repo) const { return host() + "/" + repo; }
  const std::string& dir() const { return dir_; }
  // The registry's own copy of a blob (its filesystem storage driver).
  std::string stored_blob(const std::string& digest) const {
    std::string hex = digest.substr(7);
    return dir_ + "/data/docker/registry/v2/blobs/sha256/" + hex.substr(0, 2) + "/" + hex + "/data";
  }

 private:
  std::string variant_, dir_;
  int port_ = 0;
};

ImageRegistry http_registry(const TestRegistry& r, bool search = false) {
  ImageRegistry reg;
  reg.host = r.host();
  reg.transport = "http";
  reg.search = search;
  return reg;
}

std::string busybox_manifest_digest() {
  auto j = nlohmann::json::parse(read_file(image("busybox") + "/index.json"));
  return j["manifests"][0]["digest"].get<std::string>();
}

class RegistryTest : public BoxliteTest {
 protected:
  static void SetUpTestSuite() { http_ = new TestRegistry("http"); }
  static void TearDownTestSuite() {
    delete http_;
    http_ = nullptr;
  }
  static TestRegistry* http_;

  std::vector<std::string> store_files(const std::string& sub) { return dir_entries(home_ + "/images/oci/" + sub); }
};
TestRegistry* RegistryTest::http_ = nullptr;

TEST_F(RegistryTest, PullByTagPrintsPulledDigestLayers) {
  auto r = run_cli({"pull", http_->ref("test/busybox:latest")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string digest = busybox_manifest_digest();
  EXPECT_NE(r.out.find("Pulled: " + http_->ref("test/busybox:latest") + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Digest: " + digest + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Layers: 3\n"), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.empty()) << "no progress noise without a terminal: " << r.err;
  // The store is an OCI layout the image code reads.
  auto img = image::open_oci_layout({home_ + "/images/oci", http_->ref("test/busybox:latest")});
  EXPECT_EQ(img.manifest_digest, digest);
  EXPECT_TRUE(store_files("ingest").empty());
}

TEST_F(RegistryTest, PullQuietPrintsOnlyTheDigestAndByDigestWorks) {
  std::string digest = busybox_manifest_digest();
  auto q = run_cli({"pull", "-q", http_->ref("test/busybox")});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.out, digest + "\n");
  auto d = run_cli({"pull", http_->ref("test/busybox@" + digest)});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("Pulled: " + http_->ref("test/busybox@" + digest)), std::string::npos) << d.out;
  // A digest the registry does not have: a clear error, non-zero exit.
  std::string other = "sha256:" + std::string(64, 'a');
  auto bad = run_cli({"pull", http_->ref("test/busybox@" + other)});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("image not found"), std::string::npos) << bad.err;
}

TEST_F(RegistryTest, MultiArchIndexPicksLinuxAmd64) {
  auto r = run_cli({"pull", "-q", http_->ref("test/multiarch:latest")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, busybox_manifest_digest() + "\n");
}

TEST_F(RegistryTest, MissingImageIsAClearErrorAndNonZeroExit) {
  auto r = run_cli({"pull", http_->ref("test/does-not-exist:v1")});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("image not found: " + http_->ref("test/does-not-exist:v1")), std::string::npos) << r.err;
  auto run = run_cli({"run", "--rm", "--engine", "jail", http_->ref("test/does-not-exist:v1"), "true"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("image not found"), std::string::npos) << run.err;
  expect_no_leftovers();
}

TEST_F(RegistryTest, SharedLayersAreDownloadedOnce) {
  Runtime rt(RuntimeOptions{home_, {http_registry(*http_)}});
  auto a = rt.pull_image(http_->ref("test/busybox"));
  EXPECT_EQ(a.layers, 3u);
  EXPECT_EQ(a.layers_cached, 0u);
  auto b = rt.pull_image(http_->ref("test/busybox-extra"));
  EXPECT_EQ(b.layers, 4u);
  EXPECT_EQ(b.layers_cached, 3u);
  EXPECT_LT(b.bytes_downloaded, 4096u) << "only the extra layer and the config come over the wire";
  // A warm pull downloads nothing.
  auto again = rt.pull_image(http_->ref("test/busybox"));
  EXPECT_EQ(again.layers_cached, 3u);
  EXPECT_EQ(again.bytes_downloaded, 0u);
  EXPECT_EQ(rt.list_images().size(), 2u);
}

TEST_F(RegistryTest, ImagesListsWithQuietAndFormats) {
  ASSERT_EQ(run_cli({"pull", http_->ref("test/busybox")}).exit_code, 0);
  ASSERT_EQ(run_cli({"pull", http_->ref("test/busybox-extra")}).exit_code, 0);
  auto table = run_cli({"images"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("REPOSITORY"), std::string::npos);
  EXPECT_NE(table.out.find(http_->ref("test/busybox-extra")), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(busybox_manifest_digest().substr(7, 12)), std::string::npos) << table.out;
  auto q = run_cli({"images", "-q"});
  EXPECT_EQ(split(trim(q.out), '\n').size(), 2u) << q.out;
  auto all = run_cli({"images", "-a", "--format", "json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  auto j = nlohmann::json::parse(all.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["Repository"], http_->ref("test/busybox"));
  EXPECT_EQ(j[1]["Tag"], "latest");
  EXPECT_EQ(j[1]["ID"], busybox_manifest_digest());
  auto yaml = run_cli({"images", "--format", "yaml"});
  EXPECT_NE(yaml.out.find("  Repository: "), std::string::npos) << yaml.out;
  EXPECT_NE(run_cli({"images", "--format", "xml"}).exit_code, 0);
}

TEST_F(RegistryTest, RunFromColdCacheOnJailThenShortNameWithSearchRegistry) {
  auto r = run_cli({"run", "--rm", "--engine", "jail", http_->ref("test/busybox:latest"), "echo", "hi"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hi\n");
  // "busybox" = library/busybox on the search registry.
  auto s = run_cli({"--registry", http_->host() + ",transport=http", "run", "--rm", "--engine", "jail", "busybox",
                    "cat", "/etc/boxlite-image"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.out, "busybox test image, layer 3\n");
  expect_no_leftovers();
}

TEST_F(RegistryTest, RunFromColdCacheOnVm) {
  auto r = run_cli({"run", "--rm", "--engine", "vm", http_->ref("test/busybox:latest"), "echo", "hi"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hi\n");
  expect_no_leftovers();
}

TEST_F(RegistryTest, SearchOrderFirstSuccessWinsAndQualifiedBypasses) {
  TestRegistry empty("http", /*push=*/false);
  ImageRegistry not_search = http_registry(*http_, false);
  ImageRegistry first = http_registry(empty, true);
  ImageRegistry second = http_registry(*http_, true);
  {
    // search=false registries are skipped: only the empty one is tried.
    Runtime rt(RuntimeOptions{home_, {not_search, first}});
    try {
      rt.pull_image("busybox");
      FAIL() << "expected a failure";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(empty.ref("library/busybox:latest")), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find(http_->host()), std::string::npos) << e.what();
    }
    // A fully qualified reference skips the list.
    EXPECT_EQ(rt.pull_image(http_->ref("test/busybox")).reference, http_->ref("test/busybox:latest"));
  }
  Runtime rt(RuntimeOptions{home_, {first, second}});
  auto r = rt.pull_image("busybox");
  EXPECT_EQ(r.reference, http_->ref("library/busybox:latest"));
  // Both fail: the error names every candidate.
  try {
    rt.pull_image("nothing-here");
    FAIL() << "expected a failure";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("from any search registry"), std::string::npos) << msg;
    EXPECT_NE(msg.find(empty.ref("library/nothing-here:latest")), std::string::npos) << msg;
    EXPECT_NE(msg.find(http_->ref("library/nothing-here:latest")), std::string::npos) << msg;
  }
}

TEST_F(RegistryTest, ConfigFileAndHomeConfigSupplyRegistries) {
  std::string cfg = home_ + "/regs.json";
  write_file_atomic(cfg,
                    R"({"image_registries":[{"host":")" + http_->host() + R"(","transport":"http","search":true}]})");
  auto r = run_cli({"--config", cfg, "pull", "-q", "busybox"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, busybox_manifest_digest() + "\n");
  write_file_atomic(home_ + "/config.json", read_file(cfg));
  Runtime rt(RuntimeOptions{home_});
  ASSERT_EQ(rt.image_registries().size(), 1u);
  EXPECT_EQ(rt.pull_image("busybox").reference, http_->ref("library/busybox:latest"));
  // Documented validation messages, from every source.
  write_file_atomic(cfg, R"({"image_registries":[{"host":"https://x"}]})");
  auto bad = run_cli({"--config", cfg, "images"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("image registry host must be host[:port], not a URL: https://x"), std::string::npos)
      << bad.err;
  auto flag = run_cli({"--registry", "h:1,transport=HTTP", "images"});
  EXPECT_NE(flag.err.find("unsupported registry transport: HTTP"), std::string::npos) << flag.err;
}

TEST_F(RegistryTest, CorruptBlobIsRefusedAndNothingPartialStays) {
  TestRegistry reg("http");
  auto j = nlohmann::json::parse(read_file(reg.dir() + "/images/busybox-extra/index.json"));
  std::string mdigest = j["manifests"][0]["digest"];
  auto m = nlohmann::json::parse(read_file(reg.dir() + "/images/busybox-extra/blobs/sha256/" + mdigest.substr(7)));
  std::string layer = m["layers"][3]["digest"];
  std::string data = read_file(reg.stored_blob(layer));
  data[data.size() / 2] ^= 0x55;  // same size, other bytes
  write_file_atomic(reg.stored_blob(layer), data);
  auto r = run_cli({"pull", reg.ref("test/busybox-extra")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("failed verification"), std::string::npos) << r.err;
  // Retried like a transfer failure, it ends as an Image error (the content is wrong).
  auto kind = run_cli({"--debug", "pull", reg.ref("test/busybox-extra")});
  EXPECT_NE(kind.err.find("Error [Image]: "), std::string::npos) << kind.err;
  registry::ImageStore store(home_ + "/images");
  EXPECT_FALSE(store.has_blob(layer));
  EXPECT_FALSE(store.lookup(reg.ref("test/busybox-extra:latest")));
  EXPECT_TRUE(store_files("ingest").empty());
  // Longer than its descriptor says: refused at once, not read to the end.
  data[data.size() / 2] ^= 0x55;
  write_file_atomic(reg.stored_blob(layer), data + std::string(1 << 20, 'x'));
  auto longer = run_cli({"pull", reg.ref("test/busybox-extra")});
  EXPECT_NE(longer.exit_code, 0);
  EXPECT_NE(longer.err.find("is longer than the"), std::string::npos) << longer.err;
  EXPECT_FALSE(store.has_blob(layer));
  EXPECT_TRUE(store_files("ingest").empty());
}

// The registry dies in the middle of a blob: with no registry the pull fails
// cleanly after its retries; when the registry comes back within them, it succeeds.
TEST_F(RegistryTest, RegistryGoingDownMidPull) {
  // Far more than the sockets buffer, and throttled: the 48 MB layer takes ~6 s.
  TestRegistry reg("http", true, 48);
  ::setenv("BOXLITE_PULL_MAX_BYTES_PER_SEC", "8388608", 1);
  std::string ref = reg.ref("test/random");
  {
    Runtime rt(RuntimeOptions{home_});
    std::atomic<bool> started{false};
    rt.set_pull_observer(nullptr, [&](const registry::LayerProgress& p) { started = started || p.downloaded > 0; });
    std::optional<Error> failure;
    std::thread t([&] {
      try {
        rt.pull_image(ref);
      } catch (const Error& e) {
        failure = e;
      }
    });
    for (int i = 0; i < 100 && !started; ++i) ::usleep(50000);
    reg.stop();
    t.join();
    ASSERT_TRUE(failure.has_value());
    EXPECT_EQ(failure->kind(), ErrorKind::Network) << failure->what();
    EXPECT_NE(std::string(failure->what()).find("cannot reach registry " + reg.host()), std::string::npos)
        << failure->what();
    registry::ImageStore store(home_ + "/images");
    EXPECT_FALSE(store.lookup(ref + ":latest"));
    EXPECT_TRUE(store_files("ingest").empty()) << "no partial download stays";
  }
  reg.start();  // same port, same storage
  {
    Runtime rt(RuntimeOptions{home_});
    std::atomic<bool> started{false};
    rt.set_pull_observer(nullptr, [&](const registry::LayerProgress& p) { started = started || p.downloaded > 0; });
    std::optional<registry::PullResult> result;
    std::optional<Error> failure;
    std::thread t([&] {
      try {
        result = rt.pull_image(ref);
      } catch (const Error& e) {
        failure = e;
      }
    });
    for (int i = 0; i < 100 && !started; ++i) ::usleep(50000);
    reg.stop();
    reg.start();  // back before the retries run out
    t.join();
    ASSERT_TRUE(result.has_value()) << failure->what();
    EXPECT_EQ(result->layers, 4u);
    EXPECT_EQ(result->layers_cached, 3u) << "the layers that completed before the failure stay";
  }
  ::unsetenv("BOXLITE_PULL_MAX_BYTES_PER_SEC");
}

// Every pull runs in boxlite-pull (docs/registry.md). A CLI killed mid-download
// takes its helper with it: the helper sees its socket close and exits. What it had
// half written is ingest debris that `image prune` removes, and a pull starts over.
TEST_F(RegistryTest, AKilledPullEndsItsHelperAndPruneRemovesItsPartialDownload) {
  TestRegistry reg("http", true, 48);
  std::string ref = reg.ref("test/random");
  ::setenv("BOXLITE_PULL_MAX_BYTES_PER_SEC", "4194304", 1);  // the 48 MB layer: ~12 s
  SpawnOptions so;
  so.argv = {cli(), "pull", ref};
  so.stdout_path = so.stderr_path = "/dev/null";
  Child pull = spawn(so);
  ::unsetenv("BOXLITE_PULL_MAX_BYTES_PER_SEC");
  pid_t helper = 0;
  bool downloading = false;
  for (int i = 0; i < 200 && !(helper && downloading); ++i) {
    for (pid_t c : children_of(pull.pid())) {
      if (parse_stat(read_file("/proc/" + std::to_string(c) + "/stat")).comm == "boxlite-pull") helper = c;
    }
    for (const auto& f : store_files("ingest")) {
      struct stat st {};
      if (::stat((home_ + "/images/oci/ingest/" + f).c_str(), &st) == 0 && st.st_size > (1 << 20)) downloading = true;
    }
    ::usleep(50000);
  }
  ASSERT_NE(helper, 0) << "the CLI started no boxlite-pull";
  ASSERT_TRUE(downloading) << "no download reached 1 MiB";
  // Mid-download it is confined (registry/confine.hpp): no_new_privs, no
  // capability but the store's three, and a syscall filter.
  std::string status = read_file("/proc/" + std::to_string(helper) + "/status");
  EXPECT_NE(status.find("NoNewPrivs:\t1"), std::string::npos) << status;
  EXPECT_NE(status.find("CapEff:\t000000000000000e"), std::string::npos) << status;
  EXPECT_NE(status.find("Seccomp:\t2"), std::string::npos) << "a syscall filter: " << status;
  pull.kill_now();
  pull.wait();
  EXPECT_TRUE(wait_pid_exit(helper, 5000)) << "boxlite-pull " << helper << " outlived the CLI that started it";
  EXPECT_FALSE(process_alive(helper));
  registry::ImageStore store(home_ + "/images");
  EXPECT_FALSE(store.lookup(ref + ":latest")) << "a killed pull records no image";
  EXPECT_FALSE(store_files("ingest").empty()) << "the partial download is debris until a prune";
  auto prune = run_cli({"image", "prune"});
  EXPECT_EQ(prune.exit_code, 0) << prune.err;
  EXPECT_TRUE(store_files("ingest").empty()) << "prune removes a killed pull's partial download";
  auto again = run_cli({"pull", ref});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("Layers: 4\n"), std::string::npos) << again.out;
  EXPECT_TRUE(store_files("ingest").empty());
}

// Pulling needs no privilege: an unprivileged user pulls into a home of its own,
// through a helper that confines itself as far as such a user can (no bounding
// set to drop; Landlock and the syscall filter need none).
TEST_F(RegistryTest, AnUnprivilegedUserPullsIntoAHomeOfItsOwn) {
  char tmpl[] = "/tmp/blnobody-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string home = tmpl;
  ASSERT_EQ(::chown(home.c_str(), 65534, 65534), 0);
  RunResult r = run_capture({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env",
                             "BOXLITE_HOME=" + home, cli(), "pull", http_->ref("test/busybox")});
  EXPECT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find("Layers: 3\n"), std::string::npos) << r.out << r.err;
  struct stat st {};
  EXPECT_EQ(::stat((home + "/images/oci/index.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u) << "the store is the user's own";
  remove_tree(home);
}

TEST_F(RegistryTest, ImageUsedByABoxIsNeverRemoved) {
  std::string ref = http_->ref("test/busybox:latest");
  auto c = run_cli({"create", "--engine", "jail", "--name", "user", ref});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto rmi = run_cli({"rmi", ref});
  EXPECT_NE(rmi.exit_code, 0);
  EXPECT_NE(rmi.err.find("is used by box user"), std::string::npos) << rmi.err;
  EXPECT_EQ(run_cli({"image", "prune", "-a"}).exit_code, 0);
  registry::ImageStore store(home_ + "/images");
  EXPECT_TRUE(store.lookup(ref)) << "prune -a keeps images boxes use";
  ASSERT_EQ(run_cli({"rm", "-f", "user"}).exit_code, 0);
  auto ok = run_cli({"rmi", ref});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "Untagged: " + ref + "\n");
  EXPECT_TRUE(store_files("blobs/sha256").empty()) << "unreferenced blobs go with the image";
  EXPECT_TRUE(dir_entries(home_ + "/images/layers").empty()) << "and the jail's layer cache of it";
  auto again = run_cli({"rmi", ref});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("No such image: " + ref), std::string::npos) << again.err;
}

// On a terminal, pull shows each layer's progress as docker does (tmux gives us one).
TEST_F(RegistryTest, PullShowsLayerProgressOnATerminal) {
  ASSERT_EQ(run_cli({"pull", http_->ref("test/busybox")}).exit_code, 0);
  std::string cmd = "BOXLITE_HOME=" + home_ + " " + cli() + " pull " + http_->ref("test/busybox-extra") + "; sleep 30";
  TmuxSession tmux(home_ + "/tmux.sock", cmd, 120, 30);
  ASSERT_TRUE(tmux.started());
  std::string screen = tmux.wait_for("Layers: 4");
  EXPECT_NE(screen.find("Pulling " + http_->ref("test/busybox-extra:latest")), std::string::npos) << screen;
  EXPECT_NE(screen.find("Already exists"), std::string::npos) << screen;
  EXPECT_NE(screen.find("Pull complete"), std::string::npos) << screen;
  EXPECT_NE(screen.find("Pulled: " + http_->ref("test/busybox-extra:latest")), std::string::npos) << screen;
  // -q on a terminal: the digest and nothing else.
  std::string qcmd = "BOXLITE_HOME=" + home_ + " " + cli() + " pull -q " + http_->ref("test/multiarch") + "; sleep 30";
  TmuxSession quiet(home_ + "/tmux2.sock", qcmd, 120, 30);
  std::string qs = quiet.wait_for("sha256:");
  EXPECT_EQ(qs.find("Pulling"), std::string::npos) << qs;
  EXPECT_EQ(qs.find("Already exists"), std::string::npos) << qs;
}

TEST_F(RegistryTest, ConcurrentPullsOfOneImageAgree) {
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&] {
      Runtime rt(RuntimeOptions{home_});
      if (rt.pull_image(http_->ref("test/busybox")).manifest_digest == busybox_manifest_digest()) ++ok;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok, 4);
  Runtime rt(RuntimeOptions{home_});
  EXPECT_EQ(rt.list_images().size(), 1u);
  EXPECT_TRUE(store_files("ingest").empty());
}

class RegistryAuthTest : public BoxliteTest {};

std::string write_creds(const std::string& home, const TestRegistry& r, const std::string& password) {
  std::string path = home + "/creds.json";
  write_file_atomic(path, R"({"image_registries":[{"host":")" + r.host() +
                              R"(","transport":"http","username":"boxlite","password":")" + password + R"("}]})");
  return path;
}

TEST_F(RegistryAuthTest, BasicChallenge) {
  TestRegistry reg("basic");
  auto anon = run_cli({"pull", reg.ref("test/busybox")});
  EXPECT_NE(anon.exit_code, 0);
  EXPECT_NE(anon.err.find("401 Unauthorized"), std::string::npos) << anon.err;
  auto wrong = run_cli({"--config", write_creds(home_, reg, "nope"), "pull", reg.ref("test/busybox")});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("401 Unauthorized: the registry refused the credentials for user 'boxlite'"),
            std::string::npos)
      << wrong.err;
  auto ok = run_cli({"--config", write_creds(home_, reg, "s3cret-test-pw"), "pull", "-q", reg.ref("test/busybox")});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, busybox_manifest_digest() + "\n");
}

TEST_F(RegistryAuthTest, BearerTokenFlowFromWwwAuthenticate) {
  TestRegistry reg("token");
  auto anon = run_cli({"pull", reg.ref("test/busybox")});
  EXPECT_NE(anon.exit_code, 0);
  EXPECT_NE(anon.err.find("401 Unauthorized"), std::string::npos) << anon.err;
  auto wrong = run_cli({"--config", write_creds(home_, reg, "nope"), "pull", reg.ref("test/busybox")});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("refused the credentials"), std::string::npos) << wrong.err;
  auto ok = run_cli({"--config", write_creds(home_, reg, "s3cret-test-pw"), "pull", "-q", reg.ref("test/multiarch")});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, busybox_manifest_digest() + "\n");
  // A static bearer token is sent as is (and wins over basic credentials); this
  // registry does not know it.
  ImageRegistry r;
  r.host = reg.host();
  r.transport = "http";
  r.username = "boxlite";
  r.password = "s3cret-test-pw";
  r.bearer_token = "not-a-valid-token";
  Runtime rt(RuntimeOptions{home_, {r}});
  try {
    rt.pull_image(reg.ref("test/busybox-extra"));
    FAIL() << "expected a 401";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("401 Unauthorized: the registry refused the bearer token"), std::string::npos)
        << e.what();
  }
}

TEST_F(RegistryAuthTest, TlsVerifiedAgainstCaOrSkipped) {
  TestRegistry reg("tls");
  ImageRegistry r;
  r.host = reg.host();
  {
    Runtime rt(RuntimeOptions{home_, {r}});
    try {
      rt.pull_image(reg.ref("test/busybox"));
      FAIL() << "a self-signed certificate must not verify";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("TLS certificate verification failed"), std::string::npos) << e.what();
    }
  }
  ::setenv("CURL_CA_BUNDLE", (reg.dir() + "/ca.pem").c_str(), 1);
  {
    Runtime rt(RuntimeOptions{home_, {r}});
    EXPECT_EQ(rt.pull_image(reg.ref("test/busybox")).manifest_digest, busybox_manifest_digest());
  }
  ::unsetenv("CURL_CA_BUNDLE");
  r.skip_verify = true;
  Runtime rt(RuntimeOptions{home_, {r}});
  EXPECT_EQ(rt.pull_image(reg.ref("test/multiarch")).manifest_digest, busybox_manifest_digest());
}

}  // namespace
}  // namespace boxlite::testing
