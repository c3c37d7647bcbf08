// Preparation: what this machine gives a planned box (core/plan.hpp) before it is
// recorded. A VM gets QEMU, a kernel, an initramfs, an accelerator and its disk (an
// ext4 base of the image, a qcow2 overlay in the box's directory); a jail gets the
// image's layers, shifted for its uid range, and a disk of its own for what it
// writes. Also what this host can run (host_info), which asks the same questions.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "core/runtime.hpp"
#include "engine/jail/disk.hpp"
#include "engine/jail/jail.hpp"
#include "engine/vm/initramfs.hpp"
#include "rootfs/rootfs.hpp"

namespace boxlite {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

struct KernelChoice {
  std::string kernel;
  std::string modules_dir;  // "" when everything is built in
  bool acpi = false;
  std::string tcg_cpu = "max";
};

// A dpkg -x tree of a Debian linux-image package: boot/vmlinuz-* and lib/modules/<ver>.
KernelChoice kernel_from_tree(const std::string& dir) {
  KernelChoice k;
  std::unique_ptr<DIR, int (*)(DIR*)> boot(::opendir((dir + "/boot").c_str()), ::closedir);
  if (boot) {
    while (auto* e = ::readdir(boot.get())) {
      std::string n = e->d_name;
      if (n.rfind("vmlinuz-", 0) == 0) {
        k.kernel = dir + "/boot/" + n;
        k.modules_dir = dir + "/lib/modules/" + n.substr(8);
      }
    }
  }
  if (k.kernel.empty())
    throw Error(ErrorKind::Config,
                "kernel directory " + dir +
                    " has no boot/vmlinuz-*: expected a `dpkg -x` tree of a Debian linux-image package");
  if (!path_exists(k.modules_dir))
    throw Error(ErrorKind::Config, "kernel directory " + dir + " has no " + k.modules_dir);
  // Without virtio_mmio command-line devices (Debian's build) the kernel finds
  // the devices through ACPI only.
  std::string config_path = dir + "/boot/config-" + k.kernel.substr(k.kernel.rfind("vmlinuz-") + 8);
  try {
    k.acpi = read_file(config_path).find("CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=y") == std::string::npos;
  } catch (const Error&) {
    k.acpi = true;
  }
  k.tcg_cpu = "qemu64";
  return k;
}

KernelChoice resolve_kernel(const std::string& requested) {
  std::string lib = core::libexec_dir();
  std::string want = requested.empty() ? env_or("BOXLITE_KERNEL", "") : requested;
  if (want.empty()) {
    std::string k = lib + "/kernel/vmlinux";
    if (!path_exists(k))
      throw Error(ErrorKind::Config, "guest kernel not found at " + k + ": run ./scripts/setup to build it");
    return {k, ""};
  }
  if (want == "debian") {
    std::string dir = lib + "/kernel/debian";
    if (!path_exists(dir))
      throw Error(ErrorKind::Config, "the Debian kernel is not installed at " + dir + ": run ./scripts/setup");
    return kernel_from_tree(dir);
  }
  struct stat st;
  if (::stat(want.c_str(), &st) != 0) throw Error(ErrorKind::Config, "kernel " + want + " does not exist");
  if (S_ISDIR(st.st_mode)) return kernel_from_tree(want);
  return {want, ""};
}

using ProbeVerdict = std::pair<bool, std::string>;

std::string host_boot_id() {
  try {
    return trim(read_file("/proc/sys/kernel/random/boot_id"));
  } catch (const Error&) {
    return "unknown";
  }
}

std::optional<ProbeVerdict> load_probe_verdict(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error&) {
    return std::nullopt;
  }
  auto lines = split(text, '\n');
  if (lines.size() < 3 || lines[0] != host_boot_id()) return std::nullopt;
  return ProbeVerdict{lines[1] == "usable", lines[2]};
}

void save_probe_verdict(const std::string& path, const ProbeVerdict& v) {
  try {
    write_file_atomic(path, host_boot_id() + "\n" + (v.first ? "usable" : "unusable") + "\n" + v.second + "\n");
  } catch (const Error&) {
    // Only a cache.
  }
}

ProbeVerdict run_kvm_probe(const std::string& log_path) {
  SpawnOptions so;
  so.argv = {core::libexec_dir() + "/boxlite-shim", "--probe-kvm"};
  so.stdout_path = log_path;
  ::unlink(log_path.c_str());
  Child probe = spawn(so);
  std::optional<int> st = probe.wait_for(1000);
  if (!st) {
    probe.kill_now();
    return {false, "the KVM probe guest did not finish within 1 s"};
  }
  std::string out;
  try {
    out = trim(read_file(log_path));
  } catch (const Error&) {
  }
  bool usable = WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
  auto sp = out.find(' ', out.find(' ') + 1);
  return {usable, sp == std::string::npos ? out : out.substr(sp + 1)};
}

// The root disk's size: disk_size_gb GiB, or the default; never below the base
// image (the overlay cannot be smaller than what it holds).
uint64_t disk_size_bytes(const BoxOptions& opts, const std::string& base) {
  uint64_t bytes = opts.disk_size_gb.value_or(kDefaultDiskSizeGb) << 30;
  struct stat st;
  if (::stat(base.c_str(), &st) == 0 && bytes < static_cast<uint64_t>(st.st_size)) {
    if (opts.disk_size_gb) {
      throw Error(ErrorKind::InvalidArgument, "disk_size_gb=" + std::to_string(*opts.disk_size_gb) +
                                                  " is smaller than the image's root file system (" +
                                                  std::to_string((static_cast<uint64_t>(st.st_size) >> 20) + 1) +
                                                  " MiB)");
    }
    return 0;  // the base's own size
  }
  return bytes;
}

// std::visit over a spec's engine part, one lambda per engine.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

HostInfo LocalRuntime::host_info() {
  HostInfo h;
  h.version = BOXLITE_VERSION_STRING;
  h.home = layout_.root;
  h.default_engine = default_engine();
  const std::string vm_name(engine_kind_name(EngineKind::Vm)), jail_name(engine_kind_name(EngineKind::Jail));
  EngineStatus vm{vm_name, true, ""};
  if (which("qemu-system-x86_64").empty()) {
    vm = {vm_name, false, "qemu-system-x86_64 not found (apt-get install qemu-system-x86 qemu-utils)"};
  } else {
    try {
      resolve_kernel("");
    } catch (const Error& e) {
      vm = {vm_name, false, e.what()};
    }
  }
  EngineStatus jail{jail_name, true, "weaker isolation than vm (shared kernel); used only when asked for"};
  if (::geteuid() != 0) {
    jail = {jail_name, false, "needs root on this host (see docs/jail.md)"};
  } else if (read_file("/proc/filesystems").find("overlay") == std::string::npos) {
    jail = {jail_name, false, "the kernel has no overlayfs"};
  } else if (std::string why = engine::jail::namespaces_refused(); !why.empty()) {
    jail = {jail_name, false, why};
  }
  h.engines = {vm, jail};
  std::string probe = layout_.tmp() + "/kvm-probe";
  auto verdict = load_probe_verdict(probe);
  if (!verdict) {
    verdict = run_kvm_probe(layout_.tmp() + "/kvm-probe.log");
    save_probe_verdict(probe, *verdict);
  }
  h.accelerators = {{"kvm", verdict->first, verdict->first ? "" : verdict->second},
                    {"tcg", !which("qemu-system-x86_64").empty(), "software emulation: the same VM isolation, slower"}};
  return h;
}

std::string LocalRuntime::resolve_accel(const std::string& requested) {
  std::string want = requested.empty() ? default_accel() : requested;
  if (want == "tcg") return "tcg";
  // The probe runs in a child with a deadline (a broken KVM can hang KVM_RUN) and
  // its verdict is kept per host boot, so only the first box after a boot pays it.
  static std::mutex mu;
  static std::optional<std::pair<bool, std::string>> cached;
  std::lock_guard lk(mu);
  if (!cached) cached = load_probe_verdict(layout_.tmp() + "/kvm-probe");
  if (!cached) {
    cached = run_kvm_probe(layout_.tmp() + "/kvm-probe.log");
    save_probe_verdict(layout_.tmp() + "/kvm-probe", *cached);
  }
  if (cached->first) return "kvm";
  if (want == "kvm")
    throw Error(ErrorKind::UnsupportedEngine, "accel=kvm requested but KVM is not usable: " + cached->second);
  warn("KVM is not usable (" + cached->second + "); using QEMU TCG software emulation: the same VM isolation, slower");
  return "tcg";
}

void LocalRuntime::prepare_vm(engine::ShimSpec& spec, const BoxOptions& opts, const image::LocalImage& img) {
  prepare_vm_machine(spec, opts);
  spec.vm().disk_base = rootfs::ensure_base_ext4(layout_.root, img);
}

// What a vm box needs from this machine (QEMU, kernel, initramfs, accelerator),
// apart from its disk: also what an imported box gets.
void LocalRuntime::prepare_vm_machine(engine::ShimSpec& spec, const BoxOptions& opts) {
  engine::VmSpec& vm = spec.vm();
  vm.guest_binary = core::libexec_dir() + "/boxlite-guest";
  vm.qemu = which("qemu-system-x86_64");
  if (vm.qemu.empty()) {
    throw Error(ErrorKind::Engine,
                "qemu-system-x86_64 not found: install it with `apt-get install qemu-system-x86 qemu-utils` (or run "
                "./scripts/setup)");
  }
  if (which("qemu-img").empty())
    throw Error(ErrorKind::Engine, "qemu-img not found: install it with `apt-get install qemu-utils`");
  KernelChoice kernel = resolve_kernel(opts.kernel);
  vm.kernel = kernel.kernel;
  vm.acpi = kernel.acpi;
  vm.tcg_cpu = kernel.tcg_cpu;
  vm.initramfs = engine::vm::ensure_initramfs(layout_.kernel_cache(), vm.guest_binary, kernel.modules_dir);
  vm.accel = resolve_accel(opts.accel);
}

void LocalRuntime::prepare_jail(engine::ShimSpec& spec, const image::LocalImage& img) {
  if (::geteuid() != 0) {
    throw Error(ErrorKind::UnsupportedEngine,
                "the jail engine needs root on this host (user namespaces with a mapped uid range and overlayfs); "
                "see docs/jail.md for what an unprivileged user needs");
  }
  // Its uid range and pids limit are the plan's (core/plan.hpp).
  engine::JailSpec& jail = spec.jail();
  jail.lower_dirs = rootfs::ensure_overlay_layers(layout_.root, img, jail.uid_offset);
  jail.root_mountpoint = layout_.jail_root_mountpoint();
}

void LocalRuntime::prepare_jail_disk(engine::ShimSpec& spec, uint64_t bytes) {
  if (std::string why = engine::jail::disks_unavailable(); !why.empty()) {
    warn("disk_size_gb is not enforced for jail box " + spec.box_id + ": " + why +
         "; its writable layer is a directory on the host's file system, which it can fill (docs/jail.md)");
    return;
  }
  engine::JailSpec& jail = spec.jail();
  jail.disk_bytes = bytes;
  jail.disk_mountpoint = layout_.jail_disk_mountpoint();
  jail.disk_template = engine::jail::ensure_disk_template(layout_.jail_disk_templates(), bytes);
}

void LocalRuntime::prepare_engine_part(engine::ShimSpec& spec, const BoxOptions& opts, const image::LocalImage& img,
                                       uint64_t disk_bytes) {
  std::visit(Overloaded{[&](engine::VmSpec&) { prepare_vm(spec, opts, img); },
                        [&](engine::JailSpec&) {
                          prepare_jail(spec, img);
                          prepare_jail_disk(spec, disk_bytes);
                        }},
             spec.engine_spec);
}

bool LocalRuntime::make_writable_layer(engine::ShimSpec& spec, const BoxOptions& opts) {
  return std::visit(Overloaded{[&](engine::VmSpec& vm) {
                                 vm.disk = spec.box_dir + "/disk.qcow2";
                                 rootfs::create_overlay(vm.disk_base, vm.disk, disk_size_bytes(opts, vm.disk_base));
                                 return true;
                               },
                               // Its disk is a copy of the home's template, made by the shim at the first start.
                               [](engine::JailSpec&) { return false; }},
                    spec.engine_spec);
}

}  // namespace boxlite
