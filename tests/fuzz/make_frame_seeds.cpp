// Writes the seed corpus of the frame and error targets (tests/fuzz/corpus/frame,
// corpus/error): the frames a boot and an exec exchange, as the shim and the guest
// encode them, and the error reports our processes write. Run by hand after a
// protocol change: build-fuzz/make_frame_seeds tests/fuzz/corpus
#include <cstdio>
#include <string>

#include "common/error.hpp"
#include "common/io.hpp"
#include "protocol/frame.hpp"

using namespace boxlite;
using namespace boxlite::protocol;

namespace {

void put(const std::string& dir, const std::string& name, const std::string& bytes) {
  make_dirs(dir);
  FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::perror(name.c_str());
  if (f) std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_frame_seeds CORPUS_DIR\n");
    return 2;
  }
  std::string frames = std::string(argv[1]) + "/frame", errors = std::string(argv[1]) + "/error";

  proto::Hello hello;
  hello.set_version(kProtocolVersion);
  hello.set_peer("shim");
  hello.set_agent_version("0.1.0");
  proto::BoxConfig cfg;
  cfg.set_hostname("box-1");
  cfg.set_root_disk_serial("boxlite-root");
  cfg.add_env("PATH=/usr/bin:/bin");
  cfg.set_working_dir("/");
  cfg.set_clock_unix_ns(1700000000000000000);
  cfg.set_entropy(std::string(32, '\x5a'));
  cfg.mutable_main()->add_argv("/bin/sh");
  cfg.mutable_main()->add_argv("-c");
  cfg.mutable_main()->add_argv("echo hi");
  auto* net = cfg.mutable_network();
  net->set_configure_link(true);
  net->set_interface("eth0");
  net->set_address("192.168.127.2");
  net->set_prefix_len(24);
  net->set_gateway("192.168.127.1");
  net->set_dns("192.168.127.1");
  auto* vol = cfg.add_volumes();
  vol->set_tag("vol0");
  vol->set_guest_path("/data");
  vol->set_read_only(true);
  std::string boot = encode_message(0, FrameType::Hello, hello) + encode_message(0, FrameType::Configure, cfg) +
                     encode_frame(0, FrameType::Configured, proto::Configured().SerializeAsString());
  put(frames, "boot", boot);

  proto::ExecRequest exec;
  exec.add_argv("ls");
  exec.add_argv("-l");
  exec.add_env("TERM=xterm");
  exec.set_cwd("/tmp");
  exec.set_user("1000:1000");
  exec.set_tty(true);
  exec.set_rows(24);
  exec.set_cols(80);
  exec.set_timeout_secs(2.5);
  exec.set_stdin(true);
  proto::ExecStarted started;
  started.set_pid(42);
  proto::Credit credit;
  credit.set_channel(proto::STDOUT);
  credit.set_bytes(kInitialWindow);
  proto::Resize resize;
  resize.set_rows(50);
  resize.set_cols(132);
  proto::Signal sig;
  sig.set_signo(15);
  proto::ExecExit exit;
  exit.set_exit_code(-9);
  exit.set_timed_out(true);
  exit.set_signal(9);
  std::string session = encode_message(2, FrameType::Exec, exec) + encode_message(2, FrameType::Started, started) +
                        encode_frame(2, FrameType::Stdin, "input\n") + encode_frame(2, FrameType::StdinEof, "") +
                        encode_frame(2, FrameType::Stdout, "total 0\n") + encode_frame(2, FrameType::Stderr, "oops") +
                        encode_message(2, FrameType::Credit, credit) + encode_message(2, FrameType::Resize, resize) +
                        encode_message(2, FrameType::Signal, sig) + encode_message(2, FrameType::Exit, exit);
  put(frames, "exec", session);

  proto::ExecRequest copy;
  copy.set_builtin("copy-out");
  copy.add_builtin_args("/etc/hostname");
  copy.set_detach(true);
  proto::AttachRequest attach;
  attach.set_stdin(true);
  proto::Shutdown shutdown;
  shutdown.set_timeout_ms(5000);
  proto::BoxStats stats;
  stats.set_commands_executed(3);
  stats.set_exec_errors(1);
  stats.set_cpu_percent(12.5);
  stats.set_memory_bytes(64u << 20);
  put(frames, "control",
      encode_message(3, FrameType::Exec, copy) + encode_message(1, FrameType::Attach, attach) +
          encode_frame(0, FrameType::Ping, "") + encode_frame(0, FrameType::Pong, "") +
          encode_frame(0, FrameType::Metrics, "") + encode_message(0, FrameType::Metrics, stats) +
          encode_message(0, FrameType::Shutdown, shutdown));

  Error spawn(ErrorKind::Execution, "cannot run 'nosuch': not found", SpawnFailure::NotFound);
  Error plain(ErrorKind::InvalidArgument, "the working directory must be absolute");
  put(frames, "errors",
      encode_frame(2, FrameType::Error, error_payload(spawn)) +
          encode_frame(0, FrameType::Error, error_payload(plain)));
  put(frames, "oversized", std::string("\x00\x20\x00\x00\x00\x00\x00\x00\x04", 9));
  put(frames, "unknown_type", std::string("\x00\x00\x00\x00\x00\x00\x00\x00\x63", 9));

  put(errors, "spawn", encode_error(spawn));
  put(errors, "plain", encode_error(plain));
  put(errors, "unknown_kind", "Bogus\nsomething failed");
  put(errors, "no_newline", "NotFound");
  put(errors, "bad_spawn", "Execution/Nope\ncannot run");
  return 0;
}
