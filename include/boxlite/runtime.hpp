// The runtime: owns a home directory (BOXLITE_HOME, ~/.boxlite) and creates,
// finds and removes its boxes, and pulls and keeps images. Front ends (the CLI,
// the C API, the server, the bindings) are thin maps over this header and the
// ones it includes; nothing else of the tree is theirs to use.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "boxlite/box.hpp"
#include "boxlite/engine_kind.hpp"
#include "boxlite/error.hpp"
#include "boxlite/images.hpp"
#include "boxlite/lifecycle.hpp"
#include "boxlite/options.hpp"

namespace boxlite {

class LocalRuntime;

// What this host can run, and why not where it cannot (`boxlite info`).
struct EngineStatus {
  std::string name;
  bool usable = false;
  std::string reason;  // why not usable, or a note
};
struct HostInfo {
  std::string version, home;
  EngineKind default_engine = kDefaultEngine;
  std::vector<EngineStatus> engines;       // vm, jail
  std::vector<EngineStatus> accelerators;  // kvm, tcg
};

// What list_info()/get_info() report, never booting a box.
struct BoxInfo {
  std::string id, name, image;
  EngineKind engine = kDefaultEngine;
  BoxState status = BoxState::Configured;
  std::string stop_reason;  // why it last stopped
  int64_t created_at_ms = 0, started_at_ms = 0, stopped_at_ms = 0;
  int shim_pid = 0;
  int cpus = 1, memory_mib = 1024;
  bool auto_remove = true, detach = false;
};

class Runtime {
 public:
  explicit Runtime(RuntimeOptions opts = {});
  ~Runtime();
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;
  // The process-wide runtime of $BOXLITE_HOME (~/.boxlite), made on first use. It
  // holds the home's lock until the process exits: a second process's default
  // runtime on that home gets InvalidState "Another BoxliteRuntime is already
  // using directory <home>". Runtimes made with RuntimeOptions take no lock and
  // are what several processes sharing a home use.
  static std::shared_ptr<Runtime> default_runtime();
  const std::string &home() const;

  // Prepares a box (image, root disk, engine settings) without booting it.
  std::shared_ptr<Box> create(const BoxOptions &opts, const std::string &name = "");
  // As create(), for a caller that starts the box at once (the CLI's `run`): the
  // runtime's early shim (RuntimeOptions::early_shim) is handed the box as soon as
  // its spec is written, so that the shim's start overlaps the box's record; the
  // box's start() then takes it. A box dropped unstarted has that shim stopped.
  std::shared_ptr<Box> create_to_start(const BoxOptions &opts, const std::string &name = "");
  // A running box of this home (by id, name or unique id prefix) that another
  // process (or this one) created: connects to its shim. The Box does not own it.
  // Throws NotFound "No such box: <id>" when the home has no such box, Stopped when
  // it exists but is not running.
  std::shared_ptr<Box> attach(const std::string &id);
  // The box named `name` if there is one (created=false), else a new one
  // (created=true). Safe against another process creating the same name meanwhile.
  std::pair<std::shared_ptr<Box>, bool> get_or_create(const BoxOptions &opts, const std::string &name);
  // A box by id, name or unique id prefix: nullptr when there is none. A running
  // box is reached through its shim; a configured or stopped one can be started.
  std::shared_ptr<Box> get(const std::string &id_or_name);
  // NotFound "No such box", or InvalidArgument when `id_or_name` is a prefix of
  // several boxes' IDs: for callers that found none.
  Error no_such_box(const std::string &id_or_name);
  // Never boots anything. Throws NotFound "No such box: <x>".
  BoxInfo get_info(const std::string &id_or_name);
  // Newest first.
  std::vector<BoxInfo> list_info();
  // A running box needs force (it is stopped first); throws NotFound / InvalidState.
  void remove(const std::string &id_or_name, bool force = false);
  // What remove() checks before removing box `id` through a handle the caller
  // holds (the C API): clone dependencies (force: released first).
  void prepare_remove(const std::string &id, bool force);
  // Gracefully stops every box this runtime handed out, in parallel: each guest
  // gets `timeout_secs` to shut down (nullopt: 10 s; -1: as long as it takes)
  // before its engine is killed. Afterwards create fails with Stopped: "Cannot
  // create box: runtime has been shut down".
  void shutdown(std::optional<double> timeout_secs = std::nullopt);

  // Storage (docs/storage.md), on running or stopped boxes (a running one is
  // quiesced and resumed). clone_box: an independent box with the source's files,
  // created stopped (the first exec starts it). export_box: writes
  // <dest_dir>/<name or id>.boxlite and returns its path. import_box: a new box
  // from one, of the engine it was exported from. `detach`: the new box, once
  // started, outlives the process that started it.
  std::shared_ptr<Box> clone_box(Box &source, const std::string &name = "", bool detach = false);
  std::string export_box(Box &box, const std::string &dest_dir);
  std::shared_ptr<Box> import_box(const std::string &path, const std::string &name = "", bool detach = false);

  HostInfo host_info();
  RuntimeMetrics metrics();

  // Images. pull_image always asks the registry (tags move) and downloads only the
  // blobs the home's store lacks; create() of a registry reference uses the cached
  // image when there is one, else pulls it the same way.
  PullResult pull_image(const std::string &reference);
  std::vector<ImageInfo> list_images();
  // By reference (as given to pull/create, or normalized) or by id (a manifest
  // digest or a unique prefix of its hex, at least 4 digits). An image a box uses
  // is never removed: InvalidState naming the box. NotFound for no such image.
  // Returns the removed references.
  std::vector<std::string> remove_image(const std::string &reference_or_id);
  // Removes blobs and ext4 bases no image needs; with all=true first removes every
  // image no box uses. Returns the bytes freed.
  uint64_t prune_images(bool all = false);
  // Progress of pulls (create, pull_image) from this runtime; called from download
  // threads.
  void set_pull_observer(std::function<void(const std::string &, const std::vector<LayerProgress> &)> on_manifest,
                         std::function<void(const LayerProgress &)> on_progress);
  const std::vector<ImageRegistry> &image_registries() const;

  // Warnings (such as falling back to TCG) go here; default: stderr.
  void set_warning_sink(std::function<void(const std::string &)> sink);

 private:
  std::shared_ptr<LocalRuntime> impl_;
};

// For a short-lived process that links SQLite statically (the CLI): the first
// connection to a home's database resets its WAL index by zeroing it rather than
// truncating it (truncation waits for the device on hosts mounted `discard`).
// Call before the first Runtime; once is enough.
void zero_wal_index_instead_of_truncating();

}  // namespace boxlite
