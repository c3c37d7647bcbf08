// LocalRuntime: the runtime of a home on this host, behind the public Runtime
// (boxlite/runtime.hpp documents what each call does). It owns the home directory,
// its store and image store, and creates, finds and removes boxes (LocalBox).
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "boxlite/options.hpp"
#include "boxlite/runtime.hpp"
#include "common/error.hpp"
#include "common/file_lock.hpp"
#include "core/box.hpp"
#include "core/paths.hpp"
#include "engine/spec.hpp"
#include "image/oci_layout.hpp"
#include "registry/pull.hpp"
#include "store/store.hpp"

namespace boxlite {

class LocalRuntime {
 public:
  explicit LocalRuntime(RuntimeOptions opts = {});
  ~LocalRuntime();
  LocalRuntime(const LocalRuntime&) = delete;
  LocalRuntime& operator=(const LocalRuntime&) = delete;
  const std::string& home() const { return layout_.root; }

  // Prepares a box (image, root disk, engine settings) without booting it.
  std::shared_ptr<LocalBox> create(const BoxOptions& opts, const std::string& name = "");
  // As create(), for a caller that starts the box at once (the CLI's `run`): the
  // runtime's early shim (RuntimeOptions::early_shim) is handed the box as soon as
  // its spec is written, under the box's lock, so that the shim's mounts and clone
  // overlap the box's record and the start's checks (~0.3 ms); the box's start()
  // then takes it. A box dropped unstarted has that shim stopped.
  std::shared_ptr<LocalBox> create_to_start(const BoxOptions& opts, const std::string& name = "");

  // A running box of this home (by id, name or unique id prefix) that another
  // process (or this one) created: connects to its shim.sock. The Box does not own
  // it (see Box::attach). Throws NotFound "No such box: <id>" when the home has no
  // such box, Stopped when it exists but is not running.
  std::shared_ptr<LocalBox> attach(const std::string& id);

  // The box named `name` if there is one (created=false), else a new one
  // (created=true). Safe against another process creating the same name meanwhile.
  std::pair<std::shared_ptr<LocalBox>, bool> get_or_create(const BoxOptions& opts, const std::string& name);

  // A box by id, name or unique id prefix: nullptr when there is none. A running
  // box is reached through its shim; a created or stopped one can be started.
  std::shared_ptr<LocalBox> get(const std::string& id_or_name);
  // NotFound "No such box", or InvalidArgument when `id_or_name` is a prefix of
  // several boxes' IDs (the store finds none for it): for callers that found none.
  Error no_such_box(const std::string& id_or_name);
  // Never boots anything. Throws NotFound "No such box: <x>".
  BoxInfo get_info(const std::string& id_or_name);
  // Newest first.
  std::vector<BoxInfo> list_info();
  // A running box needs force (it is stopped first); throws NotFound / InvalidState.
  void remove(const std::string& id_or_name, bool force = false);

  // Gracefully stops every box this runtime handed out (create, get), in parallel:
  // each guest gets `timeout_secs` to shut down (nullopt: 10 s; -1: as long as it
  // takes) before its engine is killed. Afterwards create fails with Stopped:
  // "Cannot create box: runtime has been shut down".
  void shutdown(std::optional<double> timeout_secs = std::nullopt);

  // Storage (storage.cpp, docs/storage.md), on running or stopped boxes (a
  // running one is quiesced and resumed). clone_box: an independent box over a
  // frozen copy-on-write layer of `source`'s disk (jail: a copy of its upper
  // layer), created stopped (the first exec starts it); a vm source cannot be
  // removed without force while it has clones. export_box: writes
  // <dest_dir>/<name or id>.boxlite (a tar of a manifest and the whole disk
  // flattened, or the jail's upper layer) and returns its path. import_box: a new
  // box from one, of the engine it was exported from. `detach`: the new box, once
  // started, outlives the process that started it (BoxOptions::detach; the CLI's).
  std::shared_ptr<LocalBox> clone_box(LocalBox& source, const std::string& name = "", bool detach = false);
  // What Runtime::remove checks before removing box `id` through a handle the
  // caller holds (the C API): clone dependencies (force: released first).
  void prepare_remove(const std::string& id, bool force) { release_clones(id, force); }
  std::string export_box(LocalBox& box, const std::string& dest_dir);
  std::shared_ptr<LocalBox> import_box(const std::string& path, const std::string& name = "", bool detach = false);

  HostInfo host_info();
  RuntimeMetrics metrics();

  // Images (images.cpp). pull_image always asks the registry (tags move) and
  // downloads only the blobs the home's store lacks; create() of a registry
  // reference uses the cached image when there is one, else pulls it the same way.
  PullResult pull_image(const std::string& reference);
  std::vector<ImageInfo> list_images();
  // By reference (as given to pull/create, or normalized) or by id (a manifest
  // digest or a unique prefix of its hex, at least 4 digits). An image a box uses
  // is never removed: InvalidState naming the box. NotFound for no such image.
  // Returns the removed references.
  std::vector<std::string> remove_image(const std::string& reference_or_id);
  // Removes blobs and ext4 bases no image needs; with all=true first removes every
  // image no box uses. Returns the bytes freed.
  uint64_t prune_images(bool all = false);
  // Progress of pulls (create, pull_image) from this runtime; called from
  // download threads.
  void set_pull_observer(
      std::function<void(const std::string&, const std::vector<registry::LayerProgress>&)> on_manifest,
      std::function<void(const registry::LayerProgress&)> on_progress) {
    pull_on_manifest_ = std::move(on_manifest);
    pull_progress_ = std::move(on_progress);
  }
  const std::vector<ImageRegistry>& image_registries() const { return registries_; }

  // Warnings (such as falling back to TCG) go here; default: stderr.
  void set_warning_sink(std::function<void(const std::string&)> sink) { warn_ = std::move(sink); }

 private:
  // Preparation (prepare.cpp): what this machine gives a planned box (core/plan.hpp).
  // Its engine's part: a VM's machine and base disk, a jail's image layers and the
  // disk of `disk_bytes` for what it writes. Before its directory exists.
  void prepare_engine_part(engine::ShimSpec& spec, const BoxOptions& opts, const image::LocalImage& img,
                           uint64_t disk_bytes);
  // In the box's directory, once made: a VM's qcow2 overlay (true). A jail's disk is
  // made at its first start (false).
  bool make_writable_layer(engine::ShimSpec& spec, const BoxOptions& opts);
  image::LocalImage open_box_image(const BoxOptions& opts, std::string& recorded);
  std::string resolve_accel(const std::string& requested);
  void prepare_vm(engine::ShimSpec& spec, const BoxOptions& opts, const image::LocalImage& img);
  void prepare_jail(engine::ShimSpec& spec, const image::LocalImage& img);
  // The jail box's disk of `bytes` (engine/jail/disk.hpp): sets the spec's jail
  // disk fields, the home's template of that size made if missing. None (with a
  // warning) on a host that gives no loop devices: the box's writable layer is then
  // a directory on the host's file system.
  void prepare_jail_disk(engine::ShimSpec& spec, uint64_t bytes);
  void prepare_vm_machine(engine::ShimSpec& spec, const BoxOptions& opts);
  static std::string make_box_id();
  // Refuses (InvalidState) removing a box other boxes are clones of, unless
  // force: then each clone is made independent first (storage.cpp).
  void release_clones(const std::string& id, bool force);
  std::shared_ptr<LocalBox> clone_jail(LocalBox& source, const std::string& name, bool detach);
  engine::ShimSpec clone_spec(const LocalBox& source);
  std::string export_jail(LocalBox& box, const std::string& dest_dir);
  std::string export_jail_disk(LocalBox& box, const std::string& dest, const std::string& base);
  std::string write_export(LocalBox& box, const std::string& dest, const std::string& data_name,
                           const std::string& data_file);
  std::shared_ptr<LocalBox> import_jail(engine::ShimSpec spec, const nlohmann::json& manifest, const std::string& name,
                                        const std::string& upper_tar, bool detach);
  void warn(const std::string& msg) const;

  void load_home_config(bool registries_from_options);
  // Reconciliation (reconcile.cpp).
  void sweep_half_made_boxes();
  void record_again(const std::string& box_dir);
  // BOXLITE_ENGINE, else the home config's, else vm (an unknown name: InvalidArgument).
  EngineKind default_engine() const;
  std::string default_accel() const;

  // A "running" record whose shim is gone becomes "stopped", with the reason. An
  // auto_remove box whose directory is gone was removed by its shim (its owner
  // died): its row is forgotten and this returns false.
  bool reconcile(store::BoxRecord& r);
  // The row of an auto_remove box whose directory is gone: forgotten (true).
  bool forget_if_removed(const store::BoxRecord& r);
  std::shared_ptr<LocalBox> box_from_record(const store::BoxRecord& r);

  core::HomeLayout layout_;
  FileLock home_lock_;
  // The store, open, once its opener is done (RuntimeOptions::open_store_in_background);
  // throws what opening it threw. Everything but the opener itself goes through it.
  const std::shared_ptr<store::Store>& store();
  void open_store();         // and sweeps half-made boxes
  void join_store_opener();  // once; then gives the opener's warnings
  std::shared_ptr<store::Store> store_;
  std::thread store_opener_;
  std::once_flag store_opener_joined_;
  std::exception_ptr store_error_;
  std::vector<std::string> opener_warnings_;  // the opener's, given once it is joined
  std::mutex boxes_mu_;
  std::vector<std::weak_ptr<LocalBox>> handed_out_;
  std::atomic<bool> shut_down_{false};
  std::shared_ptr<LocalBox> track(std::shared_ptr<LocalBox> box);
  std::shared_ptr<LocalBox> create_counted(const BoxOptions& opts, const std::string& name, bool start_now);
  std::shared_ptr<LocalBox> create_box(const BoxOptions& opts, const std::string& name, bool start_now);
  std::shared_ptr<core::RuntimeCounters> counters_ = std::make_shared<core::RuntimeCounters>();
  std::shared_ptr<core::EarlyShimSlot> early_shim_;  // RuntimeOptions::early_shim
  std::optional<EngineKind> config_engine_;          // from <home>/config.json
  std::string config_accel_;
  std::vector<ImageRegistry> registries_;  // options, else <home>/config.json
  std::function<void(const std::string&, const std::vector<registry::LayerProgress>&)> pull_on_manifest_;
  std::function<void(const registry::LayerProgress&)> pull_progress_;
  // Pulls `reference` into the store at images_dir in boxlite-pull (pull_client.hpp).
  registry::PullResult pull_into(const std::string& images_dir, const std::string& reference) const;
  uint64_t prune_store(bool all, const std::set<std::string>* only);
  std::optional<std::vector<std::string>> layer_build_locks(const std::string& tmp_name) const;
  std::vector<std::string> locks_named(const std::string& prefix, const std::string& suffix) const;
  // The box of a record found in the store (reconciled with its shim), or null.
  std::shared_ptr<LocalBox> box_of(std::optional<store::BoxRecord> r);
  uint64_t remove_abandoned_build(const std::string& path, const std::vector<std::string>& locks);
  // A registry reference -> the store's layout ref, pulling when not cached.
  image::LayoutRef resolve_registry_image(const std::string& reference, std::string& normalized);
  std::function<void(const std::string&)> warn_;
};

}  // namespace boxlite
