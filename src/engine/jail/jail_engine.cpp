#include "engine/jail/jail_engine.hpp"

#include "common/error.hpp"

namespace boxlite::engine::jail {

namespace {

class JailEngine final : public Engine {
 public:
  JailEngine(const ShimSpec& spec, Zygote zygote) : spec_(spec), zygote_(std::move(zygote)) {}
  EngineKind kind() const override { return EngineKind::Jail; }
  std::string_view process_name() const override { return "the box's init"; }
  // No kernel of its own; and its box directory may be gone when a failure is read (--rm).
  bool has_console() const override { return false; }
  NetLink net_link() const override { return NetLink::Tap; }
  bool pipelined_handshake() const override { return true; }

  Launched start(double, const std::function<void(int)>& box_netns_ready) override {
    Jail j = jail::start(spec_, zygote_, box_netns_ready);
    Launched l;
    l.process = std::move(j.init);
    l.channel = std::move(j.channel);
    l.warnings = std::move(j.warnings);
    l.etc_files_bound = j.etc_files_bound;
    return l;
  }

  void configure(proto::BoxConfig& cfg) const override {
    // How many CPUs each command may run on, as a VM's vCPUs say; the quota is the cgroup's.
    cfg.set_cpus(static_cast<uint32_t>(spec_.cpus));
    // The root is set up by the shim, its hostname set before capabilities drop, its
    // eth0 configured by the shim, its volumes bound by the shim, its limits set by
    // its init: nothing of those is the agent's to do.
  }

  engine::Usage usage(pid_t process) const override {
    if (auto u = jail::usage(spec_.box_id)) return {u->cpu_ns, u->memory_bytes};
    return {process_cpu_ns(process), 0};
  }

  void release() const noexcept override {
    try {
      remove_cgroups(spec_.box_id);
    } catch (...) {
      // Best effort: what a removal leaves is tried again by the next one.
    }
  }
  void freeze() const override { jail::freeze(spec_.box_id); }
  void thaw() const override { jail::thaw(spec_.box_id); }
  void prepare_host() const override { prime_cgroup_attach(); }
  void prepare_shim_process() const override { enter_private_mount_namespace(); }
  std::string mounted_root() const override { return root_mountpoint(spec_); }
  bool takes_warm_disk() const override { return true; }
  bool reuses_box_dirs() const override { return true; }

 private:
  ShimSpec spec_;
  Zygote zygote_;
};

}  // namespace

std::unique_ptr<Engine> make_jail_engine(const ShimSpec& spec, Zygote zygote) {
  return std::make_unique<JailEngine>(spec, std::move(zygote));
}

}  // namespace boxlite::engine::jail
