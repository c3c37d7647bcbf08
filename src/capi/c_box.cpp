// Boxes through the C API: create, get, start, stop, remove, info, copy.
#include <cstdlib>
#include <cstring>

#include "errors.hpp"
#include "options.hpp"
#include "state.hpp"

namespace boxlite::capi {

std::shared_ptr<Box> RuntimeState::lookup(const std::string& id_or_name) {
  BoxInfo info;
  try {
    info = core->get_info(id_or_name);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::NotFound) return nullptr;
    throw;
  }
  std::lock_guard lk(lookup_mu);
  // A handle invalidated by stop() is not handed out again: get gives a fresh one
  // (the documented "Use runtime.get() to get a new handle").
  if (auto box = cached_box(info.id); box && !box->invalidated()) return box;
  auto box = core->get(info.id);
  if (box) remember_box(box);
  return box;
}

namespace {

// A handle made on a worker for a create/get callback: deleted unless the
// callback took it (the event may be dropped when the runtime is freed).
class HandleOwner {
 public:
  explicit HandleOwner(CBoxHandle* h) : h_(h) {}
  ~HandleOwner() { delete h_; }
  HandleOwner(const HandleOwner&) = delete;
  HandleOwner& operator=(const HandleOwner&) = delete;
  CBoxHandle* release() { return std::exchange(h_, nullptr); }

 private:
  CBoxHandle* h_;
};

std::shared_ptr<HandleOwner> own_handle(const std::shared_ptr<RuntimeState>& st, std::shared_ptr<Box> box) {
  if (!box) return nullptr;
  return std::make_shared<HandleOwner>(new CBoxHandle{st, std::move(box)});
}

// Posts cb(handle or NULL, err, user_data) for a create/get.
// `token`: the handle the operation belongs to (clone), or null (create, get).
template <class Cb>
void post_handle(const std::shared_ptr<RuntimeState>& st, const Outcome& o, std::shared_ptr<Box> box, Cb cb,
                 void* user_data, std::shared_ptr<Token> token = nullptr) {
  auto owner = o.ok() ? own_handle(st, std::move(box)) : nullptr;
  st->post({[o, owner, cb, user_data] {
              CBoxHandle* h = owner ? owner->release() : nullptr;
              o.deliver([&](CBoxliteError* e) { cb(h, e, user_data); });
            },
            std::move(token), nullptr, 0});
}

// Posts cb(err, user_data) for an operation on a box handle.
template <class Cb>
void post_done(CBoxHandle* handle, const Outcome& o, Cb cb, void* user_data) {
  handle->rt->post(
      {[o, cb, user_data] { o.deliver([&](CBoxliteError* e) { cb(e, user_data); }); }, handle->token, nullptr, 0});
}

// A handle whose runtime still takes work; `verb` says what the call does to the
// box ("start", "copy into"), for "cannot start box <id>: ...".
void require_handle(CBoxHandle* h, const char* verb) {
  require(h, "handle");
  h->rt->check_open(std::string(verb) + " box " + h->box->id());
}

// A CBoxInfo's strings, malloc'ed; throws bad_alloc (after freeing) on failure.
void fill_info(CBoxInfo& c, const BoxInfo& i) {
  c = CBoxInfo{};
  c.id = dup_string(i.id);
  c.name = i.name.empty() ? nullptr : dup_string(i.name);
  c.image = dup_string(i.image);
  c.status = dup_string(box_state_name(i.status));
  c.running = i.status == BoxState::Running;
  c.pid = c.running ? i.shim_pid : 0;
  c.cpus = i.cpus;
  c.memory_mib = i.memory_mib;
  c.created_at = i.created_at_ms / 1000;
  if (!c.id || !c.image || !c.status || (!i.name.empty() && !c.name)) {
    std::free(c.id);
    std::free(c.name);
    std::free(c.image);
    std::free(c.status);
    throw std::bad_alloc();
  }
}

void free_info_fields(CBoxInfo& c) {
  std::free(c.id);
  std::free(c.name);
  std::free(c.image);
  std::free(c.status);
}

// Runs a box operation on a worker and posts its callback (arguments checked).
template <class Work, class Cb>
void submit_box_task(CBoxHandle* handle, Cb cb, void* user_data, Work work) {
  std::shared_ptr<Box> box = handle->box;
  handle->rt->pool.submit([rt = handle->rt, token = handle->token, box, work, cb, user_data] {
    Outcome o = capture([&] { work(*box); });
    rt->post({[o, cb, user_data] { o.deliver([&](CBoxliteError* e) { cb(e, user_data); }); }, token, nullptr, 0});
  });
}

template <class Work, class Cb>
BoxliteErrorCode box_op(CBoxHandle* handle, Cb cb, void* user_data, CBoxliteError* out_error, const char* op,
                        Work work) {
  return guard(out_error, [&] {
    require_handle(handle, op);
    require_cb(cb);
    submit_box_task(handle, cb, user_data, work);
  });
}

// Runs work(box) -> T on a worker; posts deliver(value) on success, cb(NULL, err)
// on failure (the callbacks that hand back a value).
template <class T, class Work, class Deliver, class Cb>
void submit_box_value(CBoxHandle* handle, Cb cb, void* user_data, Work work, Deliver deliver) {
  std::shared_ptr<Box> box = handle->box;
  handle->rt->pool.submit([rt = handle->rt, token = handle->token, box, work, deliver, cb, user_data] {
    auto value = std::make_shared<T>();
    Outcome out = capture([&] { *value = work(*box); });
    rt->post({[out, value, deliver, cb, user_data] {
                if (!out.ok()) return out.deliver([&](CBoxliteError* e) { cb(nullptr, e, user_data); });
                deliver(*value);
              },
              token, nullptr, 0});
  });
}

// Converts each item with fill (malloc'ed fields), hands cb a List{items, count},
// then frees what was filled; a failed conversion is cb(NULL, err).
template <class CItem, class CList, class Item, class Fill, class Free, class Cb>
void deliver_list(const std::vector<Item>& src, Fill fill, Free free_fields, Cb cb, void* user_data) {
  std::vector<CItem> items(src.size());
  size_t filled = 0;
  Outcome conv = capture([&] {
    for (; filled < items.size(); ++filled) fill(items[filled], src[filled]);
  });
  if (conv.ok()) {
    CList list{items.empty() ? nullptr : items.data(), static_cast<int>(items.size())};
    cb(&list, nullptr, user_data);
  } else {
    conv.deliver([&](CBoxliteError* e) { cb(nullptr, e, user_data); });
  }
  for (size_t i = 0; i < filled; ++i) free_fields(items[i]);
}

// Frees a malloc'ed {items, count} list the library handed out (NULL-safe).
template <class List, class FreeFields>
void free_list(List* list, FreeFields free_fields) {
  if (!list) return;
  for (int i = 0; i < list->count; ++i) free_fields(list->items[i]);
  std::free(list->items);
  std::free(list);
}

CBoxMetrics to_c_metrics(const BoxMetrics& m) {
  CBoxMetrics c{};
  c.cpu_percent = m.cpu_percent;
  c.memory_bytes = clamp_i64(m.memory_bytes);
  c.commands_executed = clamp_int(m.commands_executed_total);
  c.exec_errors = clamp_int(m.exec_errors_total);
  c.bytes_sent = clamp_i64(m.bytes_sent_total);
  c.bytes_received = clamp_i64(m.bytes_received_total);
  c.create_duration_ms = m.total_create_duration_ms;
  c.boot_duration_ms = m.guest_boot_duration_ms;
  c.network_bytes_sent = clamp_i64(m.network_bytes_sent);
  c.network_bytes_received = clamp_i64(m.network_bytes_received);
  c.network_tcp_connections = clamp_int(m.network_tcp_connections);
  c.network_tcp_errors = clamp_int(m.network_tcp_errors);
  return c;
}

}  // namespace
}  // namespace boxlite::capi

using namespace boxlite;
using namespace boxlite::capi;

extern "C" {

BoxliteErrorCode boxlite_create_box(CBoxliteRuntime* runtime, CBoxliteOptions* opts, CBoxCreateBoxCb cb,
                                    void* user_data, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "create a box";
    require(runtime, "runtime");
    require(opts, "opts");
    require_cb(cb);
    auto st = runtime->st;
    st->check_open(op);
    BoxOptions o = checked_options(*opts);
    std::string name = opts->name;
    st->pool.submit([st, o, name, cb, user_data] {
      std::shared_ptr<Box> box;
      Outcome out = capture([&] {
        box = st->core->create(o, name);
        st->remember_box(box);
      });
      post_handle(st, out, std::move(box), cb, user_data);
    });
  });
}

BoxliteErrorCode boxlite_get_or_create_box(CBoxliteRuntime* runtime, CBoxliteOptions* opts, CBoxGetOrCreateBoxCb cb,
                                           void* user_data, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "get or create a box";
    require(runtime, "runtime");
    require(opts, "opts");
    require_cb(cb);
    if (opts->name.empty()) invalid("the options have no name: get-or-create finds the box by its name, so set one");
    auto st = runtime->st;
    st->check_open(op);
    BoxOptions o = checked_options(*opts);
    std::string name = opts->name;
    st->pool.submit([st, o, name, cb, user_data] {
      std::shared_ptr<Box> box;
      bool created = false;
      Outcome out = capture([&] {
        box = st->lookup(name);
        if (box) return;
        try {
          box = st->core->create(o, name);
          st->remember_box(box);
          created = true;
        } catch (const Error& e) {
          if (e.kind() != ErrorKind::AlreadyExists) throw;
          box = st->lookup(name);  // another creator won the race
          if (!box) throw;
        }
      });
      auto owner = out.ok() ? own_handle(st, std::move(box)) : nullptr;
      st->post({[out, owner, created, cb, user_data] {
                  CBoxHandle* h = owner ? owner->release() : nullptr;
                  out.deliver([&](CBoxliteError* e) { cb(h, created ? 1 : 0, e, user_data); });
                },
                nullptr, nullptr, 0});
    });
  });
}

BoxliteErrorCode boxlite_start_box(CBoxHandle* handle, CBoxStartBoxCb cb, void* user_data, CBoxliteError* out_error) {
  return box_op(handle, cb, user_data, out_error, "start", [](Box& b) { b.start(); });
}

BoxliteErrorCode boxlite_stop_box(CBoxHandle* handle, CBoxStopBoxCb cb, void* user_data, CBoxliteError* out_error) {
  // Stopping is allowed after a runtime shutdown: it is what shutdown does anyway.
  return guard(out_error, [&] {
    require(handle, "handle");
    require_cb(cb);
    if (handle->rt->freed)
      throw Error(ErrorKind::InvalidState, "cannot stop box " + handle->box->id() + ": the runtime has been freed");
    submit_box_task(handle, cb, user_data, [](Box& b) { b.stop(); });
  });
}

BoxliteErrorCode boxlite_get(CBoxliteRuntime* runtime, const char* id_or_name, CBoxGetBoxCb cb, void* user_data,
                             CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "get a box";
    require(runtime, "runtime");
    require_str(id_or_name, "id_or_name");
    require_cb(cb);
    auto st = runtime->st;
    st->check_open(op);
    std::string id = id_or_name;
    st->pool.submit([st, id, cb, user_data] {
      std::shared_ptr<Box> box;
      Outcome out = capture([&] {
        box = st->lookup(id);
        if (!box) throw Error(ErrorKind::NotFound, "No such box: " + id);
      });
      post_handle(st, out, std::move(box), cb, user_data);
    });
  });
}

BoxliteErrorCode boxlite_remove(CBoxliteRuntime* runtime, const char* id_or_name, int force, CBoxRemoveBoxCb cb,
                                void* user_data, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "remove a box";
    require(runtime, "runtime");
    require_str(id_or_name, "id_or_name");
    require_cb(cb);
    auto st = runtime->st;
    st->check_open(op);
    std::string id = id_or_name;
    st->pool.submit([st, id, force, cb, user_data] {
      Outcome out = capture([&] {
        BoxInfo info = st->core->get_info(id);
        // A box this runtime handed out is removed through its own Box, which
        // owns its shim; the core's remove would reach it through a second one.
        if (auto box = st->cached_box(info.id)) {
          if (box->state() == BoxState::Running && !force) {
            throw Error(ErrorKind::InvalidState,
                        "box " + info.id + " is running: stop it first, or remove it with force");
          }
          st->core->prepare_remove(info.id, force != 0);  // clone dependencies, as remove checks them
          box->destroy();
        } else {
          st->core->remove(info.id, force != 0);
        }
      });
      st->post(
          {[out, cb, user_data] { out.deliver([&](CBoxliteError* e) { cb(e, user_data); }); }, nullptr, nullptr, 0});
    });
  });
}

BoxliteErrorCode boxlite_get_info(CBoxliteRuntime* runtime, const char* id_or_name, CBoxInfoCb cb, void* user_data,
                                  CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(runtime, "runtime");
    require_str(id_or_name, "id_or_name");
    require_cb(cb);
    auto st = runtime->st;
    if (st->freed) throw Error(ErrorKind::InvalidState, "cannot get a box's info: the runtime has been freed");
    std::string id = id_or_name;
    st->pool.submit([st, id, cb, user_data] {
      auto info = std::make_shared<BoxInfo>();
      Outcome out = capture([&] { *info = st->core->get_info(id); });
      st->post({[out, info, cb, user_data] {
                  if (!out.ok()) return out.deliver([&](CBoxliteError* e) { cb(nullptr, e, user_data); });
                  CBoxInfo c;
                  Outcome conv = capture([&] { fill_info(c, *info); });
                  if (!conv.ok()) return conv.deliver([&](CBoxliteError* e) { cb(nullptr, e, user_data); });
                  cb(&c, nullptr, user_data);
                  free_info_fields(c);
                },
                nullptr, nullptr, 0});
    });
  });
}

BoxliteErrorCode boxlite_box_metrics(CBoxHandle* handle, CBoxMetricsCb cb, void* user_data, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "read the metrics of";
    require_handle(handle, op);
    require_cb(cb);
    submit_box_value<BoxMetrics>(
        handle, cb, user_data, [](Box& b) { return b.metrics(); },
        [cb, user_data](const BoxMetrics& m) {
          CBoxMetrics c = to_c_metrics(m);
          cb(&c, nullptr, user_data);
        });
  });
}

BoxliteErrorCode boxlite_box_metrics_ex(CBoxHandle* handle, CBoxMetricsExCb cb, void* user_data,
                                        CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "read the metrics of";
    require_handle(handle, op);
    require_cb(cb);
    submit_box_value<BoxMetrics>(
        handle, cb, user_data, [](Box& b) { return b.metrics(); },
        [cb, user_data](const BoxMetrics& m) {
          CBoxMetricsEx x{};
          x.struct_size = sizeof x;
          x.base = to_c_metrics(m);
          auto stage = [](const std::optional<int64_t>& v) { return v.value_or(-1); };
          x.stage_filesystem_setup_ms = stage(m.stage_filesystem_setup_ms);
          x.stage_image_prepare_ms = stage(m.stage_image_prepare_ms);
          x.stage_guest_rootfs_ms = stage(m.stage_guest_rootfs_ms);
          x.stage_box_spawn_ms = stage(m.stage_box_spawn_ms);
          x.stage_container_init_ms = stage(m.stage_container_init_ms);
          x.commands_executed_total = m.commands_executed_total;
          x.exec_errors_total = m.exec_errors_total;
          cb(&x, nullptr, user_data);
        });
  });
}

BoxliteErrorCode boxlite_list_info(CBoxliteRuntime* runtime, CBoxInfoListCb cb, void* user_data,
                                   CBoxliteError* out_error) {
  return guard(out_error, [&] {
    require(runtime, "runtime");
    require_cb(cb);
    auto st = runtime->st;
    if (st->freed) throw Error(ErrorKind::InvalidState, "cannot list boxes: the runtime has been freed");
    st->pool.submit([st, cb, user_data] {
      auto infos = std::make_shared<std::vector<BoxInfo>>();
      Outcome out = capture([&] { *infos = st->core->list_info(); });
      st->post({[out, infos, cb, user_data] {
                  if (!out.ok()) return out.deliver([&](CBoxliteError* e) { cb(nullptr, e, user_data); });
                  deliver_list<CBoxInfo, CBoxInfoList>(*infos, fill_info, free_info_fields, cb, user_data);
                },
                nullptr, nullptr, 0});
    });
  });
}

char* boxlite_box_id(CBoxHandle* handle) {
  if (!handle) return nullptr;
  return dup_string(handle->box->id());
}

CBoxInfo* boxlite_box_info(CBoxHandle* handle) {
  if (!handle) return nullptr;
  try {
    BoxInfo info = handle->rt->core->get_info(handle->box->id());
    auto* c = static_cast<CBoxInfo*>(std::calloc(1, sizeof(CBoxInfo)));
    if (!c) return nullptr;
    try {
      fill_info(*c, info);
    } catch (...) {
      std::free(c);
      return nullptr;
    }
    return c;
  } catch (...) {
    return nullptr;
  }
}

void boxlite_box_free(CBoxHandle* handle) {
  if (!handle) return;
  handle->token->cancelled = true;
  try {
    delete handle;  // the last reference to an auto_remove box removes it (core ~Box)
  } catch (...) {
  }
}

namespace {

// copy_into and copy_out: the same checks, one direction each.
BoxliteErrorCode submit_copy(const char* op, const char* src_name, const char* dst_name, CBoxHandle* handle,
                             const char* src, const char* dst, CBoxCopyCb cb, void* user_data, CBoxliteError* out_error,
                             void (Box::*copy)(const std::string&, const std::string&, const CopyOptions&),
                             CopyOptions opts = {}) {
  return guard(out_error, [&] {
    require_str(src, src_name);
    require_str(dst, dst_name);
    require_handle(handle, op);
    require_cb(cb);
    submit_box_task(handle, cb, user_data, [from = std::string(src), to = std::string(dst), copy, opts](Box& b) {
      (b.*copy)(from, to, opts);
    });
  });
}

}  // namespace

BoxliteErrorCode boxlite_copy_into(CBoxHandle* handle, const char* host_src, const char* guest_dst, CBoxCopyCb cb,
                                   void* user_data, CBoxliteError* out_error) {
  return submit_copy("copy into", "host_src", "guest_dst", handle, host_src, guest_dst, cb, user_data, out_error,
                     &Box::copy_in);
}

BoxliteErrorCode boxlite_copy_out(CBoxHandle* handle, const char* guest_src, const char* host_dst, CBoxCopyCb cb,
                                  void* user_data, CBoxliteError* out_error) {
  return submit_copy("copy out of", "guest_src", "host_dst", handle, guest_src, host_dst, cb, user_data, out_error,
                     &Box::copy_out);
}

BoxliteErrorCode boxlite_copy_into_with(CBoxHandle* handle, const char* host_src, const char* guest_dst, int overwrite,
                                        int follow_symlinks, int include_parent, CBoxCopyCb cb, void* user_data,
                                        CBoxliteError* out_error) {
  return submit_copy("copy into", "host_src", "guest_dst", handle, host_src, guest_dst, cb, user_data, out_error,
                     &Box::copy_in, CopyOptions{overwrite != 0, follow_symlinks != 0, include_parent != 0});
}

BoxliteErrorCode boxlite_copy_out_with(CBoxHandle* handle, const char* guest_src, const char* host_dst, int overwrite,
                                       int follow_symlinks, int include_parent, CBoxCopyCb cb, void* user_data,
                                       CBoxliteError* out_error) {
  return submit_copy("copy out of", "guest_src", "host_dst", handle, guest_src, host_dst, cb, user_data, out_error,
                     &Box::copy_out, CopyOptions{overwrite != 0, follow_symlinks != 0, include_parent != 0});
}

void boxlite_free_box_info(CBoxInfo* info) {
  if (!info) return;
  free_info_fields(*info);
  std::free(info);
}

void boxlite_free_box_info_list(CBoxInfoList* list) { free_list(list, free_info_fields); }

}  // extern "C"

// ---------------------------------------------------------------- snapshots, clone, export, import
// Additions (docs/c-api.md): the core's box.snapshot, clone_box, export_box and
// import_box (core/snapshots.hpp, docs/storage.md), post-and-drain like the rest.

namespace boxlite::capi {
namespace {

void free_snapshot_fields(CSnapshotInfo& c) {
  std::free(c.id);
  std::free(c.box_id);
  std::free(c.name);
  c.id = c.box_id = c.name = nullptr;
}

// A CSnapshotInfo's strings, malloc'ed; throws bad_alloc (after freeing) on failure.
void fill_snapshot(CSnapshotInfo& c, const SnapshotInfo& s) {
  c = CSnapshotInfo{};
  c.id = dup_string(s.id);
  c.box_id = dup_string(s.box_id);
  c.name = dup_string(s.name);
  c.created_at = s.created_at;
  c.container_disk_bytes = s.container_disk_bytes;
  c.size_bytes = s.size_bytes;
  if (!c.id || !c.box_id || !c.name) {
    free_snapshot_fields(c);
    throw std::bad_alloc();
  }
}

// Runs work(box) -> optional<SnapshotInfo> on a worker; posts cb(info or NULL, err).
template <class Work>
BoxliteErrorCode snapshot_info_op(CBoxHandle* handle, CSnapshotInfoCb cb, void* user_data, CBoxliteError* out_error,
                                  const char* op, Work work) {
  return guard(out_error, [&] {
    require_handle(handle, op);
    require_cb(cb);
    submit_box_value<std::optional<SnapshotInfo>>(
        handle, cb, user_data, work, [cb, user_data](const std::optional<SnapshotInfo>& info) {
          if (!info) return cb(nullptr, nullptr, user_data);
          CSnapshotInfo c;
          Outcome conv = capture([&] { fill_snapshot(c, *info); });
          if (!conv.ok()) return conv.deliver([&](CBoxliteError* e) { cb(nullptr, e, user_data); });
          cb(&c, nullptr, user_data);
          free_snapshot_fields(c);
        });
  });
}

}  // namespace
}  // namespace boxlite::capi

extern "C" {

BoxliteErrorCode boxlite_box_snapshot_create(CBoxHandle* handle, const char* name, CSnapshotInfoCb cb, void* user_data,
                                             CBoxliteError* out_error) {
  const char* op = "snapshot";
  BoxliteErrorCode c = guard(out_error, [&] { require_str(name, "name"); });
  if (c != Ok) return c;
  return snapshot_info_op(handle, cb, user_data, out_error, op, [n = std::string(name)](Box& b) {
    return std::optional<SnapshotInfo>(b.snapshot().create(n));
  });
}

BoxliteErrorCode boxlite_box_snapshot_get(CBoxHandle* handle, const char* name, CSnapshotInfoCb cb, void* user_data,
                                          CBoxliteError* out_error) {
  const char* op = "read the snapshots of";
  BoxliteErrorCode c = guard(out_error, [&] { require_str(name, "name"); });
  if (c != Ok) return c;
  return snapshot_info_op(handle, cb, user_data, out_error, op,
                          [n = std::string(name)](Box& b) { return b.snapshot().get(n); });
}

BoxliteErrorCode boxlite_box_snapshot_list(CBoxHandle* handle, CSnapshotInfoListCb cb, void* user_data,
                                           CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "read the snapshots of";
    require_handle(handle, op);
    require_cb(cb);
    submit_box_value<std::vector<SnapshotInfo>>(
        handle, cb, user_data, [](Box& b) { return b.snapshot().list(); },
        [cb, user_data](const std::vector<SnapshotInfo>& infos) {
          deliver_list<CSnapshotInfo, CSnapshotInfoList>(infos, fill_snapshot, free_snapshot_fields, cb, user_data);
        });
  });
}

BoxliteErrorCode boxlite_box_snapshot_remove(CBoxHandle* handle, const char* name, CBoxSnapshotDoneCb cb,
                                             void* user_data, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "remove a snapshot of";
    require_str(name, "name");
    require_handle(handle, op);
    require_cb(cb);
    submit_box_task(handle, cb, user_data, [n = std::string(name)](Box& b) { b.snapshot().remove(n); });
  });
}

BoxliteErrorCode boxlite_box_snapshot_restore(CBoxHandle* handle, const char* name, CBoxSnapshotDoneCb cb,
                                              void* user_data, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "restore a snapshot of";
    require_str(name, "name");
    require_handle(handle, op);
    require_cb(cb);
    submit_box_task(handle, cb, user_data, [n = std::string(name)](Box& b) { b.snapshot().restore(n); });
  });
}

BoxliteErrorCode boxlite_box_clone(CBoxHandle* handle, const char* name, CBoxCreateBoxCb cb, void* user_data,
                                   CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "clone";
    require_handle(handle, op);
    require_cb(cb);
    auto st = handle->rt;
    std::string n = name ? name : "";
    std::shared_ptr<Box> source = handle->box;
    st->pool.submit([st, token = handle->token, source, n, cb, user_data] {
      std::shared_ptr<Box> box;
      Outcome out = capture([&] {
        box = st->core->clone_box(*source, n);
        st->remember_box(box);
      });
      post_handle(st, out, std::move(box), cb, user_data, token);
    });
  });
}

BoxliteErrorCode boxlite_box_export(CBoxHandle* handle, const char* dest_dir, CBoxExportCb cb, void* user_data,
                                    CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "export";
    require_str(dest_dir, "dest_dir");
    require_handle(handle, op);
    require_cb(cb);
    submit_box_value<std::string>(
        handle, cb, user_data,
        [st = handle->rt, dest = std::string(dest_dir)](Box& b) { return st->core->export_box(b, dest); },
        [cb, user_data](const std::string& path) { cb(path.c_str(), nullptr, user_data); });
  });
}

BoxliteErrorCode boxlite_runtime_import_box(CBoxliteRuntime* runtime, const char* archive_path, const char* name,
                                            CBoxCreateBoxCb cb, void* user_data, CBoxliteError* out_error) {
  return guard(out_error, [&] {
    const char* op = "import a box";
    require(runtime, "runtime");
    require_str(archive_path, "archive_path");
    require_cb(cb);
    auto st = runtime->st;
    st->check_open(op);
    std::string path = archive_path, n = name ? name : "";
    st->pool.submit([st, path, n, cb, user_data] {
      std::shared_ptr<Box> box;
      Outcome out = capture([&] {
        box = st->core->import_box(path, n);
        st->remember_box(box);
      });
      post_handle(st, out, std::move(box), cb, user_data);
    });
  });
}

void boxlite_free_snapshot_info(CSnapshotInfo* info) {
  if (!info) return;
  free_snapshot_fields(*info);
  std::free(info);
}

void boxlite_free_snapshot_info_list(CSnapshotInfoList* list) { free_list(list, free_snapshot_fields); }

}  // extern "C"
