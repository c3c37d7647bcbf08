#include "shim/router.hpp"

#include <signal.h>

#include <algorithm>

#include "common/error.hpp"

namespace boxlite::shim {

using protocol::Frame;
using protocol::FrameType;

Router::Router(RouterSink& sink, std::string box_id) : sink_(sink), box_id_(std::move(box_id)) {}

void Router::add_client(uint64_t client) { clients_[client] = Client{}; }

void Router::refuse(uint64_t client, uint32_t stream, ErrorKind kind, const std::string& why) {
  sink_.to_client(client, stream, FrameType::Error, protocol::error_payload(Error(kind, why)));
}

// A detached exec runs on unread: the credit its unread output took comes back.
void Router::give_back_credit(uint32_t guest_stream, Route& r) {
  for (auto [ch, credit] : {std::pair{proto::STDOUT, &r.out_credit}, std::pair{proto::STDERR, &r.err_credit}}) {
    proto::Credit c;
    c.set_channel(ch);
    c.set_bytes(
        static_cast<uint32_t>(protocol::kInitialWindow - std::min<uint64_t>(*credit, protocol::kInitialWindow)));
    *credit += c.bytes();
    if (c.bytes() > 0) sink_.to_guest(guest_stream, FrameType::Credit, c.SerializeAsString());
  }
}

void Router::drop_client(uint64_t client) {
  auto it = clients_.find(client);
  if (it == clients_.end()) return;
  for (auto [cs, gs] : it->second.streams) {
    if (gs == protocol::kMainStream) {
      // A follower left: the main command carries on without it.
      std::erase(main_.followers, std::make_pair(client, cs));
      if (main_.stdin_client == client) main_.stdin_client = 0;
      continue;
    }
    auto r = routes_.find(gs);
    if (r == routes_.end()) continue;
    r->second.client = 0;
    if (r->second.detached) {
      give_back_credit(gs, r->second);
      continue;
    }
    // The exec's owner is gone: nobody can read its output, so end it.
    proto::Signal sig;
    sig.set_signo(SIGKILL);
    sink_.to_guest(gs, FrameType::Signal, sig.SerializeAsString());
  }
  clients_.erase(it);
}

void Router::on_guest_frame(Frame& f) {
  if (f.stream == 0) {
    if (f.type == FrameType::Error) sink_.guest_error(protocol::error_from_frame(f, "the guest"));
    return;  // Pong and anything else on the control stream
  }
  if (f.stream == protocol::kMainStream && main_.present) return on_main_frame(f);
  auto r = routes_.find(f.stream);
  if (r == routes_.end())
    throw Error(ErrorKind::Rpc, "guest sent " + std::string(protocol::frame_type_name(f.type)) + " on unknown stream " +
                                    std::to_string(f.stream));
  Route& route = r->second;
  bool output = f.type == FrameType::Stdout || f.type == FrameType::Stderr;
  if (output) {
    uint64_t& credit = f.type == FrameType::Stdout ? route.out_credit : route.err_credit;
    if (f.payload.size() > credit)
      throw Error(ErrorKind::Rpc, "guest sent output beyond its credit on stream " + std::to_string(f.stream));
    credit -= f.payload.size();
  }
  bool closes = f.type == FrameType::Exit || f.type == FrameType::Error;
  if (f.type == FrameType::Started) ++commands_executed_;
  if (f.type == FrameType::Error) ++exec_errors_;
  if (route.client == 0 && route.detached && output) {
    proto::Credit back;  // discarded: the process may go on writing
    back.set_channel(f.type == FrameType::Stdout ? proto::STDOUT : proto::STDERR);
    back.set_bytes(static_cast<uint32_t>(f.payload.size()));
    (f.type == FrameType::Stdout ? route.out_credit : route.err_credit) += f.payload.size();
    sink_.to_guest(f.stream, FrameType::Credit, back.SerializeAsString());
  }
  if (route.client != 0) {
    auto c = clients_.find(route.client);
    if (c != clients_.end()) {
      sink_.to_client(route.client, route.client_stream, f.type, f.payload);
      if (closes) c->second.streams.erase(route.client_stream);
    }
  }
  if (closes) routes_.erase(r);
}

void Router::on_client_frame(uint64_t client, Frame& f) {
  auto it = clients_.find(client);
  if (it == clients_.end()) return;
  Client& c = it->second;
  if (!c.hello) {
    if (f.type != FrameType::Hello) throw Error(ErrorKind::Rpc, "expected Hello first");
    auto h = protocol::parse_message<proto::Hello>(f);
    if (h.version() != protocol::kProtocolVersion) {
      throw Error(ErrorKind::Rpc, "protocol version mismatch: client speaks " + std::to_string(h.version()) +
                                      ", shim speaks " + std::to_string(protocol::kProtocolVersion));
    }
    c.hello = true;
    proto::Hello ours;
    ours.set_version(protocol::kProtocolVersion);
    ours.set_peer("shim");
    sink_.to_client(client, 0, FrameType::Hello, ours.SerializeAsString());
    return;
  }
  if (f.stream == 0) return on_control_frame(client, f);
  if (f.type == FrameType::Attach) return attach_main(client, c, f);
  if (f.type == FrameType::Exec) return on_exec_request(client, c, f);
  auto s = c.streams.find(f.stream);
  if (s == c.streams.end()) return;  // the exec already ended
  if (s->second == protocol::kMainStream) return on_main_client_frame(client, f);
  on_exec_stream_frame(s->second, f);
}

void Router::on_control_frame(uint64_t client, Frame& f) {
  switch (f.type) {
    case FrameType::Ping: sink_.to_client(client, 0, FrameType::Pong, {}); return;
    case FrameType::Shutdown: sink_.stop_box("stop requested"); return;
    case FrameType::Metrics: {
      proto::BoxStats s = sink_.usage();
      s.set_commands_executed(commands_executed_);
      s.set_exec_errors(exec_errors_);
      sink_.to_client(client, 0, FrameType::Metrics, s.SerializeAsString());
      return;
    }
    default:
      throw Error(ErrorKind::Rpc, std::string("unexpected ") + protocol::frame_type_name(f.type) + " on stream 0");
  }
}

void Router::on_exec_request(uint64_t client, Client& c, Frame& f) {
  if (c.streams.count(f.stream)) throw Error(ErrorKind::Rpc, "stream " + std::to_string(f.stream) + " already in use");
  if (main_.exit) {
    return refuse(client, f.stream, ErrorKind::InvalidState,
                  "Cannot exec box " + box_id_ + ": it is stopped, and its main command has already exited");
  }
  if (!accepting_) {
    ++exec_errors_;
    return refuse(client, f.stream, ErrorKind::Stopped, "box " + box_id_ + " is stopping");
  }
  auto req = protocol::parse_message<proto::ExecRequest>(f);
  uint32_t gs = next_stream_++;
  if (next_stream_ == 0) next_stream_ = protocol::kMainStream + 1;
  routes_[gs] = Route{client, f.stream, protocol::kInitialWindow, protocol::kInitialWindow, req.detach()};
  c.streams[f.stream] = gs;
  sink_.to_guest(gs, FrameType::Exec, f.payload);
}

void Router::on_exec_stream_frame(uint32_t guest_stream, Frame& f) {
  if (f.type == FrameType::Credit) {
    auto credit = protocol::parse_message<proto::Credit>(f);
    Route& r = routes_[guest_stream];
    if (credit.channel() == proto::STDOUT) r.out_credit += credit.bytes();
    if (credit.channel() == proto::STDERR) r.err_credit += credit.bytes();
  }
  switch (f.type) {
    case FrameType::Stdin:
    case FrameType::StdinEof:
    case FrameType::Credit:
    case FrameType::Signal:
    case FrameType::Resize: sink_.to_guest(guest_stream, f.type, f.payload); return;
    default:
      throw Error(ErrorKind::Rpc, std::string("unexpected ") + protocol::frame_type_name(f.type) + " from client");
  }
}

// The main command's output goes to its log (which never blocks it: credit comes
// straight back) and to whoever follows it; its exit stops the box.
void Router::on_main_frame(Frame& f) {
  switch (f.type) {
    case FrameType::Started: main_.pid = protocol::parse_message<proto::ExecStarted>(f).pid(); return;
    case FrameType::Stdout:
    case FrameType::Stderr: {
      uint64_t& credit = f.type == FrameType::Stdout ? main_.out_credit : main_.err_credit;
      if (f.payload.size() > credit) throw Error(ErrorKind::Rpc, "guest sent main command output beyond its credit");
      sink_.log_main(f);
      proto::Credit back;
      back.set_channel(f.type == FrameType::Stdout ? proto::STDOUT : proto::STDERR);
      back.set_bytes(static_cast<uint32_t>(f.payload.size()));
      sink_.to_guest(protocol::kMainStream, FrameType::Credit, back.SerializeAsString());
      for (auto [cid, cs] : main_.followers) sink_.to_client(cid, cs, f.type, f.payload);
      return;
    }
    case FrameType::Credit:  // stdin credit: the stdin writer may send more
      if (main_.stdin_client != 0) sink_.to_client(main_.stdin_client, main_.stdin_stream, f.type, f.payload);
      return;
    case FrameType::Exit:
    case FrameType::Error: return on_main_exit(f);
    default:
      throw Error(ErrorKind::Rpc,
                  std::string("unexpected ") + protocol::frame_type_name(f.type) + " on the main command's stream");
  }
}

void Router::on_main_exit(Frame& f) {
  if (main_.exit) return;
  proto::ExecExit ex;
  if (f.type == FrameType::Exit) {
    ex = protocol::parse_message<proto::ExecExit>(f);
  } else {
    ex.set_exit_code(-1);
  }
  main_.exit = ex;
  for (auto [cid, cs] : main_.followers) {
    auto c = clients_.find(cid);
    if (c == clients_.end()) continue;
    sink_.to_client(cid, cs, f.type, f.payload);
    c->second.streams.erase(cs);
  }
  main_.followers.clear();
  main_.stdin_client = 0;
  sink_.stop_box("main command exited with code " + std::to_string(ex.exit_code()));
}

void Router::attach_main(uint64_t client, Client& c, Frame& f) {
  if (c.streams.count(f.stream)) throw Error(ErrorKind::Rpc, "stream " + std::to_string(f.stream) + " already in use");
  auto req = protocol::parse_message<proto::AttachRequest>(f);
  if (!main_.present)
    return refuse(client, f.stream, ErrorKind::NotFound, "box " + box_id_ + " has no main command to attach to");
  if (req.stdin() && main_.stdin_client != 0) {
    return refuse(client, f.stream, ErrorKind::InvalidState,
                  "box " + box_id_ + ": another client already writes the main command's stdin");
  }
  std::vector<Frame> history = sink_.main_history();
  uint64_t history_bytes = 0;
  for (const auto& h : history) history_bytes += h.payload.size();
  proto::ExecStarted started;
  started.set_pid(main_.pid);
  started.set_history_bytes(history_bytes);
  sink_.to_client(client, f.stream, FrameType::Started, started.SerializeAsString());
  for (const auto& h : history) sink_.to_client(client, f.stream, h.type, h.payload);
  if (main_.exit) {
    sink_.to_client(client, f.stream, FrameType::Exit, main_.exit->SerializeAsString());
    return;
  }
  c.streams[f.stream] = protocol::kMainStream;
  main_.followers.emplace_back(client, f.stream);
  if (req.stdin()) {
    main_.stdin_client = client;
    main_.stdin_stream = f.stream;
  }
}

void Router::on_main_client_frame(uint64_t client, Frame& f) {
  switch (f.type) {
    case FrameType::Stdin:
    case FrameType::StdinEof:
      if (main_.stdin_client != client || main_.stdin_stream != f.stream) return;  // a follower without stdin
      sink_.to_guest(protocol::kMainStream, f.type, f.payload);
      return;
    case FrameType::Credit: return;  // the router itself grants the main command's output credit
    case FrameType::Signal:
    case FrameType::Resize: sink_.to_guest(protocol::kMainStream, f.type, f.payload); return;
    default:
      throw Error(ErrorKind::Rpc, std::string("unexpected ") + protocol::frame_type_name(f.type) + " from client");
  }
}

void Router::box_stopped(const Error& why) {
  std::string err = protocol::error_payload(why);
  for (auto& [id, c] : clients_) {
    for (auto [cs, gs] : c.streams) sink_.to_client(id, cs, FrameType::Error, err);
    sink_.to_client(id, 0, FrameType::Error, err);
  }
}

}  // namespace boxlite::shim
