"""The async layer: one drain thread per runtime turns C callbacks into asyncio results.

The C API is post-and-drain: callbacks run only inside boxlite_runtime_drain. A
dedicated thread blocks in drain(-1) (no polling); each callback copies what it
needs and hands it to the waiting asyncio loop with call_soon_threadsafe. Calls
that block in C (boxlite_box_exec_streamed, which may boot the box) run in the
loop's default executor.
"""
import asyncio
import ctypes
import itertools
import threading

from . import _ffi
from ._ffi import lib
from .errors import from_code

_lock = threading.Lock()
_pending = {}  # key -> handler(kind, *args), called on a drain thread
_keys = itertools.count(1)


def register(handler, once=True):
    key = next(_keys)
    with _lock:
        _pending[key] = (handler, once)
    return key


def unregister(key):
    with _lock:
        _pending.pop(key, None)


def _dispatch(key, *args):
    with _lock:
        entry = _pending.get(key)
        if entry and entry[1]:
            del _pending[key]
    if entry:
        try:
            entry[0](*args)
        except Exception:  # a callback must never raise into C
            import traceback
            traceback.print_exc()


def _err(errp):
    return _ffi.read_error(errp) if errp else None


# One static C callback per signature; user_data is the key of the handler.
@_ffi.BoxCb
def _box_cb(box, errp, ud):
    _dispatch(ud, box, _err(errp))


@_ffi.GetOrCreateCb
def _goc_cb(box, created, errp, ud):
    _dispatch(ud, (box, bool(created)), _err(errp))


@_ffi.DoneCb
def _done_cb(errp, ud):
    _dispatch(ud, None, _err(errp))


@_ffi.WaitCb
def _wait_cb(code, errp, ud):
    _dispatch(ud, code, _err(errp))


def _copy_struct(s):
    out = {}
    for name, _ in s._fields_:
        v = getattr(s, name)
        out[name] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return out


def _value_cb(cb_type, convert):
    """A callback handing back one struct (or NULL with an error), converted."""
    @cb_type
    def cb(p, errp, ud):
        _dispatch(ud, convert(p.contents) if p else None, _err(errp))
    return cb


def _list_cb(cb_type, convert):
    """A callback handing back a {items, count} list (or NULL with an error)."""
    @cb_type
    def cb(lst, errp, ud):
        items = [convert(lst.contents.items[i]) for i in range(lst.contents.count)] if lst else None
        _dispatch(ud, items, _err(errp))
    return cb


_info_cb = _value_cb(_ffi.InfoCb, _copy_struct)
_info_list_cb = _list_cb(_ffi.InfoListCb, _copy_struct)
_box_metrics_cb = _value_cb(_ffi.BoxMetricsCb, _copy_struct)


@_ffi.BoxMetricsExCb
def _box_metrics_ex_cb(m, errp, ud):
    d = None
    if m:
        x = m.contents
        d = _copy_struct(x.base)
        for name, _ in x._fields_[2:]:
            f = getattr(_ffi.CBoxMetricsEx, name)
            if f.offset + f.size <= x.struct_size:  # filled by this library version
                d[name] = getattr(x, name)
    _dispatch(ud, d, _err(errp))


_rt_metrics_cb = _value_cb(_ffi.RuntimeMetricsCb, _copy_struct)
_pull_cb = _value_cb(_ffi.PullCb, _copy_struct)
_image_list_cb = _list_cb(_ffi.ImageListCb, _copy_struct)
_snapshot_info_cb = _value_cb(_ffi.SnapshotInfoCb, _copy_struct)
_snapshot_list_cb = _list_cb(_ffi.SnapshotInfoListCb, _copy_struct)


@_ffi.ExportCb
def _export_cb(path, errp, ud):
    _dispatch(ud, path.decode("utf-8", "replace") if path is not None else None, _err(errp))


def _stream_cb(tag):
    @_ffi.OutputCb
    def cb(data, n, ud):
        chunk = ctypes.string_at(data, n)
        with _lock:
            entry = _pending.get(ud)
        if entry:
            entry[0](tag, chunk)
    return cb


stdout_cb = _stream_cb("stdout")
stderr_cb = _stream_cb("stderr")
CALLBACKS = {"box": _box_cb, "get_or_create": _goc_cb, "done": _done_cb, "wait": _wait_cb, "info": _info_cb,
             "info_list": _info_list_cb, "box_metrics": _box_metrics_cb, "box_metrics_ex": _box_metrics_ex_cb, "runtime_metrics": _rt_metrics_cb,
             "pull": _pull_cb, "image_list": _image_list_cb, "snapshot_info": _snapshot_info_cb,
             "snapshot_list": _snapshot_list_cb, "export": _export_cb}


class Drainer:
    """The drain thread of one CBoxliteRuntime."""

    def __init__(self, rt_ptr):
        self.rt = rt_ptr
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="boxlite-drain", daemon=True)
        self._thread.start()

    def _run(self):
        err = _ffi.CBoxliteError()
        while not self._stop:
            if lib.boxlite_runtime_drain(self.rt, -1, ctypes.byref(err)) < 0:
                _ffi.take_error(err)
                return

    def stop(self):
        """Ends the thread: a metrics request is the event that wakes drain(-1)."""
        if self._stop:
            return
        self._stop = True
        key = register(lambda *a: None)
        err = _ffi.CBoxliteError()
        if lib.boxlite_runtime_metrics(self.rt, _rt_metrics_cb, key, ctypes.byref(err)) != 0:
            _ffi.take_error(err)
            unregister(key)
        if threading.current_thread() is not self._thread:
            self._thread.join()


def exception_of(err):
    """The typed exception (boxlite.errors) of a filled CBoxliteError, freeing its message."""
    return from_code(*_ffi.take_error(err))


def check(code, err):
    """Raises for a non-Ok synchronous return."""
    if code != 0:
        raise exception_of(err)


def future_handler(loop, fut, convert=lambda v: v):
    """A handler that resolves an asyncio future from the drain thread."""
    def handler(value, error):
        if error is not None:
            exc = from_code(*error)
            result = None
        else:
            exc = None
            try:
                result = convert(value)
            except Exception as e:  # noqa: BLE001 - handed to the awaiting task
                exc = e

        def resolve():
            if fut.done():
                return
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)
        try:
            loop.call_soon_threadsafe(resolve)
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more
    return handler


async def call_async(start, kind, convert=lambda v: v):
    """Runs start(cb, key, errp) (a C call that posts one callback) and awaits it."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    key = register(future_handler(loop, fut, convert))
    err = _ffi.CBoxliteError()
    code = start(CALLBACKS[kind], key, ctypes.byref(err))
    if code != 0:
        unregister(key)
        raise exception_of(err)
    return await fut


def call_sync(start, kind):
    """The same, blocking the calling thread (for synchronous methods such as __exit__)."""
    done = threading.Event()
    box = {}

    def handler(value, error):
        box["value"], box["error"] = value, error
        done.set()
    key = register(handler)
    err = _ffi.CBoxliteError()
    code = start(CALLBACKS[kind], key, ctypes.byref(err))
    if code != 0:
        unregister(key)
        raise exception_of(err)
    done.wait()
    if box["error"] is not None:
        raise from_code(*box["error"])
    return box["value"]
