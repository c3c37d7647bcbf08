// The runtime handle: creation, post-and-drain, shutdown, free; the error
// boundary; images; the free functions of plain structs.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "errors.hpp"
#include "state.hpp"

namespace boxlite::capi {

// ---------------------------------------------------------------- errors

char* dup_string(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) return nullptr;
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

Error current_error() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return e;
  } catch (const std::bad_alloc&) {
    return Error(ErrorKind::ResourceExhausted, "out of memory");
  } catch (const std::exception& e) {
    return Error(ErrorKind::Internal, std::string("internal error: ") + e.what());
  } catch (...) {
    return Error(ErrorKind::Internal, "internal error: unknown exception");
  }
}

BoxliteErrorCode fill_error(CBoxliteError* out, ErrorKind kind, std::string_view message) noexcept {
  if (out) {
    out->code = to_c(kind);
    out->message = dup_string(message);
  }
  return to_c(kind);
}

// ---------------------------------------------------------------- queue

void EventQueue::post(Event ev) {
  {
    std::lock_guard lk(mu_);
    if (!closed_) {
      events_.push_back(std::move(ev));
      cv_.notify_all();
      return;
    }
  }
  if (ev.exec) ev.exec->release(ev.bytes);  // dropped outside the lock: it may free a handle
}

bool EventQueue::wait(int timeout_ms) {
  std::unique_lock lk(mu_);
  auto ready = [&] { return !events_.empty() || closed_; };
  if (timeout_ms < 0) {
    cv_.wait(lk, ready);
  } else if (timeout_ms > 0) {
    cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), ready);
  }
  return !events_.empty();
}

std::deque<Event> EventQueue::take_all() {
  std::lock_guard lk(mu_);
  return std::exchange(events_, {});
}

std::deque<Event> EventQueue::close() {
  std::lock_guard lk(mu_);
  closed_ = true;
  cv_.notify_all();
  return std::exchange(events_, {});
}

// ---------------------------------------------------------------- pool

void TaskPool::submit(std::function<void()> task) {
  std::lock_guard lk(mu_);
  if (stopping_) throw Error(ErrorKind::InvalidState, "the runtime has been freed");
  tasks_.push_back(std::move(task));
  if (tasks_.size() > idle_) {
    threads_.emplace_back([this] { worker(); });
  } else {
    cv_.notify_one();
  }
}

void TaskPool::worker() {
  std::unique_lock lk(mu_);
  for (;;) {
    if (!tasks_.empty()) {
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lk.unlock();
      try {
        task();
      } catch (...) {
        // Tasks report through their callbacks; nothing may escape a thread.
      }
      task = nullptr;  // what it captured is released outside the lock
      lk.lock();
      continue;
    }
    if (stopping_) return;
    ++idle_;
    cv_.wait(lk, [&] { return !tasks_.empty() || stopping_; });
    --idle_;
  }
}

void TaskPool::join() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    cv_.notify_all();
    threads.swap(threads_);
  }
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
}

// ---------------------------------------------------------------- runtime state

void RuntimeState::check_open(std::string_view op) const {
  if (freed) throw Error(ErrorKind::InvalidState, "cannot " + std::string(op) + ": the runtime has been freed");
  if (shut_down) {
    throw Error(ErrorKind::Stopped,
                "cannot " + std::string(op) + ": the runtime has been shut down; use a new runtime for more work");
  }
}

std::shared_ptr<Box> RuntimeState::cached_box(const std::string& id) {
  std::lock_guard lk(boxes_mu);
  auto it = boxes.find(id);
  if (it == boxes.end()) return nullptr;
  auto box = it->second.lock();
  if (!box) boxes.erase(it);
  return box;
}

void RuntimeState::remember_box(const std::shared_ptr<Box>& box) {
  std::lock_guard lk(boxes_mu);
  for (auto it = boxes.begin(); it != boxes.end();) it = it->second.expired() ? boxes.erase(it) : std::next(it);
  boxes[box->id()] = box;
}

namespace {

// The drain in progress on this thread, to refuse re-entry from a callback.
thread_local RuntimeState* tl_draining = nullptr;

void dispatch(Event& ev) {
  bool cancelled = ev.token && ev.token->cancelled;
  // An acked execution's output keeps its window until the caller acks it.
  if (ev.exec && (cancelled || !ev.exec->manual_ack)) ev.exec->release(ev.bytes);
  if (cancelled) return;
  try {
    ev.run();
  } catch (...) {
    // A C callback cannot throw; a C++ caller's exception stops here.
  }
}

// Everything of a runtime stops: pending callbacks are dropped, running commands
// are killed (their pumps end), and the workers are joined.
void free_runtime(CBoxliteRuntime* runtime) {
  auto st = runtime->st;
  st->freed = true;
  std::deque<Event> dropped = st->queue.close();
  for (auto& ev : dropped) {
    if (ev.exec) ev.exec->release(ev.bytes);
  }
  dropped.clear();
  std::vector<std::shared_ptr<ExecState>> execs;
  {
    std::lock_guard lk(st->execs_mu);
    for (auto& w : st->execs) {
      if (auto e = w.lock()) execs.push_back(e);
    }
    st->execs.clear();
  }
  for (auto& e : execs) {
    {
      std::lock_guard lk(e->mu);
      e->cv.notify_all();  // a pump waiting for window sees `freed`
      if (e->done) continue;
    }
    try {
      e->exec->kill();
    } catch (...) {
      // The box is gone: the stream has ended already.
    }
  }
  execs.clear();
  st->pool.join();
  delete runtime;
}

// Runs a batch on this thread (dispatch_mu held); returns how many callbacks ran.
int dispatch_batch(RuntimeState* st, std::deque<Event>& batch) {
  int count = 0;
  RuntimeState* outer = tl_draining;
  tl_draining = st;
  for (auto& ev : batch) {
    if (st->free_deferred) {
      if (ev.exec) ev.exec->release(ev.bytes);
      continue;
    }
    bool cancelled = ev.token && ev.token->cancelled;
    dispatch(ev);
    if (!cancelled) ++count;
    ev = Event{};  // captures released now, not at the end of the batch
  }
  tl_draining = outer;
  return count;
}

int drain(CBoxliteRuntime* runtime, int timeout_ms, CBoxliteError* out_error) {
  if (!runtime) {
    fill_error(out_error, ErrorKind::InvalidArgument, "runtime is NULL");
    return -1;
  }
  RuntimeState* st = runtime->st.get();
  if (tl_draining == st) {
    fill_error(out_error, ErrorKind::InvalidState,
               "cannot drain a runtime from inside one of its own callbacks (it would deadlock): return from the "
               "callback and drain after it");
    return -1;
  }
  if (st->freed) {
    fill_error(out_error, ErrorKind::InvalidState, "cannot drain: the runtime has been freed");
    return -1;
  }
  // Another thread draining at once may take what woke this one: wait again
  // while the timeout allows.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  int count = 0;
  for (;;) {
    int wait_ms = timeout_ms;
    if (timeout_ms > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(left.count(), 0));
    }
    if (timeout_ms <= 0 || wait_ms > 0) st->queue.wait(timeout_ms > 0 ? wait_ms : timeout_ms);
    std::lock_guard lk(st->dispatch_mu);
    std::deque<Event> batch = st->queue.take_all();
    if (!batch.empty()) {
      count = dispatch_batch(st, batch);
      break;
    }
    if (timeout_ms == 0 || st->freed || (timeout_ms > 0 && std::chrono::steady_clock::now() >= deadline)) break;
  }
  if (st->free_deferred) free_runtime(runtime);
  return count;
}

// A C registry entry as the core's; Config for a bad one (the core's messages).
ImageRegistry to_core(const BoxliteImageRegistry& c, int i) {
  auto opt = [](const char* s) { return s ? std::optional<std::string>(s) : std::nullopt; };
  ImageRegistry r;
  r.host = c.host ? c.host : "";
  unsigned raw = 0;  // a C caller may pass any int as the enum
  static_assert(sizeof raw == sizeof c.transport);
  std::memcpy(&raw, &c.transport, sizeof raw);
  if (raw != BoxliteRegistryTransportHttps && raw != BoxliteRegistryTransportHttp) {
    invalid("image_registries[" + std::to_string(i) +
            "].transport must be BoxliteRegistryTransportHttps or BoxliteRegistryTransportHttp");
  }
  r.transport = raw == BoxliteRegistryTransportHttp ? "http" : "https";
  r.skip_verify = c.skip_verify != 0;
  r.search = c.search != 0;
  r.username = opt(c.username);
  r.password = opt(c.password);
  r.bearer_token = opt(c.bearer_token);
  try {
    validate_image_registry(r);
  } catch (const Error& e) {
    throw with_context(e, "image_registries[" + std::to_string(i) + "]");
  }
  return r;
}

CImageInfoList* image_list(const std::vector<ImageInfo>& images) {
  auto* list = static_cast<CImageInfoList*>(std::calloc(1, sizeof(CImageInfoList)));
  if (!list) throw std::bad_alloc();
  if (!images.empty()) {
    list->items = static_cast<CImageInfo*>(std::calloc(images.size(), sizeof(CImageInfo)));
    if (!list->items) {
      std::free(list);
      throw std::bad_alloc();
    }
  }
  for (const auto& im : images) {
    CImageInfo& c = list->items[list->count++];
    c.reference = dup_string(im.reference);
    std::string repo = im.reference, tag;
    // "host/repo:tag" or "host/repo@sha256:..": the tag is after the last ':' past the last '/'.
    if (auto at = repo.find('@'); at != std::string::npos) {
      repo.resize(at);
    } else if (auto colon = repo.rfind(':'); colon != std::string::npos && colon > repo.rfind('/')) {
      tag = repo.substr(colon + 1);
      repo.resize(colon);
    }
    c.repository = dup_string(repo);
    c.tag = dup_string(tag);
    c.id = dup_string(im.manifest_digest);
    c.cached_at = im.created_ms / 1000;
    c.size = im.size;
    c.has_size = 1;
  }
  return list;
}

}  // namespace
}  // namespace boxlite::capi

using namespace boxlite;
using namespace boxlite::capi;

extern "C" {

const char* boxlite_version(void) { return BOXLITE_VERSION_STRING; }

BoxliteErrorCode boxlite_runtime_new(const char* home_dir, const BoxliteImageRegistry* image_registries,
                                     int image_registries_count, CBoxliteRuntime** out_runtime,
                                     CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(out_runtime, "out_runtime");
    *out_runtime = nullptr;
    if (image_registries_count < 0) invalid("image_registries_count is negative");
    if (image_registries_count > 0) require(image_registries, "image_registries (with image_registries_count > 0)");
    RuntimeOptions ro;
    for (int i = 0; i < image_registries_count; ++i) ro.image_registries.push_back(to_core(image_registries[i], i));
    if (home_dir && !*home_dir) invalid("home_dir is empty (pass NULL for the default)");
    if (home_dir) ro.home_dir = home_dir;
    auto st = std::make_shared<RuntimeState>();
    st->core = std::make_shared<Runtime>(ro);
    *out_runtime = new CBoxliteRuntime{std::move(st)};
  });
}

void boxlite_runtime_free(CBoxliteRuntime* runtime) {
  if (!runtime) return;
  try {
    if (tl_draining == runtime->st.get()) {
      runtime->st->free_deferred = true;  // drain finishes the job after this callback
      return;
    }
    free_runtime(runtime);
  } catch (...) {
    // Nothing may escape; what could not be stopped dies with the process.
  }
}

int boxlite_runtime_drain(CBoxliteRuntime* runtime, int timeout_ms, CBoxliteError* out_error) {
  try {
    return drain(runtime, timeout_ms, out_error);
  } catch (...) {
    fill_error(out_error, current_error());
    return -1;
  }
}

BoxliteErrorCode boxlite_runtime_shutdown(CBoxliteRuntime* runtime, int timeout_secs, CRuntimeShutdownCb cb,
                                          void* user_data, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(runtime, "runtime");
    require_cb(cb);
    if (timeout_secs < -1) {
      invalid("timeout_secs must be 0 (10 s), -1 (no limit) or positive, got " + std::to_string(timeout_secs));
    }
    auto st = runtime->st;
    if (st->freed) throw Error(ErrorKind::InvalidState, "cannot shut down: the runtime has been freed");
    st->shut_down = true;  // before returning: later operations fail fast
    std::optional<double> secs;
    if (timeout_secs != 0) secs = timeout_secs;
    st->pool.submit([st, secs, cb, user_data] {
      Outcome o = capture([&] { st->core->shutdown(secs); });
      st->post({[o, cb, user_data] { o.deliver([&](CBoxliteError* e) { cb(e, user_data); }); }, nullptr, nullptr, 0});
    });
  });
}

// ---------------------------------------------------------------- images

BoxliteErrorCode boxlite_runtime_images(CBoxliteRuntime* runtime, CBoxliteImageHandle** out_handle,
                                        CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(out_handle, "out_handle");
    *out_handle = nullptr;
    require(runtime, "runtime");
    runtime->st->check_open("use images");
    *out_handle = new CBoxliteImageHandle{runtime->st};
  });
}

BoxliteErrorCode boxlite_image_pull(CBoxliteImageHandle* handle, const char* image_ref, CBoxImagePullCb cb,
                                    void* user_data, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(handle, "handle");
    require_str(image_ref, "image_ref");
    require_cb(cb);
    auto st = handle->rt;
    st->check_open("pull " + std::string(image_ref));
    std::string ref = image_ref;
    st->pool.submit([st, ref, cb, user_data] {
      auto res = std::make_shared<PullResult>();
      Outcome out = capture([&] { *res = st->core->pull_image(ref); });
      st->post({[out, res, cb, user_data] {
                  if (!out.ok()) return out.deliver([&](CBoxliteError* e) { cb(nullptr, e, user_data); });
                  CImagePullResult c{};
                  c.reference = dup_string(res->reference);
                  c.config_digest = dup_string(res->manifest_digest);
                  c.layer_count = static_cast<int>(std::min<size_t>(res->layers, INT_MAX));
                  cb(&c, nullptr, user_data);
                  std::free(c.reference);
                  std::free(c.config_digest);
                },
                nullptr, nullptr, 0});
    });
  });
}

BoxliteErrorCode boxlite_image_list(CBoxliteImageHandle* handle, CBoxImageListCb cb, void* user_data,
                                    CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(handle, "handle");
    require_cb(cb);
    auto st = handle->rt;
    st->check_open("list images");
    st->pool.submit([st, cb, user_data] {
      auto images = std::make_shared<std::vector<ImageInfo>>();
      Outcome out = capture([&] { *images = st->core->list_images(); });
      st->post({[out, images, cb, user_data] {
                  if (!out.ok()) return out.deliver([&](CBoxliteError* e) { cb(nullptr, e, user_data); });
                  CImageInfoList* list = nullptr;
                  Outcome conv = capture([&] { list = image_list(*images); });
                  if (!conv.ok()) return conv.deliver([&](CBoxliteError* e) { cb(nullptr, e, user_data); });
                  cb(list, nullptr, user_data);
                  boxlite_free_image_info_list(list);
                },
                nullptr, nullptr, 0});
    });
  });
}

BoxliteErrorCode boxlite_runtime_metrics(CBoxliteRuntime* runtime, CRuntimeMetricsCb cb, void* user_data,
                                         CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(runtime, "runtime");
    require_cb(cb);
    auto st = runtime->st;
    if (st->freed)
      throw Error(ErrorKind::InvalidState, "cannot read the runtime's metrics: the runtime has been freed");
    st->pool.submit([st, cb, user_data] {
      auto m = std::make_shared<RuntimeMetrics>();
      Outcome out = capture([&] { *m = st->core->metrics(); });
      st->post({[out, m, cb, user_data] {
                  if (!out.ok()) return out.deliver([&](CBoxliteError* e) { cb(nullptr, e, user_data); });
                  CRuntimeMetrics c{};
                  c.boxes_created_total = clamp_int(m->boxes_created_total);
                  c.boxes_failed_total = clamp_int(m->boxes_failed_total);
                  c.num_running_boxes = clamp_int(m->num_running_boxes);
                  c.total_commands_executed = clamp_int(m->total_commands_executed);
                  c.total_exec_errors = clamp_int(m->total_exec_errors);
                  cb(&c, nullptr, user_data);
                },
                nullptr, nullptr, 0});
    });
  });
}

void boxlite_image_free(CBoxliteImageHandle* handle) { delete handle; }

// ---------------------------------------------------------------- freeing

void boxlite_error_free(CBoxliteError* error) {
  if (!error) return;
  std::free(error->message);
  error->message = nullptr;
  error->code = Ok;
}

void boxlite_free_string(char* s) { std::free(s); }

void boxlite_free_image_pull_result(CImagePullResult* result) {
  if (!result) return;
  std::free(result->reference);
  std::free(result->config_digest);
  std::free(result);
}

void boxlite_free_image_info_list(CImageInfoList* list) {
  if (!list) return;
  for (int i = 0; i < list->count; ++i) {
    std::free(list->items[i].reference);
    std::free(list->items[i].repository);
    std::free(list->items[i].tag);
    std::free(list->items[i].id);
  }
  std::free(list->items);
  std::free(list);
}

}  // extern "C"
