#include "core/runtime.hpp"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/process.hpp"
#include "common/thread.hpp"
#include "common/trace.hpp"
#include "core/home_config.hpp"
#include "core/network.hpp"
#include "core/record_copy.hpp"
#include "core/shim_launch.hpp"
#include "core/spare_dirs.hpp"
#include "core/volumes.hpp"
#include "engine/jail/disk.hpp"
#include "engine/jail/jail.hpp"
#include "engine/vm/initramfs.hpp"
#include "engine/vm/qemu.hpp"
#include "image/oci_layout.hpp"
#include "rootfs/rootfs.hpp"

namespace boxlite {

namespace {

// Set on the store's opener thread (RuntimeOptions::open_store_in_background): its
// warnings wait there for the first use of the store, on the caller's thread.
thread_local std::vector<std::string>* deferred_warnings = nullptr;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string new_box_id() {
  static const char* alphabet = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string hex = random_hex(12);
  std::string id;
  for (size_t i = 0; i < 12; ++i) id += alphabet[std::stoul(hex.substr(i * 2, 2), nullptr, 16) % 36];
  return id;
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

std::vector<std::string> env_list(const std::vector<std::string>& image_env, const EnvList& box_env) {
  std::vector<std::string> out = image_env;
  for (const auto& [k, v] : box_env) {
    std::string kv = k + "=" + v;
    bool replaced = false;
    for (auto& e : out) {
      if (e.compare(0, k.size() + 1, k + "=") == 0) {
        e = kv;
        replaced = true;
      }
    }
    if (!replaced) out.push_back(kv);
  }
  return out;
}

// Removes a half-made box directory unless committed.
struct DirGuard {
  std::string path;
  bool committed = false;
  ~DirGuard() {
    if (!committed) {
      try {
        remove_tree(path);
      } catch (...) {
      }
    }
  }
};

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

}  // namespace

std::string LocalRuntime::make_box_id() { return new_box_id(); }

namespace {

// The limits of a SecurityOptions that are set, by their documented names.
std::vector<std::pair<const char*, uint64_t>> security_limits(const SecurityOptions& s) {
  std::vector<std::pair<const char*, uint64_t>> out;
  const std::pair<const char*, const std::optional<uint64_t>*> all[] = {{"max_open_files", &s.max_open_files},
                                                                        {"max_file_size", &s.max_file_size},
                                                                        {"max_processes", &s.max_processes},
                                                                        {"max_memory", &s.max_memory},
                                                                        {"max_cpu_time", &s.max_cpu_time}};
  for (const auto& [name, v] : all) {
    if (*v) out.emplace_back(name, **v);
  }
  return out;
}

// Every limit must be positive (nullopt is "no limit"). Both engines enforce them:
// a jail's init sets them for the whole box, a VM's agent on each process it starts.
void check_security(const SecurityOptions& s) {
  for (const auto& [name, v] : security_limits(s)) {
    if (v == 0) throw Error(ErrorKind::InvalidArgument, std::string("security ") + name + " must be > 0");
  }
}

void apply_security(engine::ShimSpec& spec, const SecurityOptions& s) {
  spec.seccomp = s.seccomp;
  spec.rlimit_nofile = s.max_open_files.value_or(0);
  spec.rlimit_fsize = s.max_file_size.value_or(0);
  spec.rlimit_nproc = s.max_processes.value_or(0);
  spec.rlimit_as = s.max_memory.value_or(0);
  spec.rlimit_cpu = s.max_cpu_time.value_or(0);
  // A jail's pids cgroup is its processes' limit too (a VM's agent sets its own).
  if (auto* jail = spec.if_jail();
      jail && s.max_processes && *s.max_processes < static_cast<uint64_t>(jail->pids_limit)) {
    jail->pids_limit = static_cast<int>(*s.max_processes);
  }
}

}  // namespace

void validate_box_options(const BoxOptions& o) {
  if (o.image.empty() && o.rootfs_path.empty())
    throw Error(ErrorKind::InvalidArgument, "Either 'image' or 'rootfs_path' must be provided");
  if (o.cpus && (*o.cpus < 1 || *o.cpus > 255))
    throw Error(ErrorKind::InvalidArgument, "cpus must be between 1 and 255, got " + std::to_string(*o.cpus));
  if (o.memory_mib && (*o.memory_mib < 64 || *o.memory_mib > 1048576)) {
    throw Error(ErrorKind::InvalidArgument,
                "memory_mib must be between 64 and 1048576 MiB, got " + std::to_string(*o.memory_mib));
  }
  if (!o.accel.empty() && o.accel != "auto" && o.accel != "kvm" && o.accel != "tcg") {
    throw Error(ErrorKind::InvalidArgument, "unknown accel '" + o.accel + "': expected 'auto', 'kvm' or 'tcg'");
  }
  if (!o.working_dir.empty() && o.working_dir[0] != '/') {
    throw Error(ErrorKind::InvalidArgument, "working_dir must be an absolute path, got '" + o.working_dir + "'");
  }
  if (o.boot_timeout_secs <= 0) throw Error(ErrorKind::InvalidArgument, "boot timeout must be positive");
  (void)make_net_config(o);
  if (o.auto_remove && o.detach) {
    throw Error(ErrorKind::InvalidArgument,
                "invalid argument: remove-on-stop is incompatible with detach=true. Detached boxes should use "
                "auto_delete=0 (or deprecated auto_remove=false) for manual lifecycle control.");
  }
  validate_volumes(o.volumes);
  if (o.disk_size_gb && (*o.disk_size_gb < 1 || *o.disk_size_gb > kMaxDiskSizeGb)) {
    throw Error(ErrorKind::InvalidArgument, "disk_size_gb must be between 1 and " + std::to_string(kMaxDiskSizeGb) +
                                                " GiB, got " + std::to_string(*o.disk_size_gb));
  }
  for (const auto& [k, v] : o.env) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos) {
      throw Error(ErrorKind::InvalidArgument, "invalid environment variable name '" + k + "'");
    }
  }
}

LocalRuntime::LocalRuntime(RuntimeOptions opts) {
  layout_.root = opts.home_dir.empty() ? core::default_home() : opts.home_dir;
  if (layout_.root.empty() || layout_.root[0] != '/') {
    throw Error(ErrorKind::InvalidArgument, "home directory must be an absolute path, got '" + layout_.root + "'");
  }
  trace("core: runtime");
  layout_.create();
  trace("core: home laid out");
  if (opts.exclusive) {
    home_lock_ = FileLock::try_acquire(layout_.locks() + "/runtime.lock");
    if (!home_lock_.held()) {
      throw Error(ErrorKind::InvalidState, "Another BoxliteRuntime is already using directory " + layout_.root +
                                               " (a process holds " + layout_.locks() + "/runtime.lock)");
    }
  }
  early_shim_ = std::make_shared<core::EarlyShimSlot>(opts.early_shim.take());
  for (const auto& r : opts.image_registries) registry::validate(r);
  registries_ = opts.image_registries;
  load_home_config(!registries_.empty());
  trace("core: config loaded");
  if (!opts.open_store_in_background) {
    open_store();
    return;
  }
  // Last: a constructor that throws after this would destroy a joinable thread.
  store_opener_ = start_thread_without_signals([this] {
    deferred_warnings = &opener_warnings_;  // the caller may set its warning sink meanwhile
    try {
      open_store();
    } catch (...) {
      store_error_ = std::current_exception();
    }
  });
}

LocalRuntime::~LocalRuntime() { join_store_opener(); }

void LocalRuntime::join_store_opener() {
  std::call_once(store_opener_joined_, [this] {
    if (!store_opener_.joinable()) return;
    store_opener_.join();
    for (const auto& w : opener_warnings_) {
      try {
        warn(w);
      } catch (...) {  // a caller's sink that throws loses its warning, not the store
      }
    }
  });
}

void LocalRuntime::open_store() {
  store_ = std::make_shared<store::Store>(layout_.root + "/db/boxlite.db");
  trace("core: store open");
  sweep_half_made_boxes();
}

const std::shared_ptr<store::Store>& LocalRuntime::store() {
  join_store_opener();
  if (store_error_) std::rethrow_exception(store_error_);
  return store_;
}

// A create killed between making the box directory and recording the box leaves a
// directory nobody knows. A create spends milliseconds in that window, so one
// older than a minute with no record is debris.
// On the store's opener: store_, not store().
void LocalRuntime::sweep_half_made_boxes() {
  std::set<std::string> known;
  for (const auto& r : store_->list()) {
    known.insert(r.id);
    // The removal of an auto_remove box's row is not synced (store.hpp): after a host
    // crash the row can outlive the directory removed before it. Such a row is debris too.
    forget_if_removed(r);
  }
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(layout_.boxes().c_str()), ::closedir);
  if (!dir) return;
  time_t now = ::time(nullptr);
  while (auto* e = ::readdir(dir.get())) {
    std::string id = e->d_name;
    if (id == "." || id == ".." || known.count(id)) continue;
    std::string path = layout_.box_dir(id);
    struct stat st;
    // (A spare taken for a new box has its time set before it moves here.)
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || now - st.st_mtime < 60) continue;
    // A box in use is not half-made, whatever the store says (one replaced or
    // truncated under a running box): never removed under its shim or a taker.
    if (pid_t shim = unix_listener_pid(engine::shim_socket_path(path)); shim > 0) {
      warn("box directory " + path + " has a running shim (pid " + std::to_string(shim) +
           ") but no row in the store: left alone; stop the shim (kill " + std::to_string(shim) +
           ") and it is removed later");
      continue;
    }
    try {
      FileLock lock = FileLock::try_acquire_directory(path);
      if (!lock.held()) continue;
      if (core::has_record_copy(path)) {
        record_again(path);
        continue;
      }
      remove_tree(path);
    } catch (const Error& err) {
      warn("could not remove the half-made box directory " + path + ": " + err.what());
    }
  }
}

// A kept box whose row was lost (the database replaced, truncated or deleted under
// it) is no half-made box: its directory holds the copy of its row made once the row
// was committed (core/record_copy.hpp). It is recorded again, stopped; under another
// box's name now, it loses its name. A copy that cannot be read leaves the directory
// alone: it is never swept.
void LocalRuntime::record_again(const std::string& box_dir) {
  store::BoxRecord r;
  try {
    r = core::read_record_copy(box_dir);
    r.stopped_at_ms = wall_clock_ms();
  } catch (const Error& err) {
    warn("box directory " + box_dir + " has no row in the store and its " + core::kRecordCopyFile +
         " cannot be read (" + err.what() + "): left alone; remove the directory if the box is not wanted");
    return;
  }
  std::string label = r.name.empty() ? r.id : r.id + " (" + r.name + ")";
  try {
    // Another process may have recorded it since we listed the rows (we hold its lock now).
    if (auto known = store_->find_exact(r.id); known && known->id == r.id) return;
    if (!r.name.empty() && store_->find_exact(r.name)) {
      warn("box " + label + ": its name now belongs to another box, so it is recorded again without one");
      r.name.clear();
      core::keep_record_copy(box_dir, r);
    }
    store_->insert(r);
  } catch (const Error& err) {
    warn("box " + label + " is missing from the store and could not be recorded again (" + err.what() +
         "): its directory " + box_dir + " is left alone");
    return;
  }
  warn("box " + label + " was missing from the store (was the database replaced?): recorded again, stopped, from " +
       box_dir + "/" + core::kRecordCopyFile);
}

// <home>/config.json (core/home_config.hpp). An option beats the environment,
// which beats this file.
void LocalRuntime::load_home_config(bool registries_from_options) {
  std::string path = layout_.root + "/config.json";
  if (!path_exists(path)) return;
  core::HomeConfig c = core::parse_home_config(read_file(path), path, !registries_from_options);
  config_engine_ = c.engine;
  config_accel_ = c.accel;
  if (c.registries) registries_ = std::move(*c.registries);
}

EngineKind LocalRuntime::default_engine() const {
  if (const char* env = std::getenv("BOXLITE_ENGINE"); env && *env) return parse_engine_kind(env, "BOXLITE_ENGINE");
  return config_engine_.value_or(kDefaultEngine);
}

std::string LocalRuntime::default_accel() const {
  return env_or("BOXLITE_ACCEL", config_accel_.empty() ? "auto" : config_accel_);
}

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

void LocalRuntime::warn(const std::string& msg) const {
  if (deferred_warnings) {
    deferred_warnings->push_back(msg);
  } else if (warn_) {
    warn_(msg);
  } else {
    std::fprintf(stderr, "boxlite: warning: %s\n", msg.c_str());
  }
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
  engine::JailSpec& jail = spec.jail();
  jail.uid_offset = engine::jail::kDefaultUidOffset;
  jail.pids_limit = engine::jail::kDefaultPidsLimit;
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

namespace {

// Docker's rule for names: they appear in paths, URLs and shell commands.
void validate_name(const std::string& name) {
  if (name.empty()) return;
  bool ok = name.size() <= 128 && std::isalnum(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  if (!ok)
    throw Error(ErrorKind::InvalidArgument,
                "invalid box name '" + name + "': use [a-zA-Z0-9][a-zA-Z0-9_.-]* (at most 128)");
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

}  // namespace

std::shared_ptr<LocalBox> LocalRuntime::track(std::shared_ptr<LocalBox> box) {
  std::lock_guard lk(boxes_mu_);
  handed_out_.erase(std::remove_if(handed_out_.begin(), handed_out_.end(), [](const auto& w) { return w.expired(); }),
                    handed_out_.end());
  handed_out_.push_back(box);
  box->set_counters(counters_);
  box->set_early_shim(early_shim_);
  return box;
}

void LocalRuntime::shutdown(std::optional<double> timeout_secs) {
  double secs = timeout_secs.value_or(10);
  if (secs < 0 && secs != -1)
    throw Error(ErrorKind::InvalidArgument, "shutdown timeout must be >= 0 seconds, or -1 to wait indefinitely");
  shut_down_ = true;
  int timeout_ms = secs < 0 ? -1 : static_cast<int>(secs * 1000);
  std::vector<std::shared_ptr<LocalBox>> boxes;
  {
    std::lock_guard lk(boxes_mu_);
    for (auto& w : handed_out_) {
      if (auto b = w.lock()) boxes.push_back(b);
    }
  }
  std::vector<std::thread> stoppers;
  for (auto& b : boxes) {
    stoppers.emplace_back([b, timeout_ms] {
      try {
        if (b->state() == BoxState::Running) b->stop(timeout_ms);
      } catch (const Error& e) {
        std::fprintf(stderr, "boxlite: warning: shutdown of box %s: %s\n", b->id().c_str(), e.what());
      }
    });
  }
  for (auto& t : stoppers) t.join();
}

RuntimeMetrics LocalRuntime::metrics() {
  RuntimeMetrics m;
  for (const auto& info : list_info()) m.num_running_boxes += info.status == BoxState::Running;
  m.boxes_created_total = counters_->boxes_created;
  m.boxes_failed_total = counters_->boxes_failed;
  m.total_commands_executed = counters_->commands_executed;
  m.total_exec_errors = counters_->exec_errors;
  return m;
}

std::shared_ptr<LocalBox> LocalRuntime::create(const BoxOptions& opts, const std::string& name) {
  return create_counted(opts, name, /*start_now=*/false);
}

std::shared_ptr<LocalBox> LocalRuntime::create_to_start(const BoxOptions& opts, const std::string& name) {
  return create_counted(opts, name, /*start_now=*/true);
}

std::shared_ptr<LocalBox> LocalRuntime::create_counted(const BoxOptions& opts, const std::string& name,
                                                       bool start_now) {
  if (shut_down_) throw Error(ErrorKind::Stopped, "Cannot create box: runtime has been shut down");
  try {
    auto box = create_box(opts, name, start_now);
    ++counters_->boxes_created;
    return box;
  } catch (const Error& e) {
    // A caller's mistake is not a failed box; a box that could not be made is.
    if (e.kind() != ErrorKind::InvalidArgument && e.kind() != ErrorKind::AlreadyExists) ++counters_->boxes_failed;
    throw;
  }
}

std::shared_ptr<LocalBox> LocalRuntime::create_box(const BoxOptions& opts, const std::string& name, bool start_now) {
  validate_box_options(opts);
  validate_name(name);
  if (!name.empty() && store()->find_exact(name))
    throw Error(ErrorKind::AlreadyExists, "box name '" + name + "' is already in use");
  EngineKind engine = opts.engine ? *opts.engine : default_engine();
  check_security(opts.security);

  if (engine == EngineKind::Jail) engine::jail::prime_cgroup_attach();
  double create_started_ms = now_ms();
  std::string source = opts.rootfs_path.empty() ? opts.image : opts.rootfs_path;
  struct stat st;
  bool is_layout = source.rfind("oci:", 0) == 0 || ::stat(source.c_str(), &st) == 0 || !opts.rootfs_path.empty() ||
                   source[0] == '/' || source[0] == '.';
  std::string recorded = source;
  image::LocalImage img =
      image::open_oci_layout(is_layout ? image::parse_layout_ref(source) : resolve_registry_image(source, recorded));
  nlohmann::json timings;
  trace("core: image opened");
  if (img.layers.empty()) {
    throw Error(ErrorKind::Image, "image " + recorded + " has no layers: there is no file in it to run");
  }

  engine::ShimSpec spec;
  spec.set_engine(engine);
  if (std::string agent = core::libexec_dir() + "/boxlite-guest"; !path_exists(agent)) {
    throw Error(ErrorKind::Config, "guest agent not found at " + agent + ": build the project first");
  }
  if (engine == EngineKind::Vm) {
    prepare_vm(spec, opts, img);
  } else {
    prepare_jail(spec, img);
  }
  double t_image = now_ms();
  trace("core: image prepared");
  timings["image_prepare_ms"] = static_cast<int64_t>(t_image - create_started_ms);
  spec.box_id = new_box_id();
  spec.box_dir = layout_.box_dir(spec.box_id);
  if (engine == EngineKind::Jail) prepare_jail_disk(spec, opts.disk_size_gb.value_or(kDefaultDiskSizeGb) << 30);
  DirGuard guard{spec.box_dir};
  bool spare = engine == EngineKind::Jail && core::take_spare_box_dir(layout_.spare_box_dirs(), spec.box_dir);
  if (!spare && ::mkdir(spec.box_dir.c_str(), 0700) != 0) {
    throw_errno(ErrorKind::Storage, "create box directory " + spec.box_dir);
  }
  spec.cpus = opts.cpus.value_or(1);
  spec.memory_mib = opts.memory_mib.value_or(1024);
  apply_security(spec, opts.security);
  spec.boot_timeout_secs = opts.boot_timeout_secs;
  spec.hostname = spec.box_id;
  spec.env = env_list(img.config.env, opts.env);
  spec.working_dir = opts.working_dir.empty() ? img.config.working_dir : opts.working_dir;
  spec.user = opts.user.empty() ? img.config.user : opts.user;
  timings["filesystem_setup_ms"] = static_cast<int64_t>(now_ms() - t_image);
  spec.net = make_net_config(opts);
  for (const auto& v : opts.volumes) {
    // Resolved now: a symlink swapped later cannot redirect the share.
    std::error_code ec;
    auto host = std::filesystem::canonical(v.host_path, ec);
    if (ec) throw Error(ErrorKind::InvalidArgument, "volume host path '" + v.host_path + "': " + ec.message());
    spec.volumes.push_back({host.string(), v.guest_path, v.read_only});
  }
  for (auto& e : secret_env(spec.net)) spec.env.push_back(std::move(e));  // placeholders only
  if (!spec.net.secrets.empty() && spec.net.enabled) {
    HomeCa ca = ensure_home_ca(layout_.root);
    spec.net.ca_cert = ca.cert;
    spec.net.ca_key = ca.key;
  }
  if (spec.net.enabled && !path_exists(spec.net.binary)) {
    throw Error(ErrorKind::Config, "boxlite-net not found at " + spec.net.binary + ": build the project first");
  }
  if (engine == EngineKind::Vm) {
    double t_disk = now_ms();
    engine::VmSpec& vm = spec.vm();
    vm.disk = spec.box_dir + "/disk.qcow2";
    rootfs::create_overlay(vm.disk_base, vm.disk, disk_size_bytes(opts, vm.disk_base));
    timings["guest_rootfs_ms"] = static_cast<int64_t>(now_ms() - t_disk);
  }
  std::vector<std::string> argv = opts.entrypoint.empty() ? img.config.entrypoint : opts.entrypoint;
  const auto& cmd = opts.cmd.empty() && opts.entrypoint.empty() ? img.config.cmd : opts.cmd;
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  if (argv.empty()) argv = {"sh"};
  spec.main_argv = argv;
  spec.main_tty = opts.main_tty;
  spec.main_stdin = opts.main_stdin;
  spec.ephemeral = opts.auto_remove;
  spec.main_rows = opts.main_rows;
  spec.main_cols = opts.main_cols;
  // A box removed when it stops need not survive a host crash: no fsync.
  engine::write_spec(spec);
  trace("core: spec written");
  // create_to_start: the prestarted shim boots the box while its row is written,
  // under the box's lock (taken first, so no other process starts the box meanwhile;
  // start() takes it over). A named box is recorded before its shim is handed it: a
  // name taken meanwhile (a race with another creator) fails the insert, and by then
  // the box's main command must not have run. A shim stopped mid-boot (the box not
  // recorded, or never started) leaves its cgroups: they go after it.
  std::optional<core::ShimLaunch> early = start_now ? early_shim_->take(opts.detach) : std::nullopt;
  FileLock early_lock = early ? FileLock::acquire_directory(spec.box_dir) : FileLock();
  auto after_stop = [id = spec.box_id, jail = engine == EngineKind::Jail] {
    if (jail) engine::jail::remove_cgroups(id);
  };
  struct DropHanded {  // the insert failed: the shim handed the box goes
    const std::string& dir;
    bool committed = false;
    ~DropHanded() {
      if (!committed) core::take_handed_shim(dir);
    }
  } drop_handed{spec.box_dir};
  if (early && name.empty()) {
    core::hand_and_keep(spec.box_dir, std::move(*early), std::move(early_lock), after_stop);
    early.reset();
  }

  store::BoxRecord rec;
  rec.id = spec.box_id;
  rec.name = name;
  rec.image = recorded;  // a registry image as its normalized reference
  rec.engine = engine;
  rec.state = BoxState::Configured;
  rec.created_at_ms = wall_clock_ms();
  rec.auto_remove = opts.auto_remove;
  rec.detach = opts.detach;
  rec.options_json = nlohmann::json{{"argv", argv}, {"cpus", spec.cpus}, {"memory_mib", spec.memory_mib}}.dump();
  timings["create_ms"] = static_cast<int64_t>(now_ms() - create_started_ms);
  rec.timings_json = timings.dump();
  store()->insert(rec);  // a taken name fails here too (a race with another creator)
  core::keep_record_copy(spec.box_dir, rec);
  drop_handed.committed = true;
  if (early) core::hand_and_keep(spec.box_dir, std::move(*early), std::move(early_lock), after_stop);
  guard.committed = true;
  return track(std::make_shared<LocalBox>(spec, rec, argv, store()));
}

// A box's directory is made before its row and, but for a jail box's destroy (which
// forgets the row while its shim exits, and records it again if the directory then
// cannot be removed), removed before it, so an auto_remove box without one is on its
// way out: removed by its shim (boxlite-shim: its owner exited without removing it),
// by a destroy that has yet to forget it, or before a host crash lost the unsynced
// removal of its row. A directory whose row went first is swept as half-made once a
// minute old (sweep_half_made_boxes).
bool LocalRuntime::forget_if_removed(const store::BoxRecord& r) {
  struct stat st;
  if (!r.auto_remove || ::lstat(layout_.box_dir(r.id).c_str(), &st) == 0 || errno != ENOENT) return false;
  try {
    store_->remove(r.id, /*durable=*/false);  // store_: the opener's sweep calls this too
  } catch (const Error& err) {
    warn("could not forget the removed box " + r.id + ": " + err.what());
  }
  return true;
}

bool LocalRuntime::reconcile(store::BoxRecord& r) {
  if (forget_if_removed(r)) return false;
  std::string dir = layout_.box_dir(r.id);
  if (r.state != BoxState::Running) return true;
  if (core::is_shim_of(r.shim_pid, dir)) return true;
  r.state = BoxState::Stopped;
  r.stop_reason = "the box's shim was killed";
  r.stopped_at_ms = wall_clock_ms();
  if (auto exit = engine::read_exit_record(dir); exit && exit->stopped_at_ms >= r.started_at_ms) {
    if (!exit->reason.empty()) r.stop_reason = exit->reason;
    r.stopped_at_ms = exit->stopped_at_ms;
    r.main_exit_code = exit->main_exit_code;
  }
  r.shim_pid = 0;
  // A killed shim could not retire the jail's cgroups; its processes died with it.
  if (r.engine == EngineKind::Jail) engine::jail::remove_cgroups(r.id);
  try {
    store()->update(r);
  } catch (const Error&) {
    // Removed meanwhile.
  }
  return true;
}

std::shared_ptr<LocalBox> LocalRuntime::box_from_record(const store::BoxRecord& r) {
  std::string dir = layout_.box_dir(r.id);
  engine::ShimSpec spec;
  try {
    spec = engine::read_spec(dir);
  } catch (const Error& e) {
    // Removed since its row was read (another process's `rm`): gone, not damaged.
    if (!path_exists(dir) && !store()->find(r.id)) throw Error(ErrorKind::NotFound, "No such box: " + r.id);
    throw Error(ErrorKind::Storage, "box " + r.id + ": unreadable " + dir + "/shim.json: " + e.what() +
                                        " (remove it with `boxlite rm -f " + r.id + "`)");
  }
  std::vector<std::string> argv;
  try {
    argv = nlohmann::json::parse(r.options_json).value("argv", std::vector<std::string>{"sh"});
  } catch (const std::exception&) {
    argv = {"sh"};
  }
  if (r.state == BoxState::Running) return track(LocalBox::attach(std::move(spec), r, store()));
  return track(std::make_shared<LocalBox>(std::move(spec), r, argv, store()));
}

std::pair<std::shared_ptr<LocalBox>, bool> LocalRuntime::get_or_create(const BoxOptions& opts,
                                                                       const std::string& name) {
  if (name.empty()) throw Error(ErrorKind::InvalidArgument, "get_or_create needs a name");
  // By that name exactly: never another box whose ID happens to start with it.
  if (auto box = box_of(store()->find_exact(name))) return {box, false};
  try {
    return {create(opts, name), true};
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::AlreadyExists) throw;
    if (auto box = box_of(store()->find_exact(name))) return {box, false};  // another process won the race
    throw;
  }
}

std::shared_ptr<LocalBox> LocalRuntime::get(const std::string& id_or_name) { return box_of(store()->find(id_or_name)); }

std::shared_ptr<LocalBox> LocalRuntime::box_of(std::optional<store::BoxRecord> r) {
  if (!r || !reconcile(*r)) return nullptr;
  try {
    return box_from_record(*r);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Stopped) throw;
    // Its shim stopped answering between the check and the connect.
    r->state = BoxState::Running;
    if (!reconcile(*r)) return nullptr;
    return box_from_record(*r);
  }
}

static BoxInfo info_of(const store::BoxRecord& r) {
  BoxInfo i;
  i.id = r.id;
  i.name = r.name;
  i.image = r.image;
  i.engine = r.engine;
  i.status = r.state;
  i.stop_reason = r.stop_reason;
  i.created_at_ms = r.created_at_ms;
  i.started_at_ms = r.started_at_ms;
  i.stopped_at_ms = r.stopped_at_ms;
  i.shim_pid = r.shim_pid;
  i.auto_remove = r.auto_remove;
  i.detach = r.detach;
  try {
    auto j = nlohmann::json::parse(r.options_json);
    i.cpus = j.value("cpus", 1);
    i.memory_mib = j.value("memory_mib", 1024);
  } catch (const std::exception&) {
  }
  return i;
}

Error LocalRuntime::no_such_box(const std::string& id_or_name) {
  int matches = 0;
  for (const auto& r : store()->list()) matches += r.id.starts_with(id_or_name) ? 1 : 0;
  if (!id_or_name.empty() && matches > 1) {
    return Error(ErrorKind::InvalidArgument, "box ID prefix '" + id_or_name +
                                                 "' is ambiguous: " + std::to_string(matches) +
                                                 " boxes' IDs start with it; give more of the ID, or the box's name");
  }
  return Error(ErrorKind::NotFound, "No such box: " + id_or_name);
}

BoxInfo LocalRuntime::get_info(const std::string& id_or_name) {
  auto r = store()->find(id_or_name);
  if (!r || !reconcile(*r)) throw no_such_box(id_or_name);
  return info_of(*r);
}

std::vector<BoxInfo> LocalRuntime::list_info() {
  std::vector<BoxInfo> out;
  for (auto& r : store()->list()) {
    if (reconcile(r)) out.push_back(info_of(r));
  }
  return out;
}

void LocalRuntime::remove(const std::string& id_or_name, bool force) {
  auto r = store()->find(id_or_name);
  if (!r || !reconcile(*r)) throw no_such_box(id_or_name);
  if (r->state == BoxState::Running && !force) {
    throw Error(ErrorKind::InvalidState, "box " + r->id + " is running: stop it first, or remove it with force");
  }
  release_clones(r->id, force);
  try {
    auto box = box_from_record(*r);
    box->destroy();
    return;
  } catch (const Error& e) {
    // Removed meanwhile by another process or handle (its row went first): what was
    // asked is done.
    if (e.kind() == ErrorKind::NotFound && !store()->find(r->id)) return;
    // A half-made or unreadable box: remove what there is.
  }
  if (core::is_shim_of(r->shim_pid, layout_.box_dir(r->id))) ::kill(r->shim_pid, SIGKILL);
  if (r->engine == EngineKind::Jail) engine::jail::remove_cgroups(r->id);
  remove_tree(layout_.box_dir(r->id));
  store()->remove(r->id, /*durable=*/!r->auto_remove);
}

std::shared_ptr<LocalBox> LocalRuntime::attach(const std::string& id) {
  if (auto r = store()->find(id); r && reconcile(*r)) {
    if (r->state != BoxState::Running) throw Error(ErrorKind::Stopped, "box " + r->id + " is not running");
    return box_from_record(*r);
  }
  throw no_such_box(id);
}

}  // namespace boxlite
