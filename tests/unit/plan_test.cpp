// plan_box (core/plan.hpp): what the options and the home's facts make of a new
// box's spec, without any I/O. No box is made here.
#include <gtest/gtest.h>

#include <functional>

#include "common/error.hpp"
#include "core/plan.hpp"
#include "engine/jail/jail.hpp"

namespace boxlite::core {
namespace {

std::string invalid_argument_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
    return e.what();
  }
  return "no error";
}

PlanFacts facts(EngineKind engine = EngineKind::Vm) {
  PlanFacts f;
  f.engine = engine;
  f.box_id = "b0x";
  f.box_dir = "/home/h/boxes/b0x";
  f.image.env = {"PATH=/usr/bin:/bin", "LANG=C"};
  f.image.entrypoint = {"/entry"};
  f.image.cmd = {"serve", "--port=80"};
  f.image.working_dir = "/app";
  f.image.user = "app";
  return f;
}

BoxOptions image_options() {
  BoxOptions o;
  o.image = "alpine";
  o.network.mode = "disabled";
  return o;
}

TEST(PlanTest, TheEngineComesFromTheOptionThenTheEnvironmentThenTheConfig) {
  EXPECT_EQ(choose_engine(EngineKind::Jail, "vm", EngineKind::Vm), EngineKind::Jail);
  EXPECT_EQ(choose_engine(std::nullopt, "jail", EngineKind::Vm), EngineKind::Jail);
  EXPECT_EQ(choose_engine(std::nullopt, "", EngineKind::Jail), EngineKind::Jail);
  EXPECT_EQ(choose_engine(std::nullopt, "", std::nullopt), kDefaultEngine);
  std::string msg = invalid_argument_of([] { choose_engine(std::nullopt, "xen", std::nullopt); });
  EXPECT_NE(msg.find("BOXLITE_ENGINE"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'xen'"), std::string::npos) << msg;
}

TEST(PlanTest, DefaultsComeFromTheImage) {
  BoxPlan p = plan_box(image_options(), facts());
  const auto& s = p.spec;
  EXPECT_EQ(s.engine(), EngineKind::Vm);
  EXPECT_EQ(s.box_id, "b0x");
  EXPECT_EQ(s.box_dir, "/home/h/boxes/b0x");
  EXPECT_EQ(s.hostname, "b0x");
  EXPECT_EQ(s.cpus, 1);
  EXPECT_EQ(s.memory_mib, 1024);
  EXPECT_EQ(s.env, (std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C"}));
  EXPECT_EQ(s.working_dir, "/app");
  EXPECT_EQ(s.user, "app");
  EXPECT_EQ(s.main_argv, (std::vector<std::string>{"/entry", "serve", "--port=80"}));
  EXPECT_TRUE(s.ephemeral);  // auto_remove is on unless asked off
  EXPECT_TRUE(s.seccomp);
  EXPECT_FALSE(s.net.enabled);
  EXPECT_EQ(p.disk_bytes, kDefaultDiskSizeGb << 30);
  EXPECT_FALSE(p.needs_secrets_ca);
}

TEST(PlanTest, OptionsOverTheImage) {
  BoxOptions o = image_options();
  o.cpus = 3;
  o.memory_mib = 256;
  o.env = {{"LANG", "C.UTF-8"}, {"EXTRA", "1"}};
  o.working_dir = "/work";
  o.user = "0:0";
  o.disk_size_gb = 3;
  o.auto_remove = false;
  BoxPlan p = plan_box(o, facts());
  EXPECT_EQ(p.spec.cpus, 3);
  EXPECT_EQ(p.spec.memory_mib, 256);
  // A box's variable replaces the image's in place; a new one goes last.
  EXPECT_EQ(p.spec.env, (std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "EXTRA=1"}));
  EXPECT_EQ(p.spec.working_dir, "/work");
  EXPECT_EQ(p.spec.user, "0:0");
  EXPECT_EQ(p.disk_bytes, 3ull << 30);
  EXPECT_FALSE(p.spec.ephemeral);
}

TEST(PlanTest, TheMainCommand) {
  auto img = facts().image;
  BoxOptions o = image_options();
  o.cmd = {"sh"};  // replaces the image's cmd, under its entrypoint
  EXPECT_EQ(main_command(o, img), (std::vector<std::string>{"/entry", "sh"}));
  o = image_options();
  o.entrypoint = {"/bin/echo"};  // drops the image's cmd too
  EXPECT_EQ(main_command(o, img), (std::vector<std::string>{"/bin/echo"}));
  o.cmd = {"hi"};
  EXPECT_EQ(main_command(o, img), (std::vector<std::string>{"/bin/echo", "hi"}));
  EXPECT_EQ(main_command(image_options(), image::ImageConfig{}), (std::vector<std::string>{"sh"}));
}

TEST(PlanTest, AJailGetsItsEnginesDefaultsAndMaxProcessesAsItsPidsLimit) {
  BoxOptions o = image_options();
  BoxPlan p = plan_box(o, facts(EngineKind::Jail));
  ASSERT_EQ(p.spec.engine(), EngineKind::Jail);
  EXPECT_EQ(p.spec.jail().uid_offset, engine::jail::kDefaultUidOffset);
  EXPECT_EQ(p.spec.jail().pids_limit, engine::jail::kDefaultPidsLimit);
  // What an imported box's part starts with, before it is prepared.
  EXPECT_EQ(engine::JailSpec{}.uid_offset, engine::jail::kDefaultUidOffset);
  EXPECT_EQ(engine::JailSpec{}.pids_limit, engine::jail::kDefaultPidsLimit);
  o.security.max_processes = 50;
  o.security.max_open_files = 100;
  o.security.seccomp = false;
  p = plan_box(o, facts(EngineKind::Jail));
  EXPECT_EQ(p.spec.jail().pids_limit, 50);
  EXPECT_EQ(p.spec.rlimit_nproc, 50u);
  EXPECT_EQ(p.spec.rlimit_nofile, 100u);
  EXPECT_FALSE(p.spec.seccomp);
  // A limit above the default leaves the cgroup's default.
  o.security.max_processes = 1'000'000;
  EXPECT_EQ(plan_box(o, facts(EngineKind::Jail)).spec.jail().pids_limit, engine::jail::kDefaultPidsLimit);
  // A VM's agent enforces it: no jail part.
  p = plan_box(o, facts(EngineKind::Vm));
  EXPECT_EQ(p.spec.if_jail(), nullptr);
  EXPECT_EQ(p.spec.rlimit_nproc, 1'000'000u);
}

TEST(PlanTest, VolumesAndPorts) {
  BoxOptions o = image_options();
  o.network.mode = "enabled";
  o.volumes = {{"/srv/data", "/data", true}, {"/srv/logs", "/logs", false}};
  o.ports = {{.host_port = 0, .guest_port = 8080}, {.host_port = 9000, .guest_port = 53, .protocol = "udp"}};
  BoxPlan p = plan_box(o, facts());
  ASSERT_EQ(p.spec.volumes.size(), 2u);
  EXPECT_EQ(p.spec.volumes[0].host_path, "/srv/data");
  EXPECT_EQ(p.spec.volumes[0].guest_path, "/data");
  EXPECT_TRUE(p.spec.volumes[0].read_only);
  EXPECT_FALSE(p.spec.volumes[1].read_only);
  EXPECT_TRUE(p.spec.net.enabled);
  ASSERT_EQ(p.spec.net.ports.size(), 2u);
  EXPECT_EQ(p.spec.net.ports[0].host_port, 8080);  // 0: the guest's
  EXPECT_EQ(p.spec.net.ports[1].host_port, 9000);
  EXPECT_TRUE(p.spec.net.ports[1].udp);
}

TEST(PlanTest, SecretsGetPlaceholdersAndTheHomesCa) {
  BoxOptions o = image_options();
  o.network.mode = "enabled";
  o.secrets = {{.name = "api-key", .value = "s3cr3t", .hosts = {"api.example.com"}}};
  BoxPlan p = plan_box(o, facts());
  EXPECT_TRUE(p.needs_secrets_ca);
  EXPECT_EQ(p.spec.env.back(), "BOXLITE_SECRET_API_KEY=<BOXLITE_SECRET:api-key>");
  for (const auto& e : p.spec.env) EXPECT_EQ(e.find("s3cr3t"), std::string::npos) << e;
}

TEST(PlanTest, BadInputIsRefused) {
  BoxOptions o = image_options();
  o.security.max_open_files = 0;
  EXPECT_NE(invalid_argument_of([&] { plan_box(o, facts()); }).find("security max_open_files must be > 0"),
            std::string::npos);
  o = image_options();
  o.ports = {{.guest_port = 70000}};
  EXPECT_NE(invalid_argument_of([&] { plan_box(o, facts()); }).find("guest_port must be between 1 and 65535"),
            std::string::npos);
  o = image_options();
  o.network.mode = "bridged";
  EXPECT_NE(invalid_argument_of([&] { plan_box(o, facts()); }).find("invalid network mode 'bridged'"),
            std::string::npos);
  o = image_options();
  o.network.mode = "enabled";
  o.secrets = {{.name = "k", .value = ""}};
  EXPECT_NE(invalid_argument_of([&] { plan_box(o, facts()); }).find("secret 'k' has an empty value"),
            std::string::npos);
}

}  // namespace
}  // namespace boxlite::core
