// Networking (issue 7): the user-mode network on both engines, disabled mode,
// ports, the egress allowlist and its host-side enforcement, counters. Nothing
// leaves this machine: servers listen on the host's loopback or on addresses of
// a dummy interface the test creates, and names come from a test resolver that
// the box's network is pointed at ($BOXLITE_DNS_SERVER).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <atomic>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "core/network.hpp"
#include "net/dns.hpp"
#include "net/packet.hpp"
#include "support.hpp"

namespace boxlite::testing {
namespace {

std::string sha256(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return hex_encode(md, len);
}

// A port nobody uses right now, on any address. Taken from 10000 up to the start of
// the kernel's ephemeral range (ip_local_port_range), where no outgoing connection of
// the host can be given it between this check and the box's bind (one from the
// ephemeral range was, once); the kernel's pick where that range starts lower.
int free_port(int type = SOCK_STREAM) {
  int ephemeral = std::atoi(read_file_if_present("/proc/sys/net/ipv4/ip_local_port_range").value_or("32768").c_str());
  static unsigned seed = static_cast<unsigned>(::getpid());
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int port = ephemeral > 10000 ? 10000 + static_cast<int>(::rand_r(&seed) % unsigned(ephemeral - 10000)) : 0;
    UniqueFd s(::socket(AF_INET, type | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) continue;
    socklen_t len = sizeof a;
    ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len);
    return ntohs(a.sin_port);
  }
  return -1;
}

// One HTTP/1.0 GET from the host; "" when the connection fails or is reset.
std::string http_get(const std::string& ip, int port, const std::string& path) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  timeval tv{5, 0};
  ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return "";
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: x\r\n\r\n";
  if (::send(s.get(), req.data(), req.size(), MSG_NOSIGNAL) < 0) return "";
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(s.get(), buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// A DNS server on 127.0.0.1 answering A queries from a fixed table (NXDOMAIN-free:
// unknown names get no records). It also counts queries, so a test can tell
// whether a name ever left the box's resolver.
class TestResolver {
 public:
  explicit TestResolver(std::map<std::string, std::string> table) : table_(std::move(table)) {
    sock_ = UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(sock_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(sock_.get(), reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~TestResolver() {
    stop_ = true;
    thread_.join();
  }
  TestResolver(const TestResolver&) = delete;
  TestResolver& operator=(const TestResolver&) = delete;
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int queries_for(const std::string& name) const {
    std::lock_guard lock(mu_);
    auto it = asked_.find(name);
    return it == asked_.end() ? 0 : it->second;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{sock_.get(), POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[1500];
      sockaddr_in from{};
      socklen_t flen = sizeof from;
      ssize_t n = ::recvfrom(sock_.get(), buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &flen);
      if (n <= 0) continue;
      std::string_view msg(buf, static_cast<size_t>(n));
      auto q = net::parse_dns_query(msg);
      if (!q) continue;
      {
        std::lock_guard lock(mu_);
        ++asked_[q->name];
      }
      std::optional<uint32_t> addr;
      if (auto it = table_.find(q->name); it != table_.end()) addr = net::ipv4_from_string(it->second.c_str());
      std::string reply = net::build_dns_answer(msg, *q, addr);
      ::sendto(sock_.get(), reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from), flen);
    }
  }

  std::map<std::string, std::string> table_;
  UniqueFd sock_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::map<std::string, int> asked_;
  std::thread thread_;
};

// Two addresses of this host that are not loopback, on a veth pair the test owns
// (removed at the end; this kernel has no dummy driver): stand-ins for two
// "internet" servers.
class TestAddresses {
 public:
  TestAddresses() {
    int n = static_cast<int>(::getpid() % 100);
    name_ = "bxnt" + std::to_string(::getpid() % 100000);
    first_ = "198.51.100." + std::to_string(2 + n * 2);
    second_ = "198.51.100." + std::to_string(3 + n * 2);
    run_capture({"ip", "link", "del", name_});
    ok_ = run_capture({"ip", "link", "add", name_, "type", "veth", "peer", "name", name_ + "p"}).ok() &&
          run_capture({"ip", "addr", "add", first_ + "/32", "dev", name_}).ok() &&
          run_capture({"ip", "addr", "add", second_ + "/32", "dev", name_}).ok() &&
          run_capture({"ip", "link", "set", name_, "up"}).ok() &&
          run_capture({"ip", "link", "set", name_ + "p", "up"}).ok();
  }
  ~TestAddresses() { run_capture({"ip", "link", "del", name_}); }
  TestAddresses(const TestAddresses&) = delete;
  TestAddresses& operator=(const TestAddresses&) = delete;
  bool ok() const { return ok_; }
  const std::string& first() const { return first_; }
  const std::string& second() const { return second_; }

 private:
  std::string name_, first_, second_;
  bool ok_ = false;
};

// python3 -m http.server serving `dir` on bind_ip:port, until destroyed.
class HttpServer {
 public:
  HttpServer(const std::string& dir, const std::string& bind_ip) : port_(free_port()) {
    SpawnOptions so;
    so.argv = {"python3", "-m", "http.server", std::to_string(port_), "--bind", bind_ip, "--directory", dir};
    so.stdout_path = "/dev/null";
    so.stderr_path = "/dev/null";
    child_ = spawn(so);
    std::string probe_ip = bind_ip == "0.0.0.0" ? "127.0.0.1" : bind_ip;
    for (int i = 0; i < 100 && http_get(probe_ip, port_, "/").empty(); ++i) ::usleep(50000);
  }
  int port() const { return port_; }

 private:
  int port_;
  Child child_;
};

// An HTTPS server on addr:443 with a certificate from a test CA (made with the
// openssl tool), recording every request it receives and answering "ok".
class TestHttpsServer {
 public:
  TestHttpsServer(const std::string& dir, const std::vector<std::string>& addrs, const std::vector<std::string>& names)
      : dir_(dir) {
    std::string san = "subjectAltName=";
    for (size_t i = 0; i < names.size(); ++i) san += (i ? ",DNS:" : "DNS:") + names[i];
    write_file_atomic(dir + "/san.ext", san + "\n");
    auto run = [&](std::vector<std::string> argv) { return run_capture(argv).ok(); };
    ok_ = run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
               dir + "/ca.key", "-out", dir + "/ca.pem", "-days", "2", "-subj", "/CN=boxlite test upstream CA"}) &&
          run({"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
               dir + "/srv.key", "-out", dir + "/srv.csr", "-subj", "/CN=" + names[0]}) &&
          run({"openssl", "x509", "-req", "-in", dir + "/srv.csr", "-CA", dir + "/ca.pem", "-CAkey", dir + "/ca.key",
               "-CAcreateserial", "-out", dir + "/srv.pem", "-days", "2", "-extfile", dir + "/san.ext"});
    if (!ok_) return;
    ctx_ = SSL_CTX_new(TLS_server_method());
    ok_ = SSL_CTX_use_certificate_file(ctx_, (dir + "/srv.pem").c_str(), SSL_FILETYPE_PEM) == 1 &&
          SSL_CTX_use_PrivateKey_file(ctx_, (dir + "/srv.key").c_str(), SSL_FILETYPE_PEM) == 1;
    for (const auto& a : addrs) {
      UniqueFd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      int one = 1;
      ::setsockopt(l.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(443);
      ::inet_pton(AF_INET, a.c_str(), &sa.sin_addr);
      ok_ = ok_ && ::bind(l.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(l.get(), 16) == 0;
      listeners_.push_back(std::move(l));
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~TestHttpsServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (ctx_) SSL_CTX_free(ctx_);
  }
  TestHttpsServer(const TestHttpsServer&) = delete;
  TestHttpsServer& operator=(const TestHttpsServer&) = delete;
  bool ok() const { return ok_; }
  std::string ca() const { return dir_ + "/ca.pem"; }
  std::vector<std::string> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void serve() {
    while (!stop_) {
      std::vector<pollfd> p;
      for (const auto& l : listeners_) p.push_back(pollfd{l.get(), POLLIN, 0});
      if (::poll(p.data(), p.size(), 100) <= 0) continue;
      for (auto& pf : p) {
        if (!(pf.revents & POLLIN)) continue;
        UniqueFd c(::accept4(pf.fd, nullptr, nullptr, SOCK_CLOEXEC));
        if (!c) continue;
        timeval tv{10, 0};
        ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        SSL* ssl = SSL_new(ctx_);
        SSL_set_fd(ssl, c.get());
        std::string req;
        if (SSL_accept(ssl) == 1) {
          char buf[8192];
          size_t want = std::string::npos;
          for (;;) {
            int n = SSL_read(ssl, buf, sizeof buf);
            if (n <= 0) break;
            req.append(buf, static_cast<size_t>(n));
            auto end = req.find("\r\n\r\n");
            if (end != std::string::npos && want == std::string::npos) {
              auto cl = req.find("Content-Length: ");
              want = end + 4 + (cl != std::string::npos && cl < end ? std::stoul(req.substr(cl + 16)) : 0);
            }
            if (req.size() >= want) break;
          }
          std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
          SSL_write(ssl, resp.data(), static_cast<int>(resp.size()));
          SSL_shutdown(ssl);
        }
        SSL_free(ssl);
        std::lock_guard lock(mu_);
        requests_.push_back(req);
      }
    }
  }

  std::string dir_;
  bool ok_ = false;
  SSL_CTX* ctx_ = nullptr;
  std::vector<UniqueFd> listeners_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

// Whether `needle` occurs anywhere under `path` (files read raw, symlinks not followed).
bool tree_contains(const std::string& path, const std::string& needle) {
  auto r = run_capture({"grep", "-r", "-F", "-a", "-q", "-e", needle, path});
  return WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
}

// Whether `needle` occurs in the data of the (sparse) file at `path`: its holes, all
// zeros (most of a jail box's 10 GiB disk image), are skipped.
bool file_data_contains(const std::string& path, const std::string& needle) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_TRUE(fd) << path;
  std::string data;
  for (off_t pos = 0;;) {
    off_t start = ::lseek(fd.get(), pos, SEEK_DATA);
    if (start < 0) break;
    off_t end = ::lseek(fd.get(), start, SEEK_HOLE);
    std::string chunk(static_cast<size_t>(end - start), '\0');
    EXPECT_EQ(::pread(fd.get(), chunk.data(), chunk.size(), start), static_cast<ssize_t>(chunk.size()));
    data += chunk;
    pos = end;
  }
  return data.find(needle) != std::string::npos;
}

class NetworkTest : public PerEngineTest {
 protected:
  void SetUp() override {
    PerEngineTest::SetUp();
    rt_ = std::make_unique<Runtime>();  // after SetUp: in the test's own home
    www_ = home_ + "/www";
    make_dirs(www_);
  }
  void TearDown() override {
    boxes_.clear();
    rt_.reset();
    ::unsetenv("BOXLITE_DNS_SERVER");
    PerEngineTest::TearDown();
  }
  std::shared_ptr<Box> make_box(BoxOptions o, const std::string& img = "busybox") {
    o.rootfs_path = image(img);
    boxes_.push_back(rt_->create(o));
    return boxes_.back();
  }
  static BufferedResult sh(Box& b, const std::string& script) {
    ExecOptions e;
    e.argv = {"sh", "-c", script};
    e.timeout_secs = 60;
    return b.run(e);
  }
  // A file of random bytes under www_, returning its content.
  std::string make_blob(const std::string& name, size_t size) {
    std::string data(size, '\0');
    std::mt19937_64 rng(7);
    for (auto& ch : data) ch = static_cast<char>(rng());
    write_file_atomic(www_ + "/" + name, data);
    return data;
  }

  std::unique_ptr<Runtime> rt_;
  std::string www_;
  std::vector<std::shared_ptr<Box>> boxes_;
};

TEST_P(NetworkTest, DownloadFromTheHostThroughItsAliasMatchesSha256) {
  std::string blob = make_blob("blob.bin", 3u << 20);
  HttpServer http(www_, "127.0.0.1");
  auto box = make_box({});
  std::string url = "http://host.boxlite.internal:" + std::to_string(http.port()) + "/blob.bin";
  auto r = sh(*box, "wget -q -O /root/blob.bin " + url +
                        " && sha256sum /root/blob.bin && cat /etc/resolv.conf && "
                        "grep host.boxlite.internal /etc/hosts && ifconfig eth0");
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_NE(r.stdout_text.find(sha256(blob) + "  /root/blob.bin"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("nameserver 192.168.127.1"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("192.168.127.254\thost.boxlite.internal"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("inet addr:192.168.127.2"), std::string::npos) << r.stdout_text;
  // The counters saw it: the 3 MiB came in, at least one connection.
  auto m = box_network_metrics(local(*box).dir());
  ASSERT_TRUE(m.has_value());
  EXPECT_GE(m->bytes_received, blob.size());
  EXPECT_GT(m->bytes_sent, 0u);
  EXPECT_GE(m->tcp_connections, 1u);
}

// A jail box without published ports starts boxlite-net with its first frame: one
// that never uses its network never runs it. A VM's QEMU connects to it at boot.
TEST_P(NetworkTest, AJailBoxStartsItsNetworkWithItsFirstFrame) {
  auto box = make_box({});
  auto netd_running = [&] {
    for (pid_t p : processes_mentioning(local(*box).dir())) {
      try {
        if (read_file("/proc/" + std::to_string(p) + "/cmdline").find("boxlite-net") != std::string::npos) return true;
      } catch (const Error&) {
      }
    }
    return false;
  };
  ASSERT_EQ(sh(*box, "echo quiet").exit_code, 0);
  EXPECT_EQ(netd_running(), GetParam() == "vm");
  auto r = sh(*box, "nslookup host.boxlite.internal 2>&1");
  EXPECT_NE(r.stdout_text.find("Address: 192.168.127.254"), std::string::npos) << r.stdout_text;
  EXPECT_TRUE(netd_running());
  auto m = box_network_metrics(local(*box).dir());
  ASSERT_TRUE(m.has_value());
  EXPECT_GT(m->bytes_sent, 0u);
}

TEST_P(NetworkTest, DisabledModeLeavesOnlyLoopback) {
  BoxOptions o;
  o.network.mode = "disabled";
  auto box = make_box(o);
  auto r = sh(*box, "cat /proc/net/dev; echo local-ok; echo data > /root/f && cat /root/f");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text.find("eth0"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("lo:"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("local-ok\ndata\n"), std::string::npos);
  auto dns = sh(*box, "nslookup host.boxlite.internal 2>&1; timeout 5 wget -q -O- http://192.168.127.254:1/ 2>&1");
  EXPECT_EQ(dns.stdout_text.find("Address: 192.168.127.254"), std::string::npos) << dns.stdout_text;
  EXPECT_FALSE(box_network_metrics(local(*box).dir()).has_value());
}

TEST_P(NetworkTest, PublishedPortReachesAServiceOnAllAddressesButNotOnLoopback) {
  int open_port = free_port(), local_port = free_port();
  BoxOptions o;
  o.ports.push_back(PortSpec{0, open_port, "tcp", "127.0.0.1"});  // host port 0: same as the guest's
  o.ports.push_back(PortSpec{free_port(), local_port, "tcp", ""});
  int local_host_port = o.ports[1].host_port;
  auto box = make_box(o);
  write_file_atomic(www_ + "/hello.txt", "hello from the box\n");
  box->copy_in(www_ + "/hello.txt", "/root/hello.txt");
  auto r = sh(*box, "httpd -p 0.0.0.0:" + std::to_string(open_port) +
                        " -h /root && httpd -p 127.0.0.1:" + std::to_string(local_port) + " -h /root && echo started");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::string got;
  for (int i = 0; i < 50 && got.find("hello from the box") == std::string::npos; ++i) {
    got = http_get("127.0.0.1", open_port, "/hello.txt");
    if (got.empty()) ::usleep(100000);
  }
  EXPECT_NE(got.find("hello from the box"), std::string::npos) << got;
  // Bound to the box's loopback: the forward reaches eth0, where nothing listens.
  EXPECT_EQ(http_get("127.0.0.1", local_host_port, "/hello.txt").find("hello from the box"), std::string::npos);

  // The host port is now taken: a second box publishing it fails to start, clearly.
  BoxOptions clash;
  clash.ports.push_back(PortSpec{open_port, 80, "tcp", "127.0.0.1"});
  auto second = make_box(clash);
  try {
    second->start();
    ADD_FAILURE() << "a box publishing a host port in use started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("host port 127.0.0.1:" + std::to_string(open_port) + "/tcp"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("already in use"), std::string::npos) << e.what();
  }
}

TEST_P(NetworkTest, AllowlistResolvesOnlyListedNamesAndDropsEverythingElseOnTheHost) {
  TestAddresses addrs;
  ASSERT_TRUE(addrs.ok()) << "could not create a veth pair (needs CAP_NET_ADMIN)";
  TestResolver dns({{"allowed.test", addrs.first()},
                    {"api.wild.test", addrs.first()},
                    {"wild.test", addrs.first()},
                    {"denied.test", addrs.second()}});
  ::setenv("BOXLITE_DNS_SERVER", dns.address().c_str(), 1);
  make_blob("blob.bin", 200000);
  HttpServer http(www_, "0.0.0.0");
  std::string port = std::to_string(http.port());
  BoxOptions o;
  o.network.allow_net = {"allowed.test", "*.wild.test"};
  int published = free_port();
  o.ports.push_back(PortSpec{0, published, "tcp", "127.0.0.1"});
  auto box = make_box(o);

  auto names = sh(*box,
                  "for n in allowed.test api.wild.test wild.test denied.test host.boxlite.internal; do "
                  "echo \"== $n\"; nslookup $n 2>&1 | sed -n '/^Name:/,$p' | grep Address; done");
  std::string out = names.stdout_text;
  EXPECT_NE(out.find("== allowed.test\nAddress: " + addrs.first() + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("== api.wild.test\nAddress: " + addrs.first() + "\n"), std::string::npos) << out;
  // Not listed ("*.wild.test" does not cover wild.test itself): sinkholed, and never
  // asked upstream.
  EXPECT_NE(out.find("== wild.test\nAddress: 0.0.0.0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("== denied.test\nAddress: 0.0.0.0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("== host.boxlite.internal\nAddress: 0.0.0.0\n"), std::string::npos) << out;
  EXPECT_EQ(dns.queries_for("denied.test"), 0);
  EXPECT_GE(dns.queries_for("allowed.test"), 1);

  auto fetch = [&](const std::string& host) {
    auto r = sh(*box, "timeout 10 wget -q -O /tmp/got http://" + host + ":" + port + "/blob.bin && echo FETCHED");
    return r.stdout_text + r.stderr_text;
  };
  EXPECT_NE(fetch("allowed.test").find("FETCHED"), std::string::npos) << fetch("allowed.test");
  EXPECT_NE(fetch("api.wild.test").find("FETCHED"), std::string::npos) << fetch("api.wild.test");
  // Hard-coded addresses get nowhere: another server's IP, the host alias, the
  // gateway (libslirp would otherwise map those to the host).
  for (const auto& target :
       {addrs.second(), std::string("192.168.127.254"), std::string("192.168.127.1"), std::string("denied.test")}) {
    EXPECT_EQ(fetch(target).find("FETCHED"), std::string::npos) << target;
  }
  // UDP too: a DNS query sent straight to the resolver's real address is dropped.
  auto udp = sh(*box, "timeout 3 nslookup allowed.test " + addrs.second() + ":" + std::to_string(dns.port()) + " 2>&1");
  EXPECT_EQ(udp.stdout_text.find("Address: " + addrs.first()), std::string::npos) << udp.stdout_text;
  auto m = box_network_metrics(local(*box).dir());
  ASSERT_TRUE(m.has_value());
  EXPECT_GE(m->tcp_errors, 3u);
  EXPECT_GE(m->packets_dropped, 3u);

  // A published port still answers: the guest's replies on a flow the forward opened
  // pass the filter (the host's 127.0.0.1 reaches the box as .254, which is not allowed).
  ASSERT_EQ(
      sh(*box, "echo published > /tmp/p.txt && httpd -p 0.0.0.0:" + std::to_string(published) + " -h /tmp").exit_code,
      0);
  std::string got;
  for (int i = 0; i < 50 && got.find("published") == std::string::npos; ++i) {
    got = http_get("127.0.0.1", published, "/p.txt");
    if (got.empty()) ::usleep(100000);
  }
  EXPECT_NE(got.find("published"), std::string::npos) << got;

  // The control: without an allowlist the same hard-coded address is reachable,
  // so the refusals above are the policy's doing.
  auto open_box = make_box({});
  auto r = sh(*open_box,
              "timeout 10 wget -q -O /tmp/got http://" + addrs.second() + ":" + port + "/blob.bin && echo FETCHED");
  EXPECT_NE(r.stdout_text.find("FETCHED"), std::string::npos) << r.stderr_text;
}

TEST_P(NetworkTest, UdpReachesTheHostThroughItsAlias) {
  TestResolver dns(std::map<std::string, std::string>{{"udp-probe.test", "203.0.113.7"}});
  auto box = make_box({});
  // busybox nslookup to an explicit server: plain UDP out through the user-mode NAT.
  auto r = sh(*box, "nslookup udp-probe.test 192.168.127.254:" + std::to_string(dns.port()) + " 2>&1");
  EXPECT_NE(r.stdout_text.find("Address: 203.0.113.7"), std::string::npos) << r.stdout_text;
  EXPECT_GE(dns.queries_for("udp-probe.test"), 1);
}

TEST_P(NetworkTest, SecretsAreSubstitutedOnTheHostAndNeverEnterTheBox) {
  TestAddresses addrs;
  ASSERT_TRUE(addrs.ok());
  TestHttpsServer https(home_, {addrs.first(), addrs.second()}, {"api.secret.test", "other.test"});
  ASSERT_TRUE(https.ok()) << "could not start the test HTTPS server";
  TestResolver dns(
      std::map<std::string, std::string>{{"api.secret.test", addrs.first()}, {"other.test", addrs.second()}});
  ::setenv("BOXLITE_DNS_SERVER", dns.address().c_str(), 1);
  ::setenv("BOXLITE_UPSTREAM_CA", https.ca().c_str(), 1);
  const std::string real = "sk-real-" + random_hex(12);
  BoxOptions o;
  o.secrets.push_back(Secret{"testkey", real, {"api.secret.test"}, ""});
  o.network.allow_net = {"api.secret.test", "other.test"};
  auto box = make_box(o, "debian-python");
  ::unsetenv("BOXLITE_UPSTREAM_CA");
  write_file_atomic(www_ + "/client.py", R"(import http.client, os, ssl
# The box's trust store (with the proxy's CA) as an image with ca-certificates has it.
ctx = ssl.create_default_context(cafile="/etc/ssl/certs/ca-certificates.crt")
ph = os.environ["BOXLITE_SECRET_TESTKEY"]
for host in ["api.secret.test", "other.test"]:
    c = http.client.HTTPSConnection(host, 443, context=ctx, timeout=20)
    c.request("POST", "/p/" + ph + "?q=" + ph, body="body=" + ph, headers={"Authorization": "Bearer " + ph})
    r = c.getresponse()
    print(host, r.status, r.read().decode())
# A chunked body, the placeholder split across chunks.
c = http.client.HTTPSConnection("api.secret.test", 443, context=ctx, timeout=20)
half = len(ph) // 2
c.request("POST", "/c", body=iter([b"chunk=" + ph[:half].encode(), ph[half:].encode()]), encode_chunked=True)
r = c.getresponse()
print("chunked", r.status, r.read().decode())
# Fronted: the secret's host by TLS name, another by Host header.
c = http.client.HTTPSConnection("api.secret.test", 443, context=ctx, timeout=20)
c.request("POST", "/fronted", body="body=" + ph, headers={"Host": "other.test", "Authorization": "Bearer " + ph})
r = c.getresponse()
print("fronted", r.status, r.read().decode())
print("PH=" + ph)
)");
  box->copy_in(www_ + "/client.py", "/root/client.py");
  std::vector<std::string> outputs;
  auto r = sh(*box, "python3 /root/client.py");
  outputs.push_back(r.stdout_text + r.stderr_text);
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("api.secret.test 200 ok"), std::string::npos) << r.stdout_text << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("other.test 200 ok"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("PH=<BOXLITE_SECRET:testkey>"), std::string::npos) << r.stdout_text;

  EXPECT_NE(r.stdout_text.find("chunked 200 ok"), std::string::npos) << r.stdout_text;
  auto reqs = https.requests();
  ASSERT_EQ(reqs.size(), 4u);
  const std::string ph = "<BOXLITE_SECRET:testkey>";
  std::string matching, other, chunked, fronted;
  for (const auto& req : reqs) {
    if (req.rfind("POST /fronted ", 0) == 0) {
      fronted = req;
    } else if (req.rfind("POST /c ", 0) == 0) {
      chunked = req;
    } else if (req.find("api.secret.test") != std::string::npos) {
      matching = req;
    } else {
      other = req;
    }
  }
  EXPECT_NE(chunked.find("\r\n\r\nchunk=" + real), std::string::npos) << chunked;
  EXPECT_EQ(chunked.find("Transfer-Encoding"), std::string::npos) << chunked;
  EXPECT_NE(matching.find("POST /p/" + ph + "?q=" + real + " HTTP/1.1"), std::string::npos) << matching;  // path kept
  EXPECT_NE(matching.find("Authorization: Bearer " + real), std::string::npos) << matching;
  EXPECT_NE(matching.find("\r\n\r\nbody=" + real), std::string::npos) << matching;
  EXPECT_EQ(other.find(real), std::string::npos) << other;  // a host the secret does not name
  EXPECT_NE(other.find("Authorization: Bearer " + ph), std::string::npos) << other;
  // A request naming another host than the TLS name keeps its placeholders: a shared
  // front routing by Host would hand the secret to that other host.
  EXPECT_EQ(fronted.find(real), std::string::npos) << fronted;
  EXPECT_NE(fronted.find("Authorization: Bearer " + ph), std::string::npos) << fronted;

  // The real value is nowhere in the box: not in its environment, not in anything
  // it printed, not on its disk.
  auto env = sh(*box, "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; env");
  outputs.push_back(env.stdout_text + env.stderr_text);
  EXPECT_NE(env.stdout_text.find("BOXLITE_SECRET_TESTKEY=" + ph), std::string::npos);
  auto trust = sh(*box, "grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt");
  outputs.push_back(trust.stdout_text + trust.stderr_text);
  for (const auto& out : outputs) EXPECT_EQ(out.find(real), std::string::npos);
  std::string dir = local(*box).dir();
  sh(*box, "echo disk-marker-5f3a > /marker && sync");  // the control that the disk is searched
  box->stop();
  if (vm()) {
    EXPECT_FALSE(tree_contains(dir + "/disk.qcow2", real));
  } else {
    EXPECT_TRUE(file_data_contains(dir + "/" + engine::jail::kDiskImageName, "disk-marker-5f3a"));
    EXPECT_FALSE(
        file_data_contains(dir + "/" + engine::jail::kDiskImageName, real));  // the whole disk, not just its files
  }
  EXPECT_TRUE(tree_contains(dir + "/shim.json", real));  // the control: the host side has it
}

// Every flow of the box is a host socket in boxlite-net, outside the box's memory
// cgroup: a box holds at most 1024 at once. Past that a new connection is refused;
// the ones it holds work on, and once they close new ones are accepted again.
TEST_P(NetworkTest, ABoxHoldsAtMostAThousandHostSocketsAtOnce) {
  // boxlite-net is the same process for both engines; 1200 connections from Python
  // under TCG would take minutes.
  if (vm()) GTEST_SKIP() << "boxlite-net's cap is engine-independent: checked with the jail";
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener.get(), 4096), 0);  // the kernel completes handshakes; nobody accepts
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  auto box = make_box({}, "debian-python");
  write_file_atomic(www_ + "/hold.py", R"(import socket, sys
port, held, refused = int(sys.argv[1]), [], 0
for i in range(1200):
    s = socket.socket()
    s.settimeout(10)
    try:
        s.connect(("192.168.127.254", port))
        held.append(s)
    except OSError:
        refused += 1
        s.close()
print(len(held), refused, flush=True)
sys.stdin.readline()
)");
  box->copy_in(www_ + "/hold.py", "/root/hold.py");
  ExecOptions e;
  e.argv = {"python3", "/root/hold.py", std::to_string(ntohs(a.sin_port))};
  e.stdin_open = true;
  e.timeout_secs = 120;
  Execution holder = box->exec(e);
  std::string line;
  while (line.find('\n') == std::string::npos) {
    auto chunk = holder.next_output();
    ASSERT_TRUE(chunk.has_value()) << "the holder ended: " << line;
    if (chunk->stream == StreamKind::Stdout) line += chunk->data;
  }
  auto counts = split(trim(line), ' ');
  ASSERT_EQ(counts.size(), 2u) << line;
  int held = std::stoi(counts[0]);
  EXPECT_GT(held, 900) << line;
  EXPECT_LE(held, 1024) << line;
  EXPECT_EQ(held + std::stoi(counts[1]), 1200) << line;
  for (pid_t p : processes_mentioning(local(*box).dir())) {
    if (read_file("/proc/" + std::to_string(p) + "/cmdline").find("boxlite-net") == std::string::npos) continue;
    size_t fds = dir_entries("/proc/" + std::to_string(p) + "/fd").size();
    EXPECT_LE(fds, 1024u);
  }
  holder.write_stdin("\n");
  holder.close_stdin();
  EXPECT_EQ(holder.wait().exit_code, 0);
  // The host end never accepted them: its close resets them, and the sockets go.
  uint16_t port = ntohs(a.sin_port);
  listener.reset();
  listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener.get(), 16), 0);
  auto again = sh(*box,
                  "python3 -c \"import socket, time\n"
                  "for i in range(40):\n"
                  "    try:\n"
                  "        socket.create_connection(('192.168.127.254', " +
                      std::to_string(port) +
                      "), 5)\n"
                      "        print('ok'); break\n"
                      "    except OSError:\n"
                      "        time.sleep(0.25)\n\"");
  EXPECT_EQ(again.stdout_text, "ok\n") << again.stderr_text;
}

TEST_P(NetworkTest, PublishedUdpPortReachesAGuestService) {
  int port = free_port(SOCK_DGRAM);
  BoxOptions o;
  o.ports.push_back(PortSpec{0, port, "udp", "127.0.0.1"});
  auto box = make_box(o, "debian-python");
  std::string server = "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(('0.0.0.0', " +
                       std::to_string(port) +
                       "))\nwhile True:\n    d, a = s.recvfrom(2048)\n    s.sendto(b'echo:' + d, a)\n";
  write_file_atomic(www_ + "/udp.py", server);
  box->copy_in(www_ + "/udp.py", "/root/udp.py");
  ASSERT_EQ(sh(*box, "python3 /root/udp.py >/dev/null 2>&1 &").exit_code, 0);
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string got;
  for (int i = 0; i < 50 && got.empty(); ++i) {  // until the guest's server is up
    ::sendto(s.get(), "ping", 4, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
    pollfd p{s.get(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buf[64];
    ssize_t n = ::recv(s.get(), buf, sizeof buf, 0);
    if (n > 0) got.assign(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got, "echo:ping");
}

TEST_P(NetworkTest, CliFlagsNetworkAllowNetAndPublish) {
  std::string img = image("busybox");
  auto off = run_cli({"run", "--rm", "--network", "disabled", img, "cat", "/proc/net/dev"});
  EXPECT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(off.out.find("eth0"), std::string::npos) << off.out;

  TestResolver dns(
      std::map<std::string, std::string>{{"allowed.test", "203.0.113.9"}, {"denied.test", "203.0.113.10"}});
  ::setenv("BOXLITE_DNS_SERVER", dns.address().c_str(), 1);
  auto allow = run_cli({"run", "--rm", "--allow-net", "allowed.test", "--allow-net", "*.wild.test", img, "sh", "-c",
                        "nslookup allowed.test; nslookup denied.test"});
  EXPECT_NE(allow.out.find("Address: 203.0.113.9"), std::string::npos) << allow.out << allow.err;
  EXPECT_NE(allow.out.find("Address: 0.0.0.0"), std::string::npos) << allow.out;
  EXPECT_EQ(allow.out.find("203.0.113.10"), std::string::npos) << allow.out;

  // -p host:guest with the host port taken: start fails with docker's 125 and says why.
  UniqueFd taken(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(taken.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(taken.get(), 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(taken.get(), reinterpret_cast<sockaddr*>(&a), &len);
  std::string port = std::to_string(ntohs(a.sin_port));
  auto clash = run_cli({"run", "--rm", "-p", "127.0.0.1:" + port + ":80", img, "true"});
  EXPECT_EQ(clash.exit_code, 125);
  EXPECT_NE(clash.err.find("host port 127.0.0.1:" + port + "/tcp (guest port 80): the host port is already in use"),
            std::string::npos)
      << clash.err;
  auto bad = run_cli({"run", "--rm", "-p", "80:http", img, "true"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("invalid port 'http' in -p 80:http"), std::string::npos) << bad.err;
  expect_no_leftovers();
}

BOXLITE_ON_BOTH_ENGINES(NetworkTest);

// Option validation, no box needed.
TEST(NetworkOptions, InvalidSpecsAreRejectedWithTheFieldNamed) {
  auto code = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(error_kind_name(e.kind())) + ": " + e.what();
    }
    return std::string("ok");
  };
  BoxOptions o;
  o.image = "x";
  o.network.mode = "bridge";
  EXPECT_NE(code([&] { validate_box_options(o); }).find("invalid network mode 'bridge'"), std::string::npos);
  o.network.mode = "enabled";
  o.network.allow_net = {"bad host!"};
  EXPECT_NE(code([&] { validate_box_options(o); }).find("invalid allow_net entry 'bad host!'"), std::string::npos);
  o.network.allow_net = {};
  o.ports = {PortSpec{0, 0, "tcp", ""}};
  EXPECT_NE(code([&] { validate_box_options(o); }).find("guest_port must be between 1 and 65535"), std::string::npos);
  o.ports = {PortSpec{0, 80, "sctp", ""}};
  EXPECT_NE(code([&] { validate_box_options(o); }).find("invalid port protocol 'sctp'"), std::string::npos);
  o.ports = {PortSpec{8080, 80, "tcp", ""}, PortSpec{8080, 81, "tcp", ""}};
  EXPECT_NE(code([&] { validate_box_options(o); }).find("published twice"), std::string::npos);
  o.ports = {PortSpec{8080, 80, "tcp", "localhost"}};
  EXPECT_NE(code([&] { validate_box_options(o); }).find("invalid host_ip 'localhost'"), std::string::npos);
  o.ports = {PortSpec{8080, 80, "tcp", ""}};
  o.network.mode = "disabled";
  EXPECT_NE(code([&] { validate_box_options(o); }).find("network mode is 'disabled' but ports"), std::string::npos);
  o.ports = {PortSpec{0, 80, "udp", ""}};
  o.network.mode = "enabled";
  auto c = make_net_config(o);
  ASSERT_EQ(c.ports.size(), 1u);
  EXPECT_EQ(c.ports[0].host_port, 80);  // 0 means the guest's number
  EXPECT_EQ(c.ports[0].host_ip, "0.0.0.0");
  EXPECT_TRUE(c.ports[0].udp);
}

}  // namespace
}  // namespace boxlite::testing
