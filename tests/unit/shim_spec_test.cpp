// shim.json (engine/spec.hpp): common fields and one engine's part. A spec written by
// the build before the split (every key of both engines) still reads; a spec that
// sets the other engine's fields is refused.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/spec.hpp"

namespace boxlite::engine {
namespace {

std::string config_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config) << e.what();
    return e.what();
  }
  return "no error";
}

ShimSpec common_fields(EngineKind kind) {
  ShimSpec s;
  s.set_engine(kind);
  s.box_id = "abc123";
  s.box_dir = "/home/x/boxes/abc123";
  s.cpus = 2;
  s.memory_mib = 512;
  s.hostname = "abc123";
  s.env = {"PATH=/bin", "A=b"};
  s.working_dir = "/work";
  s.user = "1000:1000";
  s.main_argv = {"sh", "-c", "true"};
  s.rlimit_nproc = 64;
  s.volumes = {{"/srv/data", "/data", true}};
  return s;
}

// What the build before the split wrote for every box: both engines' keys.
nlohmann::json previous_build_spec(const std::string& engine) {
  return nlohmann::json::parse(R"({
    "box_id": "old1", "box_dir": "/h/boxes/old1", "engine": ")" +
                               engine + R"(",
    "accel": "tcg", "qemu": "qemu-system-x86_64", "kernel": "", "initramfs": "",
    "kernel_cmdline_extra": "", "acpi": false, "tcg_cpu": "max", "disk": "", "disk_base": "",
    "lower_dirs": [], "root_mountpoint": "", "uid_offset": 1048576, "pids_limit": 4096,
    "ephemeral": false, "guest_binary": "/usr/libexec/boxlite/boxlite-guest", "cpus": 1,
    "memory_mib": 1024, "boot_timeout_secs": 60.0, "hostname": "old1", "env": [],
    "working_dir": "/", "user": "", "volumes": [],
    "security": {"seccomp": true, "nofile": 0, "fsize": 0, "nproc": 0, "as": 0, "cpu": 0},
    "jail": {"disk_bytes": 0, "disk_mountpoint": "", "disk_template": ""},
    "main": {"argv": ["sh"], "tty": false, "stdin": true, "rows": 24, "cols": 80}
  })");
}

TEST(ShimSpecTest, TheEngineIsThePartsKind) {
  ShimSpec s;
  EXPECT_EQ(s.engine(), kDefaultEngine);
  s.set_engine(EngineKind::Jail);
  EXPECT_EQ(s.engine(), EngineKind::Jail);
  EXPECT_NE(s.if_jail(), nullptr);
  EXPECT_EQ(s.if_vm(), nullptr);
  s.set_engine(EngineKind::Vm);
  EXPECT_EQ(s.engine(), EngineKind::Vm);
  EXPECT_EQ(s.if_jail(), nullptr);
}

TEST(ShimSpecTest, AskingForTheOtherEnginesPartIsAnInternalError) {
  ShimSpec s = common_fields(EngineKind::Jail);
  try {
    (void)s.vm();
    FAIL() << "a jail spec gave a VM part";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_NE(std::string(e.what()).find("abc123"), std::string::npos) << e.what();
  }
}

TEST(ShimSpecTest, VmSpecRoundTrips) {
  ShimSpec s = common_fields(EngineKind::Vm);
  VmSpec& vm = s.vm();
  vm.accel = "kvm";
  vm.kernel = "/k/vmlinux";
  vm.initramfs = "/k/initrd";
  vm.kernel_cmdline_extra = "debug";
  vm.acpi = true;
  vm.tcg_cpu = "qemu64";
  vm.disk = "/d/disk.qcow2";
  vm.disk_base = "/d/base.ext4";
  vm.guest_binary = "/g/boxlite-guest";
  std::string text = spec_to_json(s);
  // A VM's spec says nothing of overlay layers.
  auto j = nlohmann::json::parse(text);
  EXPECT_FALSE(j.contains("lower_dirs"));
  EXPECT_FALSE(j.contains("jail"));
  ShimSpec back = spec_from_json(text);
  ASSERT_EQ(back.engine(), EngineKind::Vm);
  EXPECT_EQ(back.vm().accel, "kvm");
  EXPECT_EQ(back.vm().kernel, "/k/vmlinux");
  EXPECT_EQ(back.vm().initramfs, "/k/initrd");
  EXPECT_EQ(back.vm().kernel_cmdline_extra, "debug");
  EXPECT_TRUE(back.vm().acpi);
  EXPECT_EQ(back.vm().tcg_cpu, "qemu64");
  EXPECT_EQ(back.vm().disk, "/d/disk.qcow2");
  EXPECT_EQ(back.vm().disk_base, "/d/base.ext4");
  EXPECT_EQ(back.vm().guest_binary, "/g/boxlite-guest");
  EXPECT_EQ(back.box_id, "abc123");
  EXPECT_EQ(back.cpus, 2);
  EXPECT_EQ(back.memory_mib, 512);
  EXPECT_EQ(back.env, s.env);
  EXPECT_EQ(back.main_argv, s.main_argv);
  EXPECT_EQ(back.rlimit_nproc, 64u);
  ASSERT_EQ(back.volumes.size(), 1u);
  EXPECT_EQ(back.volumes[0].guest_path, "/data");
  EXPECT_TRUE(back.volumes[0].read_only);
  EXPECT_EQ(spec_to_json(back), text);
}

TEST(ShimSpecTest, JailSpecRoundTrips) {
  ShimSpec s = common_fields(EngineKind::Jail);
  JailSpec& jail = s.jail();
  jail.lower_dirs = {"/h/layers/a-1048576", "/h/layers/b-1048576"};
  jail.root_mountpoint = "/h/tmp/jail-root";
  jail.uid_offset = 2u << 20;
  jail.pids_limit = 64;
  jail.disk_bytes = 2ull << 30;
  jail.disk_mountpoint = "/h/tmp/jail-disk";
  jail.disk_template = "/h/images/jail-disks/2g.ext4";
  std::string text = spec_to_json(s);
  // A jail's spec names no kernel, QEMU or qcow2 disk.
  auto j = nlohmann::json::parse(text);
  for (const char* k : {"kernel", "initramfs", "qemu", "accel", "disk", "disk_base", "guest_binary"})
    EXPECT_FALSE(j.contains(k)) << k;
  ShimSpec back = spec_from_json(text);
  ASSERT_EQ(back.engine(), EngineKind::Jail);
  EXPECT_EQ(back.jail().lower_dirs, jail.lower_dirs);
  EXPECT_EQ(back.jail().root_mountpoint, "/h/tmp/jail-root");
  EXPECT_EQ(back.jail().uid_offset, 2u << 20);
  EXPECT_EQ(back.jail().pids_limit, 64);
  EXPECT_EQ(back.jail().disk_bytes, 2ull << 30);
  EXPECT_EQ(back.jail().disk_mountpoint, "/h/tmp/jail-disk");
  EXPECT_EQ(back.jail().disk_template, "/h/images/jail-disks/2g.ext4");
  EXPECT_EQ(back.user, "1000:1000");
  EXPECT_EQ(spec_to_json(back), text);
}

TEST(ShimSpecTest, ThePreviousBuildsSpecsStillRead) {
  for (const std::string engine : {"vm", "jail"}) {
    auto j = previous_build_spec(engine);
    if (engine == "vm") {
      j["kernel"] = "/k/vmlinux";
      j["disk"] = "/h/boxes/old1/disk.qcow2";
      j["pids_limit"] = 64;  // lowered by max_processes for every engine then: said nothing for a VM
    } else {
      j["lower_dirs"] = {"/h/layers/a-1048576"};
      j["root_mountpoint"] = "/h/tmp/jail-root";
      j["jail"]["disk_bytes"] = 1ull << 30;
    }
    ShimSpec s = spec_from_json(j.dump());
    EXPECT_EQ(engine_kind_name(s.engine()), engine);
    if (engine == "vm") {
      EXPECT_EQ(s.vm().kernel, "/k/vmlinux");
      EXPECT_EQ(s.vm().disk, "/h/boxes/old1/disk.qcow2");
      EXPECT_EQ(s.vm().guest_binary, "/usr/libexec/boxlite/boxlite-guest");
    } else {
      EXPECT_EQ(s.jail().lower_dirs.size(), 1u);
      EXPECT_EQ(s.jail().uid_offset, 1u << 20);
      EXPECT_EQ(s.jail().disk_bytes, 1ull << 30);
    }
  }
  // Before the jail's disk, and before root_mountpoint, existed.
  auto j = previous_build_spec("jail");
  j.erase("jail");
  j.erase("root_mountpoint");
  ShimSpec s = spec_from_json(j.dump());
  EXPECT_EQ(s.jail().disk_bytes, 0u);
  EXPECT_EQ(s.jail().root_mountpoint, "");
}

TEST(ShimSpecTest, AJailSpecWithAKernelIsRefused) {
  auto j = previous_build_spec("jail");
  j["lower_dirs"] = {"/h/layers/a-1048576"};
  j["kernel"] = "/k/vmlinux";
  j["disk_base"] = "/h/base.ext4";
  std::string msg = config_error_of([&] { spec_from_json(j.dump()); });
  EXPECT_NE(msg.find("a jail box's spec sets the vm engine's kernel, disk_base"), std::string::npos) << msg;
}

TEST(ShimSpecTest, AVmSpecWithOverlayLayersIsRefused) {
  auto j = previous_build_spec("vm");
  j["lower_dirs"] = {"/h/layers/a-1048576"};
  std::string msg = config_error_of([&] { spec_from_json(j.dump()); });
  EXPECT_NE(msg.find("a vm box's spec sets the jail engine's lower_dirs"), std::string::npos) << msg;
  j = previous_build_spec("vm");
  j["jail"]["disk_bytes"] = 1ull << 30;
  msg = config_error_of([&] { spec_from_json(j.dump()); });
  EXPECT_NE(msg.find("jail.disk_bytes"), std::string::npos) << msg;
}

TEST(ShimSpecTest, AMissingEnginePartFieldIsAConfigError) {
  auto j = previous_build_spec("vm");
  j.erase("kernel");
  std::string msg = config_error_of([&] { spec_from_json(j.dump()); });
  EXPECT_NE(msg.find("invalid shim spec"), std::string::npos) << msg;
}

}  // namespace
}  // namespace boxlite::engine
