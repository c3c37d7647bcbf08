#include "engine/vm/qemu.hpp"

#include <fcntl.h>
#include <linux/kvm.h>
#include <openssl/sha.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "common/io.hpp"

namespace boxlite::engine::vm {

std::vector<std::string> qemu_argv(const ShimSpec& s) {
  std::string cmdline =
      "console=ttyS0 quiet reboot=t panic=-1 lpj=1000000 tsc=reliable no_timer_check i8042.noaux random.trust_cpu=on";
  if (!s.kernel_cmdline_extra.empty()) cmdline += " " + s.kernel_cmdline_extra;
  std::vector<std::string> a = {
      s.qemu,
      "-M", "microvm,acpi=off,x-option-roms=off,isa-serial=on,rtc=on",
      "-accel", s.accel,
      "-cpu", s.accel == "kvm" ? "host" : "max",
      "-smp", std::to_string(s.cpus),
      "-m", std::to_string(s.memory_mib),
      "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
      "-kernel", s.kernel,
      "-initrd", s.initramfs,
      "-append", cmdline,
      "-chardev", "file,id=console,path=" + console_log_path(s.box_dir),
      "-serial", "chardev:console",
      "-device", "virtio-serial-device",
      "-chardev", "socket,id=agent,path=" + agent_socket_path(s.box_dir),
      "-device", std::string("virtserialport,chardev=agent,name=") + kAgentPortName,
      "-drive", "id=root,file=" + s.disk + ",format=qcow2,if=none,discard=unmap",
      "-device", std::string("virtio-blk-device,drive=root,serial=") + kRootDiskSerial,
      "-device", "virtio-rng-device",
  };
  return a;
}

namespace {

// Minimal writer of the "newc" cpio format the kernel unpacks as initramfs.
class CpioWriter {
 public:
  void dir(const std::string& name, unsigned mode = 0755) { entry(name, S_IFDIR | mode, 0, 0, ""); }
  void file(const std::string& name, const std::string& data, unsigned mode) { entry(name, S_IFREG | mode, 0, 0, data); }
  void chardev(const std::string& name, unsigned mode, unsigned major, unsigned minor) {
    entry(name, S_IFCHR | mode, major, minor, "");
  }
  std::string finish() {
    entry("TRAILER!!!", 0, 0, 0, "");
    return std::move(out_);
  }

 private:
  void hex(unsigned v) {
    char b[9];
    std::snprintf(b, sizeof b, "%08X", v);
    out_.append(b, 8);
  }
  void pad() {
    while (out_.size() % 4) out_.push_back('\0');
  }
  void entry(const std::string& name, unsigned mode, unsigned rmaj, unsigned rmin, const std::string& data) {
    out_ += "070701";
    hex(++ino_);
    hex(mode);
    hex(0);  // uid
    hex(0);  // gid
    hex(1);  // nlink
    hex(0);  // mtime
    hex(static_cast<unsigned>(data.size()));
    hex(0);
    hex(0);
    hex(rmaj);
    hex(rmin);
    hex(static_cast<unsigned>(name.size() + 1));
    hex(0);
    out_ += name;
    out_.push_back('\0');
    pad();
    out_ += data;
    pad();
  }
  std::string out_;
  unsigned ino_ = 0;
};

std::string sha256_hex(const std::string& data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return hex_encode(md, sizeof md);
}

// Modules the agent needs from a modular (Debian) kernel, in load order.
const std::vector<std::string> kModules = {
    "drivers/virtio/virtio.ko", "drivers/virtio/virtio_ring.ko", "drivers/virtio/virtio_mmio.ko",
    "drivers/char/virtio_console.ko", "drivers/block/virtio_blk.ko", "drivers/char/hw_random/virtio-rng.ko",
    "lib/crc16.ko", "crypto/crc32c_generic.ko", "lib/libcrc32c.ko", "fs/mbcache.ko", "fs/jbd2/jbd2.ko",
    "fs/ext4/ext4.ko", "net/9p/9pnet.ko", "net/9p/9pnet_virtio.ko", "fs/netfs/netfs.ko", "fs/fscache/fscache.ko",
    "fs/9p/9p.ko", "fs/overlayfs/overlay.ko",
};

}  // namespace

std::string ensure_initramfs(const std::string& cache_dir, const std::string& guest_binary, const std::string& modules_dir) {
  std::string agent = read_file(guest_binary);
  CpioWriter cpio;
  for (const char* d : {"dev", "proc", "sys", "newroot", "modules"}) cpio.dir(d);
  cpio.chardev("dev/console", 0600, 5, 1);
  cpio.chardev("dev/null", 0666, 1, 3);
  cpio.file("init", agent, 0755);
  if (!modules_dir.empty()) {
    std::string list;
    int n = 0;
    for (const auto& rel : kModules) {
      std::string path = modules_dir + "/kernel/" + rel;
      if (!path_exists(path)) continue;  // built into this kernel, or not shipped
      std::string name = "modules/" + std::to_string(n++) + ".ko";
      cpio.file(name, read_file(path), 0644);
      list += "/" + name + "\n";
    }
    cpio.file("modules/load.list", list, 0644);
  }
  std::string image = cpio.finish();
  make_dirs(cache_dir);
  std::string path = cache_dir + "/initramfs-" + sha256_hex(image).substr(0, 16) + ".cpio";
  if (!path_exists(path)) write_file_atomic(path, image);
  return path;
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
  auto* run = static_cast<kvm_run*>(::mmap(nullptr, static_cast<size_t>(run_size), PROT_READ | PROT_WRITE, MAP_SHARED, vcpu.get(), 0));
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
    r.reason = "KVM runs guest code far below native speed (probe loop took " + std::to_string(static_cast<int>(r.probe_ms)) +
               " ms, native ~10 ms)";
    return r;
  }
  r.usable = true;
  return r;
}

}  // namespace boxlite::engine::vm
