#include "core/box.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <limits>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/file_lock.hpp"
#include "common/io.hpp"
#include "common/thread.hpp"
#include "common/trace.hpp"
#include "core/client.hpp"
#include "core/network.hpp"
#include "core/paths.hpp"
#include "core/record_copy.hpp"
#include "core/shim_launch.hpp"
#include "core/spare_dirs.hpp"
#include "engine/engine.hpp"
#include "protocol/main_log.hpp"

namespace boxlite {

LocalBox::LocalBox(engine::ShimSpec spec, std::string name, std::vector<std::string> default_argv, bool auto_remove)
    : spec_(std::move(spec)),
      engine_impl_(engine::make_engine(spec_)),
      name_(std::move(name)),
      default_argv_(std::move(default_argv)),
      auto_remove_(auto_remove) {}

LocalBox::LocalBox(engine::ShimSpec spec, store::BoxRecord record, std::vector<std::string> default_argv,
                   std::shared_ptr<store::Store> store)
    : spec_(std::move(spec)),
      engine_impl_(engine::make_engine(spec_)),
      name_(record.name),
      default_argv_(std::move(default_argv)),
      auto_remove_(record.auto_remove),
      record_(std::move(record)),
      store_(std::move(store)) {}

std::shared_ptr<LocalBox> LocalBox::attach(engine::ShimSpec spec, store::BoxRecord record,
                                           std::shared_ptr<store::Store> store) {
  auto box = attach_to_shim(std::move(spec), record.shim_pid);
  box->name_ = record.name;
  box->auto_remove_ = record.auto_remove;
  box->record_ = std::move(record);
  box->store_ = std::move(store);
  return box;
}

void LocalBox::persist() {
  if (!store_) return;
  try {
    store_->update(record_);
  } catch (const Error& e) {
    std::fprintf(stderr, "boxlite: warning: box %s: could not record its state: %s\n", id().c_str(), e.what());
  }
}

void LocalBox::move_to_locked(BoxState to, std::string_view op) {
  check_transition(record_.state, to, id(), op);
  record_.state = to;
}

// The shim leaves its exit record saying why the box stopped.
void LocalBox::record_stopped() {
  move_to_locked(BoxState::Stopped, "stop");
  record_.shim_pid = 0;
  record_.stopped_at_ms = wall_clock_ms();
  record_.stop_reason = "stopped";
  record_.main_exit_code.reset();
  if (auto exit = engine::read_exit_record(spec_.box_dir)) {
    record_.stop_reason = exit->reason;
    record_.main_exit_code = exit->main_exit_code;
  }
  persist();
}

std::shared_ptr<LocalBox> LocalBox::attach(engine::ShimSpec spec) {
  return attach_to_shim(std::move(spec), /*shim_pid=*/0);
}

std::shared_ptr<LocalBox> LocalBox::attach_to_shim(engine::ShimSpec spec, pid_t shim_pid) {
  std::string id = spec.box_id;
  auto box = std::make_shared<LocalBox>(std::move(spec), "", std::vector<std::string>{}, /*auto_remove=*/false);
  box->attached_ = true;
  try {
    box->client_ = core::ShimClient::connect(engine::shim_socket_path(box->dir()), id);
  } catch (const Error& e) {
    if (!core::is_shim_of(shim_pid, box->dir())) {
      throw Error(ErrorKind::Stopped, "box " + id + " is not running: " + e.what());
    }
    // Its shim is alive but did not answer: the box is running as far as anyone can
    // tell, and stop() or destroy() must still end it (by killing its shim); what
    // needs the connection says why it cannot have it.
    box->unanswered_ = e.what();
  }
  box->record_.state = BoxState::Running;
  return box;
}

LocalBox::~LocalBox() {
  // A shim handed the box at its creation that it never started: stopped.
  core::take_handed_shim(spec_.box_dir);
  // Not ours to stop (another process's, or detached to outlive us), or gone.
  if (attached_ || record_.detach || removed_) return;
  // Only what this handle started: a shim another process started since this
  // handle read the box's row is that process's (reach_current_shim_locked is for
  // an explicit stop or removal).
  try {
    if (auto_remove_) {
      try {
        destroy(/*reach_current_shim=*/false);
      } catch (const Error&) {
        stop_own();  // not removable (clones depend on it): at least stopped
      }
    } else {
      stop_own();
    }
  } catch (...) {
    // A destructor cannot report; the shim dies with its lifeline regardless.
  }
}

BoxState LocalBox::state() {
  std::lock_guard lk(mu_);
  refresh_locked();
  return record_.state;
}

void LocalBox::refresh_locked() {
  if (record_.state != BoxState::Running || !client_ || !client_->closed()) return;
  // The shim writes exit.json and closes its clients just before it exits.
  if (shim_.valid()) {
    if (!shim_.wait_for(5000)) shim_.kill_now();
  } else if (record_.shim_pid > 0) {
    wait_pid_exit(record_.shim_pid, 5000);
  }
  client_->close();
  client_.reset();
  lifeline_.reset();
  record_stopped();
}

std::vector<OutputChunk> LocalBox::main_log(size_t tail_lines) {
  std::vector<OutputChunk> out;
  for (auto& f : protocol::tail_lines(protocol::read_main_log(spec_.box_dir), tail_lines)) {
    out.push_back(OutputChunk{f.type == protocol::FrameType::Stdout ? StreamKind::Stdout : StreamKind::Stderr,
                              std::move(f.payload)});
  }
  return out;
}

void LocalBox::logs(size_t tail_lines, bool follow, const std::function<void(const OutputChunk&)>& sink) {
  if (!follow || state() != BoxState::Running) {
    for (const auto& c : main_log(tail_lines)) sink(c);
    return;
  }
  // Attaching replays the log, then goes live: cut the replay to the tail asked for.
  Execution e = attach();
  uint64_t history_left = e.history_bytes();
  std::vector<protocol::Frame> history;
  while (history_left > 0) {
    auto c = e.next_output();
    if (!c) break;
    history_left -= std::min<uint64_t>(history_left, c->data.size());
    auto type = c->stream == StreamKind::Stdout ? protocol::FrameType::Stdout : protocol::FrameType::Stderr;
    history.push_back(protocol::Frame{0, type, std::move(c->data)});
  }
  for (auto& h : protocol::tail_lines(std::move(history), tail_lines)) {
    sink(OutputChunk{h.type == protocol::FrameType::Stdout ? StreamKind::Stdout : StreamKind::Stderr,
                     std::move(h.payload)});
  }
  try {
    while (auto c = e.next_output()) sink(*c);
  } catch (const Error& err) {
    if (err.kind() != ErrorKind::Stopped) throw;  // the box stopping ends the stream
  }
}

std::optional<int> LocalBox::main_exit_code() {
  std::lock_guard lk(mu_);
  refresh_locked();
  if (record_.state != BoxState::Stopped) return std::nullopt;
  return record_.main_exit_code;
}

namespace {

std::string read_until_eof(int fd, double timeout_ms) {
  std::string out;
  double deadline = now_ms() + timeout_ms;
  for (;;) {
    int left = static_cast<int>(deadline - now_ms());
    if (left <= 0) throw Error(ErrorKind::Timeout, "timed out waiting for the box shim to report");
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buf[4096];
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return out;
    out.append(buf, static_cast<size_t>(r));
  }
}

}  // namespace

void LocalBox::record_timings(const engine::BootStages& stages, double start_ms) {
  nlohmann::json t = nlohmann::json::object();
  try {
    t = nlohmann::json::parse(record_.timings_json);
  } catch (const std::exception&) {
  }
  t["start_ms"] = static_cast<int64_t>(start_ms);
  t["box_spawn_ms"] = stages.box_spawn_ms;
  t["guest_boot_ms"] = stages.guest_boot_ms;
  t["container_init_ms"] = stages.container_init_ms;
  record_.timings_json = t.dump();
}

BoxMetrics LocalBox::metrics() {
  BoxMetrics m;
  std::shared_ptr<core::ShimClient> client;
  nlohmann::json t = nlohmann::json::object();
  {
    std::lock_guard lk(mu_);
    refresh_locked();
    if (record_.state == BoxState::Running) client = client_;
    try {
      t = nlohmann::json::parse(record_.timings_json);
    } catch (const std::exception&) {
    }
  }
  auto stage = [&](const char* key) -> std::optional<int64_t> {
    if (!t.contains(key) || !t[key].is_number_integer()) return std::nullopt;
    return t[key].get<int64_t>();
  };
  m.stage_filesystem_setup_ms = stage("filesystem_setup_ms");
  m.stage_image_prepare_ms = stage("image_prepare_ms");
  m.stage_guest_rootfs_ms = stage("guest_rootfs_ms");
  m.stage_box_spawn_ms = stage("box_spawn_ms");
  m.stage_container_init_ms = stage("container_init_ms");
  m.guest_boot_duration_ms = stage("guest_boot_ms").value_or(0);
  m.total_create_duration_ms = stage("create_ms").value_or(0) + stage("start_ms").value_or(0);
  if (!client) return m;
  try {
    proto::BoxStats s = client->stats();
    m.cpu_percent = s.cpu_percent();
    m.memory_bytes = s.memory_bytes();
    m.commands_executed_total = s.commands_executed();
    m.exec_errors_total = s.exec_errors();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Stopped) throw;  // it stopped meanwhile: timings only
    return m;
  }
  if (auto n = box_network_metrics(spec_.box_dir)) {
    m.network_bytes_sent = m.bytes_sent_total = n->bytes_sent;
    m.network_bytes_received = m.bytes_received_total = n->bytes_received;
    m.network_tcp_connections = n->tcp_connections;
    m.network_tcp_errors = n->tcp_errors;
  }
  return m;
}

FileLock LocalBox::lock_box() {
  // Serialises start/stop/remove of this box across processes (mu_ does it
  // within one). The kernel drops it if the holder dies. A shim handed the box
  // ahead of a start() that did not come holds it: it is stopped first.
  return core::lock_box_directory(spec_.box_dir);
}

bool LocalBox::invalidated() {
  std::lock_guard lk(mu_);
  return invalidated_;
}

void LocalBox::check_valid_locked() const {
  if (invalidated_)
    throw Error(ErrorKind::Stopped, "Handle invalidated after stop(). Use runtime.get() to get a new handle.");
}

void LocalBox::start() {
  trace("core: start");
  std::lock_guard lk(mu_);
  // Handed the box when it was created, under the lock held since: nobody else can
  // have started it, and its shim is booting it already.
  std::optional<core::HandedShim> handed = core::take_handed_shim(spec_.box_dir);
  FileLock box_lock = handed ? handed->take_lock() : lock_box();
  trace("core: start locked");
  invalidated_ = false;  // an explicit start re-validates the handle (docs/storage.md)
  if (!handed) {
    if (record_.state == BoxState::Running) {
      if (client_ && !client_->closed()) return;
      stop_locked();
    }
    if (join_started_elsewhere_locked()) return;
    // Booting it here would make a second owner of another process's box.
    if (attached_) throw Error(ErrorKind::Stopped, "box " + id() + " is not running");
    // A shim still alive with no record of it running (its starter was killed
    // before it recorded it) goes first: a second one would mount the same layers.
    if (adopt_unrecorded_shim_locked()) {
      stop_locked();
      attached_ = false;
    }
  }
  trace("core: start checks");
  // (A handed shim's create primed it already.)
  if (!handed) engine_impl_->prepare_host();
  // The CLI's `run` started one already (core/shim_launch.hpp); else start it now.
  std::optional<core::ShimLaunch> launch = handed        ? std::optional(handed->take_launch())
                                           : early_shim_ ? early_shim_->take(record_.detach)
                                                         : std::nullopt;
  double spawn_started_ms = handed ? handed->handed_at_ms() : now_ms();
  if (!launch) launch.emplace(core::ShimLaunch::spawn(record_.detach));
  if (!handed) {
    engine::remove_exit_record(spec_.box_dir);
    launch->hand_box_dir(spec_.box_dir);
    trace("core: shim handed its box");
  }
  // The box is recorded and started: its main command may run.
  launch->go();
  Child shim = launch->take_process();
  auto report = engine::decode_ready_report(read_until_eof(launch->ready(), spec_.boot_timeout_secs * 1000 + 15000),
                                            "box " + id() + "'s shim");
  trace("core: shim ready");
  if (!report || report->error) {
    if (counters_) ++counters_->boxes_failed;
    int status = shim.terminate(2000);
    if (report) throw *report->error;
    std::string log;
    try {
      log = read_file(engine::shim_log_path(spec_.box_dir));
    } catch (const Error&) {
    }
    throw Error(ErrorKind::Engine, "box " + id() + ": the shim exited during boot (" + describe_status(status) + ")" +
                                       (log.empty() ? "" : ": " + trim(log)));
  }
  record_timings(report->stages, now_ms() - spawn_started_ms);
  for (const auto& w : report->warnings)
    std::fprintf(stderr, "boxlite: warning: box %s: %s\n", id().c_str(), w.c_str());
  record_.started_at_ms = wall_clock_ms();
  try {
    client_ = core::ShimClient::connect(engine::shim_socket_path(spec_.box_dir), id());
  } catch (const Error&) {
    // A main command that exits at once can take the box down before we connect:
    // the box did start, and has stopped already.
    if (!shim.wait_for(5000)) shim.kill_now();
    record_stopped();
    if (!record_.main_exit_code) throw;
    return;
  }
  record_.shim_pid = shim.pid();
  if (record_.detach) {
    shim.release();  // nobody may kill it when this process exits
  } else {
    shim_ = std::move(shim);
    lifeline_ = launch->take_lifeline();
  }
  move_to_locked(BoxState::Running, "start");
  record_.stop_reason.clear();
  record_.main_exit_code.reset();
  persist();
  launch->commit();
}

void LocalBox::make_detached() {
  std::lock_guard lk(mu_);
  if (record_.state != BoxState::Running) record_.detach = true;
}

Execution LocalBox::exec(const ExecOptions& o) {
  if (o.argv.empty() || o.argv[0].empty()) throw Error(ErrorKind::InvalidArgument, "exec: the command is empty");
  if (o.timeout_secs < 0) throw Error(ErrorKind::InvalidArgument, "exec: timeout must be >= 0 seconds (0 = none)");
  // As the box's working_dir (Runtime::create): a relative one would be taken from
  // wherever the agent happens to run.
  if (!o.cwd.empty() && o.cwd[0] != '/')
    throw Error(ErrorKind::InvalidArgument,
                "exec: the working directory must be an absolute path, got '" + o.cwd + "'");
  for (const auto& [k, v] : o.env) {
    if (k.empty() || k.find('=') != std::string::npos)
      throw Error(ErrorKind::InvalidArgument, "exec: invalid environment variable name '" + k + "'");
  }
  {
    std::lock_guard lk(mu_);
    check_valid_locked();
    refresh_locked();
    if (record_.state == BoxState::Stopped && record_.main_exit_code) {
      throw Error(ErrorKind::InvalidState,
                  "Cannot exec box " + id() + ": it is stopped, and its main command has already exited");
    }
  }
  proto::ExecRequest req;
  for (const auto& a : o.argv) req.add_argv(a);
  for (const auto& [k, v] : o.env) req.add_env(k + "=" + v);
  req.set_cwd(o.cwd);
  req.set_user(o.user);
  req.set_tty(o.tty);
  req.set_rows(o.rows);
  req.set_cols(o.cols);
  req.set_timeout_secs(o.timeout_secs);
  req.set_stdin(o.stdin_open);
  req.set_detach(o.detach);
  auto client = running_client();
  try {
    auto stream = client->start_exec(req);
    if (counters_) ++counters_->commands_executed;
    return Execution(client, stream);
  } catch (const Error&) {
    if (counters_) ++counters_->exec_errors;
    throw;
  }
}

std::optional<Execution> LocalBox::finished_main_locked() {
  refresh_locked();
  if (record_.state != BoxState::Stopped || !record_.main_exit_code) return std::nullopt;
  return replay_main_locked(*record_.main_exit_code);
}

// The shim writes exit.json before it tells its clients the box is down: once it has
// hung up on us after that, the main command's exit is there, and its shim's own exit
// (~0.5 ms: its mounts' teardown) need not be waited for (refresh_locked does), nor
// the box's row written as stopped; a destroy() then overlaps that exit with the
// removal of the box's layers, as after a main command that ended while attached.
std::optional<Execution> LocalBox::main_from_exit_record_locked() {
  if (record_.state != BoxState::Running || !client_ || !client_->box_down()) return std::nullopt;
  auto exit = engine::read_exit_record(spec_.box_dir);
  if (!exit || !exit->main_exit_code) return std::nullopt;
  return replay_main_locked(*exit->main_exit_code);
}

// It already ran: hand back that run, read from its log.
Execution LocalBox::replay_main_locked(int exit_code) {
  auto stream = std::make_shared<core::ExecStream>();
  stream->started = true;
  for (auto& f : protocol::read_main_log(spec_.box_dir)) {
    stream->history_bytes += f.payload.size();
    auto kind = f.type == protocol::FrameType::Stdout ? StreamKind::Stdout : StreamKind::Stderr;
    stream->output.push_back(OutputChunk{kind, std::move(f.payload)});
  }
  proto::ExecExit ex;
  ex.set_exit_code(exit_code);
  stream->exit = ex;
  return Execution(core::ShimClient::offline(id()), stream);
}

Execution LocalBox::attach(bool with_stdin) {
  {
    std::lock_guard lk(mu_);
    check_valid_locked();
  }
  if (state() == BoxState::Configured) start();  // its main command may be over by the time this returns
  {
    std::lock_guard lk(mu_);
    if (auto done = main_from_exit_record_locked()) return std::move(*done);
    if (auto done = finished_main_locked()) return std::move(*done);
  }
  if (spec_.main_argv.empty()) throw Error(ErrorKind::NotFound, "box " + id() + " has no main command to attach to");
  proto::AttachRequest req;
  req.set_stdin(with_stdin);
  auto client = running_client();
  try {
    return Execution(client, client->start_attach(req));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Stopped) throw;
    // The main command exited (and the box stopped) before we got there.
    client->wait_closed(5000);
    std::lock_guard lk(mu_);
    if (auto done = main_from_exit_record_locked()) return std::move(*done);
    if (auto done = finished_main_locked()) return std::move(*done);
    throw;
  }
}

std::shared_ptr<core::ShimClient> LocalBox::running_client() {
  if (state() != BoxState::Running) start();
  std::lock_guard lk(mu_);
  if (!client_ && !unanswered_.empty()) {
    throw Error(ErrorKind::RpcTransport, unanswered_ + "; `boxlite stop " + id() + "` kills it");
  }
  if (!client_) throw Error(ErrorKind::Stopped, "box " + id() + " is not running");
  return client_;
}

Execution LocalBox::exec_builtin(const std::string& name, const std::vector<std::string>& args, bool stdin_open) {
  {
    std::lock_guard lk(mu_);
    check_valid_locked();
  }
  proto::ExecRequest req;
  // What an agent without builtins would try to run: it fails as "not found".
  req.add_argv("/.boxlite/builtin/" + name);
  req.set_builtin(name);
  for (const auto& a : args) req.add_builtin_args(a);
  req.set_stdin(stdin_open);
  auto client = running_client();
  auto stream = client->start_exec(req);
  return Execution(client, stream);
}

BufferedResult LocalBox::run(const ExecOptions& opts) {
  Execution e = exec(opts);
  BufferedResult r;
  while (auto chunk = e.next_output()) {
    bool out = chunk->stream == StreamKind::Stdout;
    std::string& text = out ? r.stdout_text : r.stderr_text;
    bool& truncated = out ? r.stdout_truncated : r.stderr_truncated;
    size_t room = kMaxBufferedOutput - std::min(kMaxBufferedOutput, text.size());
    if (chunk->data.size() > room) truncated = true;
    text.append(chunk->data, 0, std::min(room, chunk->data.size()));
  }
  ExecResult res = e.wait();
  r.exit_code = res.exit_code;
  r.timed_out = res.timed_out;
  if (r.timed_out) r.timeout_secs = opts.timeout_secs;
  return r;
}

// Another process started this box while we held a stale handle: use its shim
// rather than booting a second one.
bool LocalBox::join_started_elsewhere_locked() {
  if (!store_) return false;
  auto fresh = store_->find(id());
  if (!fresh || fresh->id != id() || fresh->state != BoxState::Running || !process_alive(fresh->shim_pid)) return false;
  try {
    client_ = core::ShimClient::connect(engine::shim_socket_path(spec_.box_dir), id());
  } catch (const Error&) {
    return false;  // it is stopping: boot anew
  }
  record_ = *fresh;  // running, as its row says
  attached_ = true;  // not ours to stop when this handle goes
  return true;
}

bool LocalBox::adopt_unrecorded_shim_locked() {
  pid_t pid = unix_listener_pid(engine::shim_socket_path(spec_.box_dir));
  if (pid <= 0) return false;
  try {
    client_ = core::ShimClient::connect(engine::shim_socket_path(spec_.box_dir), id());
  } catch (const Error&) {
    // Stopping already: its exit is waited for all the same.
  }
  record_.shim_pid = pid;
  attached_ = true;  // not our child
  move_to_locked(BoxState::Running, "adopt the shim it has");
  return true;
}

void LocalBox::reach_current_shim_locked() {
  if (shim_.valid() || client_ || !unanswered_.empty()) return;
  if (!join_started_elsewhere_locked()) adopt_unrecorded_shim_locked();
}

void LocalBox::stop() {
  std::lock_guard lk(mu_);
  FileLock box_lock = lock_box();
  invalidated_ = true;
  reach_current_shim_locked();
  stop_locked();
}

void LocalBox::stop_own() {
  std::lock_guard lk(mu_);
  FileLock box_lock = lock_box();
  invalidated_ = true;
  stop_locked();
}

void LocalBox::stop(int timeout_ms) {
  std::lock_guard lk(mu_);
  FileLock box_lock = lock_box();
  invalidated_ = true;
  reach_current_shim_locked();
  stop_locked(timeout_ms < 0 ? std::numeric_limits<int>::max() : timeout_ms);
}

void LocalBox::stop_locked(int timeout_ms, bool record) {
  if (client_ && !client_->closed()) {  // a shim that hung up is stopping already
    try {
      client_->request_shutdown();
    } catch (const Error&) {
      // Already gone.
    }
  }
  bool was_running = record_.state == BoxState::Running || shim_.valid();
  if (record_.state == BoxState::Running) move_to_locked(BoxState::Stopping, "stop");
  // A shim that did not answer will not stop the box either: killed at once.
  if (!unanswered_.empty()) timeout_ms = 0;
  bool killed = false;
  if (shim_.valid()) {
    // The guest powers off; the shim exits when QEMU does (its own deadline is 10 s).
    if (!shim_.wait_for(timeout_ms)) {
      shim_.kill_now();
      killed = true;
    }
  } else if (record_.shim_pid > 0) {
    // Not our child (detached, or another process's): wait for it all the same.
    if (!wait_pid_exit(record_.shim_pid, timeout_ms)) {
      ::kill(record_.shim_pid, SIGKILL);
      wait_pid_exit(record_.shim_pid, 2000);  // gone, with its mounts, before anything boots anew
      killed = true;
    }
  }
  // What a killed shim would have retired (destroy() does it too).
  if (killed) engine_impl_->release();
  if (client_) {
    client_->close();
    client_.reset();
  }
  lifeline_.reset();
  if (was_running && store_ && record) {
    record_stopped();
  } else if (record_.state == BoxState::Running || record_.state == BoxState::Stopping) {
    // What the handle knows (a removal that then fails leaves it so).
    move_to_locked(BoxState::Stopped, "stop");
    record_.shim_pid = 0;
  }
}

namespace {
// What is left goes with the box directory's removal.
void remove_tree_quietly(const std::string& path) {
  try {
    remove_tree(path);
  } catch (const Error&) {
  }
}
}  // namespace

void LocalBox::destroy() { destroy(/*reach_current_shim=*/true); }

void LocalBox::destroy(bool reach_current_shim) {
  std::lock_guard lk(mu_);
  FileLock box_lock = lock_box();
  if (reach_current_shim) reach_current_shim_locked();
  // Before anything stops: a source its clones still need stays whole (the
  // documented error; auto_remove then leaves the box stopped). A jail box has none:
  // its clones copy its upper layer (Runtime::clone_jail), and a run's removal then
  // reads no row before it starts (the query was ~0.1 ms of every `run --rm`).
  if (store_ && engine_impl_->clones_depend_on_source()) check_no_clone_dependents(*store_, id());
  // A jail box whose shim said it is down (then hung up) has no process left: only
  // the shim's own exit is, and its upper layer and overlay workdir (still mounted
  // in the shim's namespace, but written by nothing) go meanwhile.
  std::atomic<int> layers_emptied{0};  // before the threads that count: they may outlive a throw
  std::jthread early_upper, early_work;
  if (engine_impl_->reuses_box_dirs() && client_) {
    if (!client_->closed()) {
      try {
        client_->request_shutdown();  // as stop_locked() does; a box already down ignores it
      } catch (const Error&) {
      }
    }
    // The shim hangs up right after it tells its clients the box is down.
    if (!client_->wait_closed(2000)) trace("core: destroy: the shim did not hang up in 2 s");
  }
  bool early = engine_impl_->reuses_box_dirs() && client_ && client_->box_down();
  // Its directory may be kept as a spare (core/spare_dirs.hpp) once we have reaped
  // its shim ourselves: the overlay holding upper/ and work/ then is no more. The
  // layers are emptied for that, not removed.
  bool as_spare = early && shim_.valid();
  constexpr int kLayerDirs = 2;  // upper/ and work/, each emptied on a thread of its own
  // A box with a disk keeps its writable layer there (engine/jail/disk.hpp): its
  // image goes whole, with the rest of the directory.
  bool layers_on_disk = spec_.if_jail() && spec_.jail().disk_bytes > 0;
  if (early) {
    trace("core: destroy: early removal");
    // Each on a thread: every directory freed waits for a discard on some hosts.
    if (!layers_on_disk) {
      try {
        for (auto [t, sub] : {std::pair{&early_upper, "/upper"}, std::pair{&early_work, "/work"}}) {
          *t = start_thread_without_signals<std::jthread>([p = spec_.box_dir + sub, as_spare, &layers_emptied] {
            if (!as_spare) {
              remove_tree_quietly(p);
            } else if (core::empty_layer_for_spare(p)) {
              ++layers_emptied;
            }
          });
        }
      } catch (const std::system_error&) {
        // No thread to be had: what is left goes with the box directory below.
      }
    }
    // Forgotten while the shim exits and the layers go: a removal that fails after
    // this leaves a directory with no row, which the next runtime sweeps.
    if (store_) {
      core::drop_record_copy(spec_.box_dir);  // first: a removal cut short here is not undone
      store_->remove(id(), /*durable=*/!auto_remove_);
    }
    if (as_spare) (void)core::remove_all_but_layers(spec_.box_dir);  // what is left goes below
  }
  stop_locked(kDefaultStopTimeoutMs, /*record=*/false);
  trace("core: destroy: shim gone");
  for (auto* t : {&early_upper, &early_work}) {
    if (t->joinable()) t->join();
  }
  trace("core: destroy: stopped");
  // The shim retires them; this covers a shim that was killed first.
  engine_impl_->release();
  trace("core: destroy: cgroups");
  bool kept = as_spare && (layers_on_disk || layers_emptied == kLayerDirs) &&
              core::keep_as_spare(core::HomeLayout::of_box_dir(spec_.box_dir).spare_box_dirs(), spec_.box_dir);
  try {
    if (!kept) remove_tree(spec_.box_dir);
  } catch (const Error&) {
    // Forgotten early: recorded again, so that the box is still listed and its
    // removal can be retried.
    if (store_ && early) {
      try {
        store_->insert(record_);
        core::keep_record_copy(spec_.box_dir, record_);
      } catch (const Error&) {
      }
    }
    throw;
  }
  trace("core: destroy: tree removed");
  if (store_ && !early) store_->remove(id(), /*durable=*/!auto_remove_);
  removed_ = true;
}

LocalBox& local(Box& b) {
  if (auto* l = dynamic_cast<LocalBox*>(&b)) return *l;
  throw Error(ErrorKind::InvalidArgument, "box " + b.id() + " is not a box of this runtime");
}

const LocalBox& local(const Box& b) { return local(const_cast<Box&>(b)); }

}  // namespace boxlite
