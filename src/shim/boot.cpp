// The box's boot, as one flat list of steps (Shim::boot): the network that must be
// there first, the engine's start, the handshake, phase 2, and the network's ready.
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/trace.hpp"
#include "net/stats.hpp"
#include "shim/shim.hpp"

namespace boxlite::shim {

using protocol::Frame;
using protocol::FrameType;

namespace {

std::string tail_lines(const std::string& path, size_t lines, size_t max_bytes = 4096) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error&) {
    return "";
  }
  if (text.size() > max_bytes) text = text.substr(text.size() - max_bytes);
  size_t pos = text.size();
  while (pos > 0 && lines > 0) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
    --lines;
  }
  return trim(text.substr(pos));
}

int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void Shim::boot() {
  double t0 = now_ms();
  double deadline = t0 + spec_.boot_timeout_secs * 1000;
  start_engine(deadline);
  double t_engine = now_ms();
  trace("shim: engine started");
  stages_.box_spawn_ms = static_cast<int64_t>(t_engine - t0);

  bool pipelined = engine_->pipelined_handshake();
  if (pipelined) send_hello_and_config();
  Frame hello_frame = read_guest_frame_blocking(deadline, "boot kernel and start the guest agent");
  double t_hello = now_ms();
  trace("shim: hello");
  stages_.guest_boot_ms = static_cast<int64_t>(t_hello - t_engine);
  if (hello_frame.type != FrameType::Hello || hello_frame.stream != 0) {
    boot_failed("handshake", std::string("expected Hello, got ") + protocol::frame_type_name(hello_frame.type));
  }
  auto hello = protocol::parse_message<proto::Hello>(hello_frame);
  if (hello.version() != protocol::kProtocolVersion) {
    boot_failed("handshake", "guest agent speaks protocol version " + std::to_string(hello.version()) +
                                 ", this host speaks " + std::to_string(protocol::kProtocolVersion) +
                                 " (rebuild the initramfs: remove the cached one)");
  }
  if (!pipelined) send_hello_and_config();

  await_configured(deadline);
  stages_.container_init_ms = static_cast<int64_t>(now_ms() - t_hello);
  trace("shim: configured");
  cpu_sampled_ms_ = t0;
  // boxlite-net came up alongside the boot; a port it could not publish fails the start.
  if (net_.ready) {
    try {
      wait_ready(net_, spec_, deadline);
      trace("shim: net ready");
    } catch (const Error& e) {
      if (process_.valid()) process_.kill_now();
      throw with_context(e, "box " + spec_.box_id + " failed to start");
    }
  }
}

// boxlite-net before the engine when the engine's link connects to it (QEMU's
// netdev stream); a TAP once the box's network namespace exists otherwise.
void Shim::start_engine(double deadline) {
  std::string failed = "box " + spec_.box_id + " failed to start";
  if (spec_.net.enabled && engine_->net_link() == engine::NetLink::StreamSocket) {
    try {
      net_ = start_net_listening(spec_);
      net_log_ = CappedLog(std::move(net_.log), engine::net_log_path(spec_.box_dir), kEngineLogBytes);
    } catch (const Error& e) {
      throw with_context(e, failed);
    }
  }
  engine::Launched l;
  try {
    l = engine_->start(deadline, [&](int box_netns) { on_box_netns(box_netns); });
  } catch (const Error& e) {
    if (engine_->has_console()) boot_failed("start " + std::string(engine_->process_name()), e.what());
    throw with_context(e, failed);
  }
  process_ = std::move(l.process);
  guest_ = std::move(l.channel);
  warnings_ = std::move(l.warnings);
  etc_files_bound_ = l.etc_files_bound;
  if (l.console)
    console_log_ = CappedLog(std::move(l.console), engine::console_log_path(spec_.box_dir), kEngineLogBytes);
  if (l.output) engine_log_ = CappedLog(std::move(l.output), engine::qemu_log_path(spec_.box_dir), kEngineLogBytes);
}

// The box's eth0 and boxlite-net need only its network namespace: made while the
// kernel attaches its cgroups.
void Shim::on_box_netns(int box_netns) {
  if (!spec_.net.enabled || engine_->net_link() != engine::NetLink::Tap) return;
  tap_ = make_box_tap(box_netns);
  // A published port must be bound (or fail the start) before the box runs.
  // Otherwise nothing can reach the box before it sends a frame, which waits in the
  // TAP's queue until boxlite-net, started then, reads it: a box that never uses its
  // network never pays for boxlite-net (~3 ms of CPU to start, ~6 MiB resident).
  if (!spec_.net.ports.empty()) {
    start_net_now();
  } else {
    ::unlink(net::stats_path(spec_.box_dir).c_str());  // no counters of an earlier run
  }
}

void Shim::boot_failed(const std::string& stage, const std::string& why) {
  if (process_.valid()) process_.kill_now();
  drain_engine_logs();
  std::string msg = "box " + spec_.box_id + " failed to boot: " + stage + ": " + why;
  std::string engine_tail = tail_lines(engine::qemu_log_path(spec_.box_dir), 10);
  if (!engine_tail.empty()) msg += "\n--- qemu ---\n" + engine_tail;
  std::string console = tail_lines(engine::console_log_path(spec_.box_dir), 20);
  // A console that stayed empty says something (the kernel never spoke); an engine
  // without one (a jail) may have had its box directory removed by now (--rm).
  if (!console.empty() || engine_->has_console()) {
    msg += "\n--- console tail (" + engine::console_log_path(spec_.box_dir) + ") ---\n" +
           (console.empty() ? "(empty)" : console);
  }
  throw Error(ErrorKind::Engine, msg);
}

Frame Shim::read_guest_frame_blocking(double deadline_ms, const std::string& stage) {
  for (;;) {
    if (auto f = guest_decoder_.next()) return std::move(*f);
    if (auto st = process_.try_wait()) {
      boot_failed(stage, std::string(engine_->process_name()) + " exited (" + describe_status(*st) + ")");
    }
    if (now_ms() > deadline_ms)
      boot_failed(stage, "timed out after " + std::to_string(static_cast<int>(spec_.boot_timeout_secs)) + " s");
    pollfd p[4] = {{guest_.get(), POLLIN, 0},
                   {console_log_.fd(), POLLIN, 0},
                   {engine_log_.fd(), POLLIN, 0},
                   {net_log_.fd(), POLLIN, 0}};
    int n = ::poll(p, 4, 50);
    drain_engine_logs();
    if (n <= 0 || !(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[65536];
    ssize_t r = ::read(guest_.get(), buf, sizeof buf);
    if (r == 0) boot_failed(stage, kGuestClosed);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      boot_failed(stage, errno_text("read guest channel"));
    }
    guest_decoder_.feed(buf, static_cast<size_t>(r));
  }
}

void Shim::wait_for_go() {
  if (!go_) return;
  char g = 0;
  ssize_t n;
  while ((n = ::read(go_.get(), &g, 1)) < 0 && errno == EINTR) {
  }
  if (n != 1 || g != 'g') {
    go_.reset();
    boot_failed("wait for the box's start", "its start was called off");
  }
  // Kept for the commit (ShimLaunch::commit), which serve() waits for.
}

void Shim::send_hello_and_config() {
  wait_for_go();  // the configuration starts the main command
  proto::Hello ours;
  ours.set_version(protocol::kProtocolVersion);
  ours.set_peer("shim");
  send_guest(0, FrameType::Hello, ours.SerializeAsString());
  proto::BoxConfig cfg = box_config();
  std::string payload = cfg.SerializeAsString();
  if (payload.size() > protocol::kMaxPayload) {
    size_t env = 0, argv = 0;
    for (const auto& e : cfg.env()) env += e.size();
    for (const auto& a : cfg.main().argv()) argv += a.size();
    boot_failed("configure the box (phase 2)",
                "the box's configuration is " + std::to_string(payload.size()) + " bytes, over the " +
                    std::to_string(protocol::kMaxPayload) + "-byte limit (its environment " + std::to_string(env) +
                    " bytes, its main command " + std::to_string(argv) +
                    " bytes): the image config's Env, Entrypoint and Cmd and the box's options together are too large");
  }
  send_guest(0, FrameType::Configure, payload);
  flush_guest();
}

// Phase 2: everything box-specific, the engine's part filled by the engine.
proto::BoxConfig Shim::box_config() {
  proto::BoxConfig cfg;
  for (const auto& e : spec_.env) cfg.add_env(e);
  cfg.set_working_dir(spec_.working_dir);
  cfg.set_user(spec_.user);
  cfg.set_clock_unix_ns(wall_clock_ns());
  if (!spec_.main_argv.empty()) {
    proto::ExecRequest* m = cfg.mutable_main();
    for (const auto& a : spec_.main_argv) m->add_argv(a);
    m->set_tty(spec_.main_tty);
    m->set_stdin(spec_.main_stdin);
    m->set_rows(spec_.main_rows);
    m->set_cols(spec_.main_cols);
    router_.set_main_present();
  }
  if (spec_.net.enabled) {
    auto* n = cfg.mutable_network();
    n->set_interface(net::kGuestInterface);
    n->set_address(net::kGuestAddress);
    n->set_prefix_len(net::kPrefixLength);
    n->set_gateway(net::kGatewayAddress);
    n->set_dns(net::kGatewayAddress);
    n->set_host_alias(net::kHostAlias);
    n->set_host_alias_name(net::kHostAliasName);
    n->set_etc_files_bound(etc_files_bound_);
    if (!spec_.net.secrets.empty()) {
      try {
        n->set_trusted_ca_pem(read_file(spec_.net.ca_cert));
      } catch (const Error& e) {
        boot_failed("configure the box (phase 2)", std::string("read the secrets proxy CA: ") + e.what());
      }
    }
  }
  engine_->configure(cfg);
  std::string entropy(32, '\0');
  if (::getrandom(entropy.data(), entropy.size(), 0) == static_cast<ssize_t>(entropy.size())) cfg.set_entropy(entropy);
  return cfg;
}

// The agent's answer to phase 2: Configured, after the main command's Started when
// there is one; a main command that cannot start fails the start with its error.
void Shim::await_configured(double deadline) {
  Frame reply = read_guest_frame_blocking(deadline, "configure the box (phase 2)");
  if (reply.stream == protocol::kMainStream && reply.type == FrameType::Started && router_.main_present()) {
    router_.set_main_pid(protocol::parse_message<proto::ExecStarted>(reply).pid());
    reply = read_guest_frame_blocking(deadline, "configure the box (phase 2)");
  }
  if (reply.type == FrameType::Error) {
    Error err = protocol::error_from_frame(reply, "the guest");
    if (err.kind() == ErrorKind::Execution) {
      if (process_.valid()) process_.kill_now();
      throw with_context(err, "box " + spec_.box_id + ": cannot start its main command");
    }
    boot_failed("configure the box (phase 2)", err.what());
  }
  if (reply.type != FrameType::Configured) {
    boot_failed("configure the box (phase 2)", std::string("unexpected ") + protocol::frame_type_name(reply.type));
  }
}

}  // namespace boxlite::shim
