#include "registry/pull.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/sha256.hpp"
#include "registry/http.hpp"
#include "registry/manifest.hpp"

namespace boxlite::registry {

namespace {

constexpr size_t kMaxManifest = 4u << 20;  // the OCI distribution spec's suggested limit
constexpr int kMaxIndexDepth = 4;

const std::vector<std::string>& accept_types() {
  static const std::vector<std::string> types = {"application/vnd.oci.image.manifest.v1+json",
                                                 "application/vnd.oci.image.index.v1+json",
                                                 "application/vnd.docker.distribution.manifest.v2+json",
                                                 "application/vnd.docker.distribution.manifest.list.v2+json"};
  return types;
}

[[noreturn]] void image_error(const std::string& msg) { throw Error(ErrorKind::Image, msg); }

// Runs f, retrying transient (Network) failures with exponential backoff.
template <typename F>
auto with_retries(const PullOptions& o, F&& f) {
  for (int attempt = 1;; ++attempt) {
    try {
      return f(attempt);
    } catch (const Error& e) {
      if (!is_transient(e) || attempt >= o.attempts) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(o.backoff_ms << (attempt - 1)));
    }
  }
}

using Descriptor = BlobDescriptor;

struct Fetched {
  std::string digest, media_type, body;
};

Fetched fetch_manifest(Session& s, const std::string& reference, const std::string& display, const PullOptions& o) {
  HttpResponse r =
      with_retries(o, [&](int) { return s.get("manifests/" + reference, accept_types(), nullptr, kMaxManifest); });
  if (r.status == 404)
    image_error("image not found: " + display + " (registry " + s.host() + " answered 404 Not Found)");
  if (r.status != 200) {
    image_error("cannot pull " + display + ": registry " + s.host() + " answered " + std::to_string(r.status) +
                " for its manifest");
  }
  Fetched f;
  f.body = std::move(r.body);
  f.digest = sha256_of(f.body);
  if (is_sha256_digest(reference) && f.digest != reference) {
    image_error("manifest of " + display + " failed verification: asked for " + reference + ", content hashes to " +
                f.digest);
  }
  if (!r.docker_content_digest.empty() && r.docker_content_digest != f.digest) {
    image_error("manifest of " + display + " failed verification: the registry says " + r.docker_content_digest +
                ", content hashes to " + f.digest);
  }
  f.media_type = manifest_media_type(f.body, r.content_type, display);
  return f;
}

class BlobDownloader {
 public:
  BlobDownloader(ImageStore& store, Session& s, const PullOptions& o) : store_(store), s_(s), o_(o) {}

  // Downloads the missing descriptors with o.parallel workers; rethrows the first failure.
  uint64_t run(const std::vector<Descriptor>& todo) {
    std::atomic<size_t> next{0};
    std::exception_ptr first;
    std::mutex mu;
    auto worker = [&] {
      for (size_t i; (i = next++) < todo.size() && !cancel_;) {
        try {
          download(todo[i]);
        } catch (...) {
          std::lock_guard lk(mu);
          if (!first) first = std::current_exception();
          cancel_ = true;
        }
      }
    };
    std::vector<std::thread> threads;
    size_t n = std::min<size_t>(std::max(1, o_.parallel), todo.size());
    for (size_t i = 1; i < n; ++i) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    if (first) std::rethrow_exception(first);
    return bytes_;
  }

 private:
  // A blob that keeps failing verification ends as an Image error (the content is
  // wrong), though each mismatch was retried like a transfer failure.
  void download(const Descriptor& d) {
    bool mismatched = false;  // the last attempt's bytes hashed to another digest
    try {
      download_with_retries(d, mismatched);
    } catch (const Error& e) {
      if (mismatched && e.kind() == ErrorKind::Network) throw Error(ErrorKind::Image, e.what());
      throw;
    }
  }

  void download_with_retries(const Descriptor& d, bool& mismatched) {
    with_retries(o_, [&](int attempt) {
      mismatched = false;
      ImageStore::Ingest in(store_, d.digest);
      Sha256 h;
      LayerProgress p{d.digest, d.size, 0, false, false, attempt};
      auto last_report = std::chrono::steady_clock::now();
      bool too_long = false;
      BodySink sink = [&](std::string_view chunk) {
        if (cancel_) return false;
        if (p.downloaded + chunk.size() > d.size) {  // longer than the manifest says
          too_long = true;
          return false;
        }
        write_all(in.fd(), chunk.data(), chunk.size());
        h.update(chunk);
        p.downloaded += chunk.size();
        auto now = std::chrono::steady_clock::now();
        if (o_.progress && now - last_report > std::chrono::milliseconds(50)) {
          last_report = now;
          o_.progress(p);
        }
        return true;
      };
      HttpResponse r;
      try {
        r = s_.get("blobs/" + d.digest, {}, sink, 1u << 20);
      } catch (const Error& e) {
        if (too_long)
          image_error("blob " + d.digest + " from " + s_.host() + " is longer than the " + std::to_string(d.size) +
                      " bytes its descriptor says");
        throw;
      }
      if (r.status == 404)
        image_error("blob " + d.digest + " of " + s_.host() + "/" + s_.repository() + " not found (404)");
      if (r.status != 200)
        image_error("blob " + d.digest + " from " + s_.host() + ": answered " + std::to_string(r.status));
      if (p.downloaded != d.size) {
        throw Error(ErrorKind::Network, "blob " + d.digest + " from " + s_.host() + " ended after " +
                                            std::to_string(p.downloaded) + " of " + std::to_string(d.size) + " bytes");
      }
      std::string actual = h.finish();
      if (actual != d.digest) {
        // A corrupted transfer is worth another try; a registry that keeps serving
        // wrong bytes fails after the last one, with this message.
        mismatched = true;
        throw Error(ErrorKind::Network,
                    "blob " + d.digest + " from " + s_.host() + " failed verification: content hashes to " + actual);
      }
      in.commit(actual);
      bytes_ += p.downloaded;
      p.done = true;
      if (o_.progress) o_.progress(p);
      return 0;
    });
  }

  ImageStore& store_;
  Session& s_;
  const PullOptions& o_;
  std::atomic<bool> cancel_{false};
  std::atomic<uint64_t> bytes_{0};
};

bool is_loopback_host(const std::string& host) {
  std::string h =
      host.substr(0, host.rfind(':') == std::string::npos || host.front() == '[' ? host.size() : host.rfind(':'));
  return h == "localhost" || h.starts_with("127.") || h == "[::1]";
}

PullResult pull_one(ImageStore& store, const ImageRef& ref, const ImageRegistry& reg, bool configured,
                    const PullOptions& o) {
  ImageRegistry endpoint = reg;
  if (endpoint.host == kDefaultRegistry) endpoint.host = "registry-1.docker.io";
  auto s = std::make_unique<Session>(endpoint, ref.repository);
  std::string display = ref.str();
  Fetched top;
  try {
    top = fetch_manifest(*s, ref.manifest_reference(), display, o);
  } catch (const TlsHandshakeFailed&) {
    // Like docker, a registry on this machine that nobody configured may speak
    // plain http: https is tried first, http when the TLS handshake fails.
    if (configured || !is_loopback_host(endpoint.host)) throw;
    endpoint.transport = "http";
    s = std::make_unique<Session>(endpoint, ref.repository);
    top = fetch_manifest(*s, ref.manifest_reference(), display, o);
  }
  Session& sess = *s;
  Fetched m = top;
  for (int depth = 0; is_index_media_type(m.media_type); ++depth) {
    if (depth >= kMaxIndexDepth) image_error("image indexes of " + display + " nest too deep");
    std::string digest = amd64_manifest_digest(m.body, "index " + m.digest + " of " + display);
    m = fetch_manifest(sess, digest, display, o);
  }
  ImageManifest manifest = parse_image_manifest(m.body, "manifest " + m.digest + " of " + display);
  const Descriptor& config = manifest.config;
  const std::vector<Descriptor>& layers = manifest.layers;

  UniqueFd guard = store.pull_guard();  // no garbage collection until tagged
  PullResult res;
  res.reference = display;
  res.manifest_digest = m.digest;
  res.layers = layers.size();
  std::vector<LayerProgress> listing;
  std::vector<Descriptor> todo;
  if (!store.has_blob(config.digest)) todo.push_back(config);
  for (const auto& l : layers) {
    bool cached = store.has_blob(l.digest);
    listing.push_back(LayerProgress{l.digest, l.size, cached ? l.size : 0, cached, cached, 1});
    if (cached) {
      ++res.layers_cached;
    } else if (std::none_of(todo.begin(), todo.end(), [&](const Descriptor& t) { return t.digest == l.digest; })) {
      todo.push_back(l);
    }
  }
  if (o.on_manifest) o.on_manifest(display, listing);
  BlobDownloader dl(store, sess, o);
  res.bytes_downloaded = dl.run(todo);
  store.put_blob(m.body);
  store.tag(display, m.digest, m.media_type, m.body.size());
  return res;
}

}  // namespace

PullResult pull(ImageStore& store, const std::string& text, const PullOptions& opts) {
  for (const auto& r : opts.registries) validate(r);
  auto list = candidates(text, opts.registries);
  std::string failures;
  ErrorKind code = ErrorKind::Image;
  for (const auto& c : list) {
    try {
      bool configured = std::any_of(opts.registries.begin(), opts.registries.end(),
                                    [&](const ImageRegistry& r) { return r.host == c.registry; });
      return pull_one(store, c, registry_for(c, opts.registries), configured, opts);
    } catch (const Error& e) {
      if (list.size() == 1) throw;
      failures += std::string(failures.empty() ? "" : "; ") + c.str() + ": " + e.what();
      code = e.kind();
    }
  }
  throw Error(code, "cannot pull '" + text + "' from any search registry: " + failures);
}

}  // namespace boxlite::registry
