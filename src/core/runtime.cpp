#include "core/runtime.hpp"

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
#include "core/plan.hpp"
#include "core/record_copy.hpp"
#include "core/shim_launch.hpp"
#include "core/spare_dirs.hpp"
#include "core/volumes.hpp"
#include "engine/engine.hpp"
#include "image/oci_layout.hpp"

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

}  // namespace

std::string LocalRuntime::make_box_id() { return new_box_id(); }

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
  return core::choose_engine(std::nullopt, env_or("BOXLITE_ENGINE", ""), config_engine_);
}

// The box's image, opened: a layout (a path, oci:..., or rootfs_path), or a registry
// reference, pulled if missing. `recorded`: what the box's row names it by.
image::LocalImage LocalRuntime::open_box_image(const BoxOptions& opts, std::string& recorded) {
  std::string source = opts.rootfs_path.empty() ? opts.image : opts.rootfs_path;
  struct stat st;
  bool is_layout = source.rfind("oci:", 0) == 0 || ::stat(source.c_str(), &st) == 0 || !opts.rootfs_path.empty() ||
                   source[0] == '/' || source[0] == '.';
  recorded = source;
  image::LocalImage img =
      image::open_oci_layout(is_layout ? image::parse_layout_ref(source) : resolve_registry_image(source, recorded));
  if (img.layers.empty()) {
    throw Error(ErrorKind::Image, "image " + recorded + " has no layers: there is no file in it to run");
  }
  return img;
}

std::string LocalRuntime::default_accel() const {
  return env_or("BOXLITE_ACCEL", config_accel_.empty() ? "auto" : config_accel_);
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

// Creating a box reads validate -> plan -> act: the options are checked, planned into
// a spec with no I/O (core/plan.hpp), and then the machine prepares what the plan
// needs (prepare.cpp), the box's directory is made and its row recorded.
std::shared_ptr<LocalBox> LocalRuntime::create_box(const BoxOptions& opts, const std::string& name, bool start_now) {
  validate_box_options(opts);
  validate_name(name);
  if (!name.empty() && store()->find_exact(name))
    throw Error(ErrorKind::AlreadyExists, "box name '" + name + "' is already in use");
  core::check_security(opts.security);
  EngineKind kind = core::choose_engine(opts.engine, env_or("BOXLITE_ENGINE", ""), config_engine_);
  engine::make_engine(kind, "")->prepare_host();  // overlaps what follows

  double create_started_ms = now_ms();
  std::string recorded;
  image::LocalImage img = open_box_image(opts, recorded);
  nlohmann::json timings;
  trace("core: image opened");
  std::string id = new_box_id();
  core::BoxPlan plan = core::plan_box(opts, {kind, id, layout_.box_dir(id), img.config});
  engine::ShimSpec& spec = plan.spec;
  std::shared_ptr<const engine::Engine> box_engine = engine::make_engine(spec);

  if (std::string agent = core::libexec_dir() + "/boxlite-guest"; !path_exists(agent)) {
    throw Error(ErrorKind::Config, "guest agent not found at " + agent + ": build the project first");
  }
  prepare_engine_part(spec, opts, img, plan.disk_bytes);
  double t_image = now_ms();
  trace("core: image prepared");
  timings["image_prepare_ms"] = static_cast<int64_t>(t_image - create_started_ms);
  DirGuard guard{spec.box_dir};
  bool spare = box_engine->reuses_box_dirs() && core::take_spare_box_dir(layout_.spare_box_dirs(), spec.box_dir);
  if (!spare && ::mkdir(spec.box_dir.c_str(), 0700) != 0) {
    throw_errno(ErrorKind::Storage, "create box directory " + spec.box_dir);
  }
  timings["filesystem_setup_ms"] = static_cast<int64_t>(now_ms() - t_image);
  for (auto& v : spec.volumes) {
    // Resolved now: a symlink swapped later cannot redirect the share.
    std::error_code ec;
    auto host = std::filesystem::canonical(v.host_path, ec);
    if (ec) throw Error(ErrorKind::InvalidArgument, "volume host path '" + v.host_path + "': " + ec.message());
    v.host_path = host.string();
  }
  if (plan.needs_secrets_ca) {
    HomeCa ca = ensure_home_ca(layout_.root);
    spec.net.ca_cert = ca.cert;
    spec.net.ca_key = ca.key;
  }
  if (spec.net.enabled && !path_exists(spec.net.binary)) {
    throw Error(ErrorKind::Config, "boxlite-net not found at " + spec.net.binary + ": build the project first");
  }
  double t_disk = now_ms();
  if (make_writable_layer(spec, opts)) timings["guest_rootfs_ms"] = static_cast<int64_t>(now_ms() - t_disk);
  const std::vector<std::string>& argv = spec.main_argv;
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
  auto after_stop = [box_engine] { box_engine->release(); };
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
  rec.engine = kind;
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
  engine::make_engine(r->engine, r->id)->release();
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
