#include "engine/vm/qemu.hpp"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite::engine::vm {

namespace {

// Under TCG the guest's TSC runs at the host's rate. Telling the kernel that rate
// skips PIT calibration, which fails at random under emulation and then leaves
// Debian's kernel with a clock that never advances (a hang in early boot).
std::string host_tsc_khz() {
  try {
    for (const auto& line : split(read_file("/proc/cpuinfo"), '\n')) {
      if (line.rfind("cpu MHz", 0) != 0) continue;
      double mhz = std::stod(line.substr(line.find(':') + 1));
      if (mhz > 0) return std::to_string(static_cast<long>(mhz * 1000));
    }
  } catch (const std::exception&) {
  }
  return "";
}

// A locally administered unicast MAC (52:54:00 is QEMU's prefix) derived from the box id.
std::string box_mac(const std::string& box_id) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (char ch : box_id) h = (h ^ static_cast<uint8_t>(ch)) * 16777619u;
  char buf[18];
  std::snprintf(buf, sizeof buf, "52:54:00:%02x:%02x:%02x", (h >> 16) & 0xff, (h >> 8) & 0xff, h & 0xff);
  return buf;
}

}  // namespace

std::vector<std::string> qemu_argv(const ShimSpec& s) {
  const VmSpec& vm = s.vm();
  std::string cmdline = "console=ttyS0 quiet reboot=t panic=-1 lpj=1000000 tsc=reliable no_timer_check i8042.noaux";
  if (vm.accel == "tcg") {
    static const std::string khz = host_tsc_khz();
    if (!khz.empty()) cmdline += " tsc_early_khz=" + khz;
  }
  if (!vm.kernel_cmdline_extra.empty()) cmdline += " " + vm.kernel_cmdline_extra;
  std::vector<std::string> a = {
      vm.qemu,
      "-M",
      std::string("microvm,acpi=") + (vm.acpi ? "on" : "off") + ",x-option-roms=off,isa-serial=on,rtc=on",
      "-accel",
      vm.accel,
      "-cpu",
      vm.accel == "kvm" ? "host" : vm.tcg_cpu,
      "-smp",
      std::to_string(s.cpus),
      "-m",
      std::to_string(s.memory_mib),
      "-nodefaults",
      "-no-user-config",
      "-nographic",
      "-no-reboot",
      "-kernel",
      vm.kernel,
      "-initrd",
      vm.initramfs,
      "-append",
      cmdline,
      // The serial console goes to QEMU's stdout, which the shim points at console.log.
      // (A `file` chardev here made Debian's kernel hang in early timer setup under TCG.)
      "-serial",
      "stdio",
      "-device",
      "virtio-serial-device",
      "-chardev",
      "socket,id=agent,path=" + agent_socket_path(s.box_dir),
      "-device",
      std::string("virtserialport,chardev=agent,name=") + kAgentPortName,
      "-drive",
      "id=root,file=" + vm.disk + ",format=qcow2,if=none,discard=unmap",
      "-device",
      std::string("virtio-blk-device,drive=root,serial=") + kRootDiskSerial,
      "-device",
      "virtio-rng-device",
      // The monitor a snapshot, clone or export of the running box uses to pause the
      // VM and swap in a new top overlay (docs/storage.md). Only the box's owner can
      // reach it: the box directory is 0700.
      "-qmp",
      "unix:" + qmp_socket_path(s.box_dir) + ",server=on,wait=off",
  };
  for (size_t i = 0; i < s.volumes.size(); ++i) {
    // readonly=on makes QEMU refuse every write on the host side, so no mount
    // flag inside the guest (remount, a fresh mount of the tag) can lift it.
    // mapped-xattr: the guest's owners, modes, device nodes and setuid bits live in
    // user.virtfs.* xattrs, never real on the host (with `none` and QEMU as root, a
    // guest could mknod a 0666 disk device or a setuid-root binary in the share);
    // host files are QEMU's user's, 0644/0755 (docs/storage.md).
    const auto& v = s.volumes[i];
    std::string id = "fs" + std::to_string(i);
    a.insert(a.end(), {"-fsdev",
                       "local,id=" + id + ",path=" + v.host_path +
                           ",security_model=mapped-xattr,fmode=0644,dmode=0755" + (v.read_only ? ",readonly=on" : ""),
                       "-device", "virtio-9p-device,fsdev=" + id + ",mount_tag=" + volume_tag(i)});
  }
  if (s.seccomp) {
    // QEMU's own seccomp filter (SecurityOptions.seccomp_enabled, on by default): the
    // VMM a hostile guest attacks cannot exec, fork, change its ids or scheduling, or
    // use obsolete syscalls, should the guest ever get code running in it.
    a.insert(a.end(), {"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"});
  }
  if (s.net.enabled) {
    // Ethernet frames over a unix socket to the box's boxlite-net (DESIGN.md: the
    // 4-byte length framing of -netdev stream). MAC from the box id: stable per box.
    a.insert(a.end(), {"-netdev", "stream,id=net0,server=off,addr.type=unix,addr.path=" + net_socket_path(s.box_dir),
                       "-device", "virtio-net-device,netdev=net0,mac=" + box_mac(s.box_id)});
  }
  return a;
}

AccelProbe probe_kvm_inprocess() {
  AccelProbe r;
  UniqueFd kvm(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (!kvm) {
    r.reason = errno_text("/dev/kvm is not usable");
    return r;
  }
  if (::ioctl(kvm.get(), KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
    r.reason = "/dev/kvm has an unexpected API version";
    return r;
  }
  UniqueFd vmfd(::ioctl(kvm.get(), KVM_CREATE_VM, 0));
  if (!vmfd) {
    r.reason = errno_text("KVM_CREATE_VM failed");
    return r;
  }
  const size_t mem_size = 0x10000;
  void* mem = ::mmap(nullptr, mem_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    r.reason = errno_text("mmap guest memory");
    return r;
  }
  // Real mode at 0x1000: mov ecx, 16M; 1: dec ecx; jnz 1b; hlt. Natively ~10 ms.
  const unsigned char code[] = {0x66, 0xb9, 0x00, 0x00, 0x00, 0x01, 0x66, 0x49, 0x75, 0xfc, 0xf4};
  std::memcpy(static_cast<char*>(mem) + 0x1000, code, sizeof code);
  kvm_userspace_memory_region region{};
  region.slot = 0;
  region.guest_phys_addr = 0;
  region.memory_size = mem_size;
  region.userspace_addr = reinterpret_cast<uint64_t>(mem);
  if (::ioctl(vmfd.get(), KVM_SET_USER_MEMORY_REGION, &region) != 0) {
    r.reason = errno_text("KVM_SET_USER_MEMORY_REGION failed");
    return r;
  }
  UniqueFd vcpu(::ioctl(vmfd.get(), KVM_CREATE_VCPU, 0));
  if (!vcpu) {
    r.reason = errno_text("KVM_CREATE_VCPU failed");
    return r;
  }
  int run_size = ::ioctl(kvm.get(), KVM_GET_VCPU_MMAP_SIZE, 0);
  auto* run = static_cast<kvm_run*>(
      ::mmap(nullptr, static_cast<size_t>(run_size), PROT_READ | PROT_WRITE, MAP_SHARED, vcpu.get(), 0));
  if (run == MAP_FAILED) {
    r.reason = errno_text("mmap kvm_run");
    return r;
  }
  kvm_sregs sregs;
  ::ioctl(vcpu.get(), KVM_GET_SREGS, &sregs);
  sregs.cs.base = 0;
  sregs.cs.selector = 0;
  ::ioctl(vcpu.get(), KVM_SET_SREGS, &sregs);
  kvm_regs regs{};
  regs.rip = 0x1000;
  regs.rflags = 2;
  ::ioctl(vcpu.get(), KVM_SET_REGS, &regs);
  double start = now_ms();
  int rc = ::ioctl(vcpu.get(), KVM_RUN, 0);
  r.probe_ms = now_ms() - start;
  if (rc != 0 || run->exit_reason != KVM_EXIT_HLT) {
    r.reason = "KVM probe guest did not halt cleanly (exit reason " + std::to_string(run->exit_reason) + ")";
    return r;
  }
  // Native speed is ~10 ms; a nested or emulated KVM is orders of magnitude slower.
  if (r.probe_ms > 200) {
    r.reason = "KVM runs guest code far below native speed (probe loop took " +
               std::to_string(static_cast<int>(r.probe_ms)) + " ms, native ~10 ms)";
    return r;
  }
  r.usable = true;
  return r;
}

}  // namespace boxlite::engine::vm
