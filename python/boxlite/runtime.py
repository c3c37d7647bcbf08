"""Boxlite (the runtime), the native Box and Execution, info and metrics types."""
import asyncio
import atexit
import codecs
import ctypes
import os
import queue
import threading
import warnings
from dataclasses import dataclass
from typing import Optional

from . import _bridge, _ffi
from ._ffi import lib
from .errors import SPAWN_FAILURES, NotFoundError, from_kind
from .options import BoxOptions, CloneOptions, ExportOptions, Options, SnapshotOptions


async def _none_if_not_found(call):
    """The call's result, or None when it failed with NotFound (get and get_info
    return None for an absent box, as documented)."""
    try:
        return await call
    except NotFoundError:
        return None


class AsyncStartStop:
    """`async with x:` starts x on entry and stops it on exit (Box, SimpleBox, the
    executor)."""

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.stop()
        return False


class BoxStateInfo:
    """`BoxInfo.state`: status (str: "configured", "running", "stopped", ...), running
    (bool) and pid (int, or None without a process). For code written against the
    plain status string it was before, str() of it is the status and it compares
    equal to its status string (`info.state == "running"`)."""

    __slots__ = ("status", "running", "pid")

    def __init__(self, status: str, running: bool, pid: Optional[int]):
        self.status = status
        self.running = bool(running)
        self.pid = pid

    def __str__(self):
        return self.status

    def __repr__(self):
        return f"BoxStateInfo(status={self.status!r}, running={self.running!r}, pid={self.pid!r})"

    def __eq__(self, other):
        if isinstance(other, str):
            return self.status == other
        if isinstance(other, BoxStateInfo):
            return (self.status, self.running, self.pid) == (other.status, other.running, other.pid)
        return NotImplemented

    def __hash__(self):
        return hash(self.status)


@dataclass
class BoxInfo:
    """A box's info: `state` is a BoxStateInfo (`info.state.status` is the status
    string); status, running and pid are also fields of their own, as before.

    Awaitable (`await box.info()` gives the BoxInfo itself): the reference calls the
    native Box.info() both with and without await, so both work."""
    id: str
    name: Optional[str]
    image: str
    status: str
    running: bool
    pid: int
    cpus: int
    memory_mib: int
    created_at: int

    @classmethod
    def _from(cls, d):
        return cls(d["id"], d["name"], d["image"], d["status"], bool(d["running"]), d["pid"], d["cpus"],
                   d["memory_mib"], d["created_at"])

    @property
    def state(self) -> BoxStateInfo:
        return BoxStateInfo(self.status, self.running, self.pid if self.pid and self.pid > 0 else None)

    def __await__(self):
        return self
        yield  # noqa: unreachable - makes this a generator: `await info` is info


@dataclass
class BoxMetrics:
    """Documented names, from the C API's CBoxMetricsEx (boxlite_box_metrics_ex). A
    stage_*_ms that did not happen (a box never started; guest_rootfs on a jail box,
    which has no disk image) is None."""
    cpu_percent: float
    memory_bytes: int
    commands_executed_total: int
    exec_errors_total: int
    bytes_sent_total: int
    bytes_received_total: int
    total_create_duration_ms: int
    guest_boot_duration_ms: int
    network_bytes_sent: int
    network_bytes_received: int
    network_tcp_connections: int
    network_tcp_errors: int
    stage_filesystem_setup_ms: Optional[int] = None
    stage_image_prepare_ms: Optional[int] = None
    stage_guest_rootfs_ms: Optional[int] = None
    stage_box_spawn_ms: Optional[int] = None
    stage_container_init_ms: Optional[int] = None

    @classmethod
    def _from(cls, d):
        def stage(name):
            v = d.get(name, -1)
            return None if v < 0 else v
        return cls(d["cpu_percent"], d["memory_bytes"], d.get("commands_executed_total", d["commands_executed"]),
                   d.get("exec_errors_total", d["exec_errors"]), d["bytes_sent"], d["bytes_received"],
                   d["create_duration_ms"], d["boot_duration_ms"], d["network_bytes_sent"],
                   d["network_bytes_received"], d["network_tcp_connections"], d["network_tcp_errors"],
                   stage("stage_filesystem_setup_ms"), stage("stage_image_prepare_ms"),
                   stage("stage_guest_rootfs_ms"), stage("stage_box_spawn_ms"), stage("stage_container_init_ms"))


@dataclass
class RuntimeMetrics:
    num_running_boxes: int
    boxes_created_total: int
    boxes_failed_total: int
    total_commands_executed: int
    total_exec_errors: int

    @classmethod
    def _from(cls, d):
        return cls(d["num_running_boxes"], d["boxes_created_total"], d["boxes_failed_total"],
                   d["total_commands_executed"], d["total_exec_errors"])


@dataclass
class ImageInfo:
    reference: str
    repository: str
    tag: str
    id: str
    cached_at: int
    size: Optional[int]


@dataclass
class ImagePullResult:
    reference: str
    config_digest: str
    layer_count: int


@dataclass
class SnapshotInfo:
    """A snapshot of a box's disk: created_at in Unix seconds; container_disk_bytes the
    box disk's size when it was taken; size_bytes the host bytes the snapshot takes."""
    id: str
    box_id: str
    name: str
    created_at: int
    container_disk_bytes: int
    size_bytes: int

    @classmethod
    def _from(cls, d):
        return cls(d["id"], d["box_id"], d["name"], d["created_at"], d["container_disk_bytes"], d["size_bytes"])


def _check_options(options, cls, where):
    if options is not None and not isinstance(options, cls):
        raise TypeError(f"{where}: argument 'options': expected {cls.__name__} or None, "
                        f"not {type(options).__name__}")


def _check_str(value, where, arg, optional=False):
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise TypeError(f"{where}: argument '{arg}': expected str, not {type(value).__name__}")


class SnapshotHandle:
    """`box.snapshot`: a box's disk snapshots. Every method is async (create, list,
    get, remove, restore); the arguments are checked when it is called."""

    def __init__(self, box):
        self._box = box

    def __repr__(self):
        return f"SnapshotHandle(box_id={self._box.id!r})"

    def create(self, *args, options: Optional[SnapshotOptions] = None, name: str = None):
        """Snapshots the box's disk (running or stopped): `await box.snapshot.create(name="v1")`
        returns its SnapshotInfo. name is keyword-only."""
        if args:
            n = len(args)
            raise TypeError(f"SnapshotHandle.create() takes 0 positional arguments but {n} "
                            f"{'was' if n == 1 else 'were'} given")
        if name is None:
            raise TypeError("SnapshotHandle.create() missing 1 required keyword-only argument: 'name'")
        _check_str(name, "SnapshotHandle.create()", "name")
        _check_options(options, SnapshotOptions, "SnapshotHandle.create()")
        return self._create(name)

    async def _create(self, name):
        box = self._box
        d = await _bridge.call_async(lambda cb, key, e: lib.boxlite_box_snapshot_create(
            box._handle(), _ffi.cstr(name), cb, key, e), "snapshot_info")
        return SnapshotInfo._from(d)

    def list(self):
        """The box's snapshots, oldest first (list[SnapshotInfo])."""
        return self._list()

    async def _list(self):
        box = self._box
        items = await _bridge.call_async(lambda cb, key, e: lib.boxlite_box_snapshot_list(box._handle(), cb, key, e),
                                         "snapshot_list")
        return [SnapshotInfo._from(d) for d in items]

    def get(self, name: str):
        """The SnapshotInfo named `name`, or None when there is none."""
        _check_str(name, "SnapshotHandle.get()", "name")
        return self._get(name)

    async def _get(self, name):
        box = self._box
        d = await _bridge.call_async(lambda cb, key, e: lib.boxlite_box_snapshot_get(
            box._handle(), _ffi.cstr(name), cb, key, e), "snapshot_info")
        return SnapshotInfo._from(d) if d is not None else None

    def remove(self, name: str):
        """Removes the snapshot (RuntimeError "... current disk depends on this
        snapshot..." when the box's disk grows over it)."""
        _check_str(name, "SnapshotHandle.remove()", "name")
        return self._done("boxlite_box_snapshot_remove", name, None)

    def restore(self, name: str):
        """Puts the box's disk back to the snapshot; the box must be stopped
        (RuntimeError "... Cannot restore snapshot while box is running. Stop the box
        first."). Returns ()."""
        _check_str(name, "SnapshotHandle.restore()", "name")
        return self._done("boxlite_box_snapshot_restore", name, ())

    async def _done(self, fn, name, result):
        box = self._box
        await _bridge.call_async(lambda cb, key, e: getattr(lib, fn)(box._handle(), _ffi.cstr(name), cb, key, e),
                                 "done")
        return result


_default = None
_default_lock = threading.Lock()


class _Reaper:
    """Frees native handles on a thread of its own.

    A Box or Execution dropped by the garbage collector may be finalised on any
    thread: on the drain thread (where a blocking free could wait for the drain
    itself) or on the event loop (where freeing the last handle of an auto_remove
    box stops and removes it, seconds of blocking). __del__ only queues the pointer
    (SimpleQueue.put is safe in a finaliser); this thread calls the C free."""

    def __init__(self):
        self._q = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="boxlite-reaper", daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            fn, arg = self._q.get()
            try:
                fn(arg)
            except Exception:  # noqa: BLE001 - a free must never kill the reaper
                import traceback
                traceback.print_exc()

    def free(self, fn, ptr):
        self._q.put((fn, ptr))

    def flush(self, timeout=None):
        """Waits until what was queued before this call has been freed."""
        if threading.current_thread() is self._thread:
            return True
        done = threading.Event()
        self._q.put((lambda ev: ev.set(), done))
        return done.wait(timeout)


_reaper = _Reaper()


@atexit.register
def _close_default():
    if _default is not None:
        _default.close()


@atexit.register  # runs before _close_default (atexit is last-in, first-out)
def _flush_reaper():
    _reaper.flush(timeout=60)


class VolumeManager:
    """`rt.volumes`: the managed-volume API documented for REST runtimes (create,
    list, get, remove). A local runtime has no volume backend (as documented) and
    boxlite has no REST runtime yet, so each call raises UnsupportedError (a
    RuntimeError) naming it. Host directories are shared with BoxOptions(volumes=...)."""

    _WHY = ("managed volumes need a REST runtime (Boxlite.rest), which boxlite does not have yet; "
            "a local runtime has no volume backend: share a host directory with BoxOptions(volumes=[(host, guest)])")

    def __init__(self, runtime):
        self._runtime = runtime

    def _refuse(self, op):
        raise from_kind("Unsupported", f"rt.volumes.{op}() is not supported: {self._WHY}")

    async def create(self, name: Optional[str] = None):
        self._refuse("create")

    async def list(self):
        self._refuse("list")

    async def get(self, volume_id: str):
        self._refuse("get")

    async def remove(self, volume_id: str, force: bool = False):
        self._refuse("remove")


class Boxlite:
    """The runtime: a synchronous context manager whose methods are async."""

    def __init__(self, options: Optional[Options] = None):
        options = options or Options()
        regs = options.image_registries or []
        arr = (_ffi.BoxliteImageRegistry * max(len(regs), 1))()
        keep = []
        for i, r in enumerate(regs):
            fields = [_ffi.cstr(x) for x in (r.host, r.username, r.password, r.bearer_token)]
            keep.extend(fields)
            arr[i] = _ffi.BoxliteImageRegistry(fields[0], 1 if r.transport == "http" else 0, int(r.skip_verify),
                                               int(r.search), fields[1], fields[2], fields[3])
        out = ctypes.c_void_p()
        err = _ffi.CBoxliteError()
        home = os.fspath(options.home_dir) if options.home_dir else None
        _bridge.check(lib.boxlite_runtime_new(_ffi.cstr(home), arr, len(regs), ctypes.byref(out), ctypes.byref(err)),
                      err)
        self._rt = out.value
        self._drainer = _bridge.Drainer(self._rt)
        self._closed = False
        self._shut_down = False

    @classmethod
    def rest(cls, options=None):
        """The documented REST runtime (Boxlite.rest(BoxliteRestOptions(...))): boxlite
        has no REST client or server yet, so this raises UnsupportedError (a
        RuntimeError) naming it, rather than return a local runtime in its place."""
        raise from_kind("Unsupported", "Boxlite.rest() is not supported: boxlite has no REST runtime (client or "
                                       "server) yet; use a local runtime, Boxlite(Options(...)) or Boxlite.default()")

    @classmethod
    def default(cls):
        """The process-wide runtime on the default home (synchronous)."""
        global _default
        with _default_lock:
            if _default is None or _default._closed:
                _default = cls(Options())
            return _default

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _ptr(self):
        if self._closed:
            raise RuntimeError("Boxlite runtime is closed")
        return self._rt

    def _check_not_shut_down(self):
        if self._shut_down:
            raise from_kind("Stopped", "Cannot create box: runtime has been shut down")

    async def create(self, options: BoxOptions, name: Optional[str] = None) -> "Box":
        self._check_not_shut_down()
        opts = _c_options(options, name)
        try:
            ptr = await _bridge.call_async(
                lambda cb, key, e: lib.boxlite_create_box(self._ptr(), opts, cb, key, e), "box")
        finally:
            lib.boxlite_options_free(opts)
        box = Box(self, ptr)
        box._name = name or None
        return box

    async def get_or_create(self, options: BoxOptions, name: Optional[str] = None):
        """(box, created): the box named `name` when it exists (created False), else a
        new one. Without a name nothing can be reused: a new box, (box, True)."""
        if name is None:
            return await self.create(options), True
        _check_str(name, "Boxlite.get_or_create()", "name")
        if not name:
            raise ValueError("get_or_create: argument 'name' must not be empty")
        self._check_not_shut_down()
        opts = _c_options(options, name)
        try:
            ptr, created = await _bridge.call_async(
                lambda cb, key, e: lib.boxlite_get_or_create_box(self._ptr(), opts, cb, key, e), "get_or_create")
        finally:
            lib.boxlite_options_free(opts)
        box = Box(self, ptr)
        box._name = name
        return box, created

    async def get(self, id_or_name: str) -> Optional["Box"]:
        """The box by id, name or unique id prefix; None when there is none."""
        ptr = await _none_if_not_found(_bridge.call_async(
            lambda cb, key, e: lib.boxlite_get(self._ptr(), _ffi.cstr(id_or_name), cb, key, e), "box"))
        return Box(self, ptr) if ptr else None

    async def get_info(self, id_or_name: str) -> Optional[BoxInfo]:
        d = await _none_if_not_found(_bridge.call_async(
            lambda cb, key, e: lib.boxlite_get_info(self._ptr(), _ffi.cstr(id_or_name), cb, key, e), "info"))
        return BoxInfo._from(d) if d is not None else None

    async def list_info(self, _state=None):
        """Every box's BoxInfo, newest first; with a state (a status string such as
        "running", or a BoxStateInfo), only the boxes in that status."""
        if _state is not None and not isinstance(_state, (str, BoxStateInfo)):
            raise TypeError(f"Boxlite.list_info(): argument '_state': expected str or BoxStateInfo, "
                            f"not {type(_state).__name__}")
        items = await _bridge.call_async(lambda cb, key, e: lib.boxlite_list_info(self._ptr(), cb, key, e),
                                         "info_list")
        infos = [BoxInfo._from(d) for d in items]
        if _state is not None:
            infos = [i for i in infos if i.status == str(_state)]
        return infos

    async def remove(self, id_or_name: str, force: bool = False) -> None:
        await _bridge.call_async(
            lambda cb, key, e: lib.boxlite_remove(self._ptr(), _ffi.cstr(id_or_name), int(force), cb, key, e),
            "done")

    def import_box(self, archive_path, name: Optional[str] = None):
        """A new box from a .boxlite archive written by box.export (of any home or
        machine), stopped; its first exec starts it. Async: returns a Box."""
        try:
            path = os.fspath(archive_path)
        except TypeError:
            raise TypeError("Boxlite.import_box(): argument 'archive_path': expected str or os.PathLike, "
                            f"not {type(archive_path).__name__}") from None
        _check_str(path, "Boxlite.import_box()", "archive_path")
        _check_str(name, "Boxlite.import_box()", "name", optional=True)
        return self._import_box(path, name)

    async def _import_box(self, path, name):
        self._check_not_shut_down()
        ptr = await _bridge.call_async(lambda cb, key, e: lib.boxlite_runtime_import_box(
            self._ptr(), _ffi.cstr(path), _ffi.cstr(name), cb, key, e), "box")
        return Box(self, ptr)

    async def metrics(self) -> RuntimeMetrics:
        d = await _bridge.call_async(lambda cb, key, e: lib.boxlite_runtime_metrics(self._ptr(), cb, key, e),
                                     "runtime_metrics")
        return RuntimeMetrics._from(d)

    async def shutdown(self, timeout: Optional[int] = None) -> None:
        """Stops every box this runtime handed out (None = 10 s per box, -1 = no limit)."""
        secs = 0 if timeout is None else int(timeout)
        self._shut_down = True
        await _bridge.call_async(lambda cb, key, e: lib.boxlite_runtime_shutdown(self._ptr(), secs, cb, key, e),
                                 "done")

    @property
    def images(self):
        return Images(self)

    @property
    def volumes(self) -> VolumeManager:
        return VolumeManager(self)

    def close(self):
        """Ends the drain thread and frees the runtime (boxes it started are stopped)."""
        if self._closed:
            return
        self._closed = True
        _reaper.flush(timeout=60)  # handles dropped before close are freed while the runtime is alive
        self._drainer.stop()
        lib.boxlite_runtime_free(self._rt)


class Images:
    def __init__(self, runtime):
        self._runtime = runtime

    def _handle(self):
        out = ctypes.c_void_p()
        err = _ffi.CBoxliteError()
        _bridge.check(lib.boxlite_runtime_images(self._runtime._ptr(), ctypes.byref(out), ctypes.byref(err)), err)
        return out.value

    async def pull(self, reference: str) -> ImagePullResult:
        h = self._handle()
        try:
            d = await _bridge.call_async(
                lambda cb, key, e: lib.boxlite_image_pull(h, _ffi.cstr(reference), cb, key, e), "pull")
        finally:
            lib.boxlite_image_free(h)
        return ImagePullResult(d["reference"], d["config_digest"], d["layer_count"])

    async def list(self):
        h = self._handle()
        try:
            items = await _bridge.call_async(lambda cb, key, e: lib.boxlite_image_list(h, cb, key, e), "image_list")
        finally:
            lib.boxlite_image_free(h)
        return [ImageInfo(d["reference"], d["repository"], d["tag"], d["id"], d["cached_at"],
                          d["size"] if d["has_size"] else None) for d in items]


def _c_options(o: BoxOptions, name):
    if not isinstance(o, BoxOptions):
        raise TypeError(f"expected BoxOptions, not {type(o).__name__}")
    missing = o.unsupported()
    if missing:
        raise from_kind("Unsupported", "not supported yet by boxlite: " + ", ".join(missing))
    sec = o.advanced.security if o.advanced is not None else None
    if sec is not None:
        kept = sec._kept_on()
        if kept:
            warnings.warn("advanced.security: boxlite keeps on what these ask off: " + "; ".join(kept),
                          RuntimeWarning, stacklevel=3)
    out = ctypes.c_void_p()
    err = _ffi.CBoxliteError()
    image = o.image or o.rootfs_path
    _bridge.check(lib.boxlite_options_new(_ffi.cstr(image), ctypes.byref(out), ctypes.byref(err)), err)
    p = out.value
    try:
        if o.image and o.rootfs_path:
            lib.boxlite_options_set_rootfs_path(p, _ffi.cstr(o.rootfs_path))
        if o.cpus is not None:
            lib.boxlite_options_set_cpus(p, o.cpus)
        if o.memory_mib is not None:
            lib.boxlite_options_set_memory(p, o.memory_mib)
        if o.disk_size_gb is not None:
            lib.boxlite_options_set_disk_size_gb(p, o.disk_size_gb)
        for host, guest, ro in o.volumes:
            lib.boxlite_options_add_bind_mount(p, _ffi.cstr(host), _ffi.cstr(guest), 1 if ro else 0)
        lib.boxlite_options_set_auto_remove(p, int(o.auto_remove))
        lib.boxlite_options_set_detach(p, int(o.detach))
        if name:
            lib.boxlite_options_set_name(p, _ffi.cstr(name))
        for k, v in o.env:
            lib.boxlite_options_add_env(p, _ffi.cstr(k), _ffi.cstr(v))
        if o.working_dir:
            lib.boxlite_options_set_workdir(p, _ffi.cstr(o.working_dir))
        if o.user:
            lib.boxlite_options_set_user(p, _ffi.cstr(o.user))
        if o.entrypoint:
            lib.boxlite_options_set_entrypoint(p, _ffi.str_array(o.entrypoint), len(o.entrypoint))
        if o.cmd:
            lib.boxlite_options_set_cmd(p, _ffi.str_array(o.cmd), len(o.cmd))
        engine = o.engine
        _bridge.check(lib.boxlite_options_set_engine(p, _ffi.cstr(engine), ctypes.byref(err)), err)
        if o.network.mode == "disabled":
            lib.boxlite_options_set_network_disabled(p)
        else:
            lib.boxlite_options_set_network_enabled(p)
            for h in o.network.allow_net:
                lib.boxlite_options_add_allow_net(p, _ffi.cstr(h))
        for host, guest, proto, ip in o.ports:
            code = lib.boxlite_options_add_port(p, host, guest, 1 if proto == "udp" else 0, _ffi.cstr(ip))
            if code != 0:
                raise from_kind("InvalidArgument",
                                f"invalid port ({host}, {guest}, {proto}): the guest port must be 1..65535")
        for s in o.secrets:
            hosts = _ffi.str_array(s.hosts)
            lib.boxlite_options_add_secret(p, _ffi.cstr(s.name), _ffi.cstr(s.value), _ffi.cstr(s.placeholder),
                                           hosts, len(s.hosts))
        if sec is not None:
            _set_security(p, sec)
    except BaseException:
        lib.boxlite_options_free(p)
        raise
    return p


def _set_security(p, sec):
    """SecurityOptions -> the C API's advanced options (what the core enforces)."""
    adv = ctypes.c_void_p()
    err = _ffi.CBoxliteError()
    _bridge.check(lib.boxlite_advanced_options_new(ctypes.byref(adv), ctypes.byref(err)), err)
    try:
        # jailer_enabled is the master switch: the seccomp filter is part of the jailer.
        lib.boxlite_advanced_options_set_seccomp_enabled(adv, int(sec.jailer_enabled and sec.seccomp_enabled))
        for name in sec.LIMITS:
            v = getattr(sec, name)
            if v is not None:
                getattr(lib, "boxlite_advanced_options_set_" + name)(adv, v)
        lib.boxlite_options_set_advanced(p, adv)
    finally:
        lib.boxlite_advanced_options_free(adv)


@dataclass
class ExecutionResult:
    """The native Execution.wait() result: exit_code (negative: killed by that
    signal) and error_message, set only when the process died abnormally (timeout
    or signal), as SimpleBox.exec's ExecResult. No stdout/stderr (they stream off
    the Execution)."""
    exit_code: int
    timed_out: bool = False
    error_message: Optional[str] = None


class Box(AsyncStartStop):
    """A native box handle (async context manager: start on entry, stop on exit)."""

    def __init__(self, runtime: Boxlite, ptr):
        self._runtime = runtime
        self._ptr = ptr
        raw = lib.boxlite_box_id(ptr)
        self._id = ctypes.string_at(raw).decode()
        lib.boxlite_free_string(raw)

    def __del__(self):
        # Never freed here: see _Reaper (a finaliser may run on the drain thread or
        # the event loop, and freeing an auto_remove box's last handle stops it).
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr:
            _reaper.free(lib.boxlite_box_free, ptr)

    @property
    def id(self) -> str:
        return self._id

    @property
    def name(self) -> Optional[str]:
        """The box's name (None when it was created without one), from its info."""
        if not hasattr(self, "_name"):
            info = self.info() if self._ptr else None
            if info is None:
                return None
            self._name = info.name or None  # a box's name never changes
        return self._name

    def _handle(self):
        if not self._ptr:
            raise RuntimeError("box handle is closed")
        return self._ptr

    async def start(self):
        await _bridge.call_async(lambda cb, key, e: lib.boxlite_start_box(self._handle(), cb, key, e), "done")

    async def stop(self):
        await _bridge.call_async(lambda cb, key, e: lib.boxlite_stop_box(self._handle(), cb, key, e), "done")

    def info(self) -> Optional[BoxInfo]:
        """The box's BoxInfo, read at once; also awaitable (`await box.info()`), as
        the reference uses it both ways."""
        p = lib.boxlite_box_info(self._handle())
        if not p:
            return None
        try:
            return BoxInfo._from(_bridge._copy_struct(p.contents))
        finally:
            lib.boxlite_free_box_info(p)

    async def metrics(self) -> BoxMetrics:
        d = await _bridge.call_async(lambda cb, key, e: lib.boxlite_box_metrics_ex(self._handle(), cb, key, e),
                                     "box_metrics_ex")
        return BoxMetrics._from(d)

    @property
    def snapshot(self) -> SnapshotHandle:
        """The box's snapshots (a synchronous property; its methods are async)."""
        return SnapshotHandle(self)

    def clone_box(self, *args, options: Optional[CloneOptions] = None, name: Optional[str] = None):
        """A new, independent box with this box's files (a running box is quiesced and
        resumed), created stopped and started by its first exec. Async: returns a Box.
        A vm box cannot be removed without force while its clones exist."""
        if args:
            n = len(args)
            raise TypeError(f"Box.clone_box() takes 0 positional arguments but {n} {'was' if n == 1 else 'were'} given")
        _check_options(options, CloneOptions, "Box.clone_box()")
        _check_str(name, "Box.clone_box()", "name", optional=True)
        return self._clone(name)

    async def _clone(self, name):
        ptr = await _bridge.call_async(lambda cb, key, e: lib.boxlite_box_clone(
            self._handle(), _ffi.cstr(name), cb, key, e), "box")
        return Box(self._runtime, ptr)

    def export(self, *args, dest=None, options: Optional[ExportOptions] = None):
        """Writes <dest>/<name or id>.boxlite, a portable archive of the box, and
        returns its path (dest: an existing directory). Async."""
        if args:
            n = len(args)
            raise TypeError(f"Box.export() takes 0 positional arguments but {n} {'was' if n == 1 else 'were'} given")
        if dest is None:
            raise TypeError("Box.export() missing 1 required keyword argument: 'dest'")
        try:
            dest = os.fspath(dest)
        except TypeError:
            raise TypeError(f"Box.export(): argument 'dest': expected str or os.PathLike, not {type(dest).__name__}") \
                from None
        _check_str(dest, "Box.export()", "dest")
        _check_options(options, ExportOptions, "Box.export()")
        return self._export(dest)

    async def _export(self, dest):
        return await _bridge.call_async(lambda cb, key, e: lib.boxlite_box_export(
            self._handle(), _ffi.cstr(dest), cb, key, e), "export")

    async def copy_in(self, host_path, container_dest, overwrite: bool = True, follow_symlinks: bool = False,
                      include_parent: bool = True):
        """Copies host_path into the box at container_dest (docker cp semantics)."""
        flags = _copy_flags(overwrite, follow_symlinks, include_parent)
        src, dst = _ffi.cstr(os.fspath(host_path)), _ffi.cstr(container_dest)
        await _bridge.call_async(lambda cb, key, e: lib.boxlite_copy_into_with(
            self._handle(), src, dst, *flags, cb, key, e), "done")

    async def copy_out(self, container_src, host_dest, overwrite: bool = True, follow_symlinks: bool = False,
                       include_parent: bool = True):
        """Copies container_src out of the box to host_dest (docker cp semantics)."""
        flags = _copy_flags(overwrite, follow_symlinks, include_parent)
        src, dst = _ffi.cstr(container_src), _ffi.cstr(os.fspath(host_dest))
        await _bridge.call_async(lambda cb, key, e: lib.boxlite_copy_out_with(
            self._handle(), src, dst, *flags, cb, key, e), "done")

    async def exec(self, cmd: str, args=None, env=None, timeout_secs=None, tty: bool = False, cwd=None,
                   user=None) -> "Execution":
        """Starts cmd (args a list of str, env a list of (key, value) tuples)."""
        _check_str(cmd, "Box.exec()", "command")
        if isinstance(args, (str, bytes)) or not all(isinstance(a, str) for a in (args or [])):
            raise TypeError("argument 'args': expected a list of str")
        if env is not None and not isinstance(env, (list, tuple)):
            raise TypeError(f"argument 'env': '{type(env).__name__}' object cannot be cast as 'Sequence'")
        pairs = []
        for kv in env or []:
            if not (isinstance(kv, tuple) and len(kv) == 2 and all(isinstance(x, str) for x in kv)):
                raise TypeError("argument 'env': entries must be (str, str) tuples")
            pairs.extend(kv)
        if timeout_secs is not None and (not isinstance(timeout_secs, (int, float)) or isinstance(timeout_secs, bool)
                                         or not timeout_secs >= 0):
            raise ValueError(f"timeout_secs must be a number >= 0, not {timeout_secs!r}")
        return await Execution._start(self, cmd, list(args or []), pairs, timeout_secs or 0.0, tty, cwd, user)

    async def attach(self) -> "Execution":
        """The main command's session: its output (from its start) and, from wait(),
        its exit code. A box not yet started is started. SimpleBox has none (as
        documented): the main command of a SimpleBox is the image's idle one."""
        return await Execution._attach(self)


def _copy_flags(overwrite, follow_symlinks, include_parent):
    """The reference's copy parameters, each a bool (as its table types them)."""
    values = {"overwrite": overwrite, "follow_symlinks": follow_symlinks, "include_parent": include_parent}
    for name, value in values.items():
        if not isinstance(value, bool):
            raise TypeError(f"argument '{name}': '{type(value).__name__}' object cannot be cast as 'bool'")
    return tuple(int(v) for v in values.values())


def _with_spawn_failure(exc, spawn):
    """exc (an ExecutionError of a command that could not start) with why, as the C
    API reports it (boxlite_box_exec_acked_ex), and the exit code a shell gives it."""
    name = SPAWN_FAILURES.get(spawn)
    if name:
        exc.spawn_failure = name
        exc.exit_code = lib.boxlite_spawn_failure_exit_code(spawn)
    return exc


def _retrieve(fut):
    if not fut.cancelled():
        fut.exception()


def _kill_late_start(started, ex, out):
    """The exec whose caller was cancelled while it started: kill what did start and
    free it (the caller never sees its Execution)."""
    _bridge.unregister(ex._key)
    ex._key = None
    if started.cancelled() or started.exception() is not None or not out.value:
        return
    ptr = out.value
    key = _bridge.register(lambda *a: _reaper.free(lib.boxlite_execution_free, ptr))
    err = _ffi.CBoxliteError()
    if lib.boxlite_execution_kill(ptr, _bridge.CALLBACKS["done"], key, ctypes.byref(err)) != 0:
        _ffi.take_error(err)
        _bridge.unregister(key)
        _reaper.free(lib.boxlite_execution_free, ptr)


class Execution:
    """A running command: stdout()/stderr() async iterators of str, wait, kill, resize_tty.

    Output not yet read is held in this process up to max_unread_bytes (both
    streams together, 16 MiB by default): past that, no more output credit is
    returned to the C API (boxlite_box_exec_acked_ex), so at most another 1 MiB is
    queued and the command then pauses on a full pipe until stdout()/stderr() are
    read (or it is killed). A command writing more than that must have its output
    read, as with a shell pipe; SimpleBox.exec always reads both streams."""

    max_unread_bytes = 16 << 20

    def __init__(self, box, loop):
        self._box = box
        self._loop = loop
        self._ptr = None
        self._queues = {"stdout": asyncio.Queue(), "stderr": asyncio.Queue()}
        self._decoders = {k: codecs.getincrementaldecoder("utf-8")("replace") for k in self._queues}
        self._wait = None
        self._key = None
        self._credit_lock = threading.Lock()
        self._unread = 0  # bytes received and not yet read
        self._owed = 0    # bytes of credit held back from the C API
        self._cap = self.max_unread_bytes
        self._early = 0   # credit earned before the handle was known
        self._timeout = 0.0

    @classmethod
    async def _start(cls, box, cmd, args, env_pairs, timeout, tty, cwd, user):
        # The C strings first: a bad one (a NUL byte) raises before anything is registered.
        argv = _ffi.str_array(args)
        envv = _ffi.str_array(env_pairs)
        c = _ffi.BoxliteCommand(_ffi.cstr(cmd), argv, len(args), envv if env_pairs else None, len(env_pairs),
                                _ffi.cstr(cwd), _ffi.cstr(user), float(timeout), int(bool(tty)))

        def begin(key, out, err):
            spawn = ctypes.c_int(0)
            code = lib.boxlite_box_exec_acked_ex(box._handle(), ctypes.byref(c), _bridge.stdout_cb,
                                                 _bridge.stderr_cb, key, ctypes.byref(out), ctypes.byref(spawn),
                                                 ctypes.byref(err))
            if code != 0:
                raise _with_spawn_failure(_bridge.exception_of(err), spawn.value)
            return code
        return await cls._begin(box, begin, timeout)

    @classmethod
    async def _attach(cls, box):
        def begin(key, out, err):
            return lib.boxlite_box_attach_acked(box._handle(), _bridge.stdout_cb, _bridge.stderr_cb, key,
                                                ctypes.byref(out), ctypes.byref(err))
        return await cls._begin(box, begin, 0.0)

    @classmethod
    async def _begin(cls, box, begin, timeout):
        """An execution that begin(key, out, err) starts in the C API (an exec, or the
        main command's session)."""
        loop = asyncio.get_running_loop()
        ex = cls(box, loop)
        ex._timeout = timeout
        ex._key = _bridge.register(ex._on_output, once=False)
        out = ctypes.c_void_p()

        def start():
            err = _ffi.CBoxliteError()
            code = begin(ex._key, out, err)
            _bridge.check(code, err)
        started = loop.run_in_executor(None, start)
        try:
            # Shielded: a cancelled caller (asyncio.wait_for) must not leave a command
            # that did start running unobserved in the box.
            await asyncio.shield(started)
        except asyncio.CancelledError:
            started.add_done_callback(lambda f: _kill_late_start(f, ex, out))
            raise
        except BaseException:
            _bridge.unregister(ex._key)
            ex._key = None
            raise
        with ex._credit_lock:
            ex._ptr = out.value
            early, ex._early = ex._early, 0
        if early:
            ex._ack(early)
        ex._wait = loop.create_future()
        # Retrieved here, so a wait nobody awaits (a cancelled caller) is never
        # reported as "Future exception was never retrieved".
        ex._wait.add_done_callback(_retrieve)
        resolve = _bridge.future_handler(loop, ex._wait)

        def on_wait(code, error):
            # The streams end whether the command exited or failed, so readers never hang.
            result = ex._finish(code)
            resolve(result, error)
        wait_key = _bridge.register(on_wait)
        err = _ffi.CBoxliteError()
        code = lib.boxlite_execution_wait(ex._ptr, _bridge._wait_cb, wait_key, ctypes.byref(err))
        if code != 0:
            _bridge.unregister(wait_key)
            raise _bridge.exception_of(err)
        return ex

    def __del__(self):
        if getattr(self, "_key", None):
            _bridge.unregister(self._key)
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr:
            _reaper.free(lib.boxlite_execution_free, ptr)  # closing stdin may block: see _Reaper

    def _ack(self, n):
        with self._credit_lock:
            if self._ptr is None:  # output dispatched before _start stored the handle
                self._early += n
                return
            ptr = self._ptr
        lib.boxlite_execution_ack_output(ptr, n, None)

    # Runs on the drain thread: credit is returned at once while the unread output
    # is under the cap, else held back until the reader catches up.
    def _on_output(self, stream, chunk):
        n = len(chunk)
        with self._credit_lock:
            self._unread += n
            if self._unread <= self._cap and not self._owed:
                ack = n
            else:
                self._owed += n
                ack = 0
        if ack:
            self._ack(ack)
        text = self._decoders[stream].decode(chunk)
        try:
            self._loop.call_soon_threadsafe(self._queues[stream].put_nowait, (text, n))
        except RuntimeError:
            pass

    # Runs on the event loop when a reader took n bytes.
    def _consumed(self, n):
        with self._credit_lock:
            self._unread -= n
            ack = 0
            if self._owed and self._unread < self._cap:
                ack, self._owed = self._owed, 0
        if ack:
            self._ack(ack)

    @property
    def unread_bytes(self) -> int:
        """Output received from the box and not yet read through stdout()/stderr()."""
        return self._unread

    # Runs on the drain thread, after every output chunk was dispatched.
    def _finish(self, code):
        timed_out = bool(lib.boxlite_execution_timed_out(self._ptr))
        for stream, q in self._queues.items():
            tail = self._decoders[stream].decode(b"", final=True)
            if tail:
                self._loop.call_soon_threadsafe(q.put_nowait, (tail, 0))
            self._loop.call_soon_threadsafe(q.put_nowait, None)
        _bridge.unregister(self._key)
        msg = None
        if timed_out:
            msg = f"Command timed out after {self._timeout:g}s"
        elif code < 0:
            msg = f"killed by signal {-code}"
        return ExecutionResult(code, timed_out, msg)

    async def _lines(self, stream):
        q = self._queues[stream]
        buf = ""
        while True:
            item = await q.get()
            if item is None:
                break
            text, n = item
            self._consumed(n)
            if not text:
                continue
            buf += text
            *lines, buf = buf.split("\n")
            for line in lines:
                yield line + "\n"
            # A partial line (a prompt) is not held back once the output pauses.
            if buf and q.empty():
                yield buf
                buf = ""
        if buf:
            yield buf

    def stdout(self):
        """Async iterator of the command's stdout as text: line by line (newlines
        kept) while output flows, and a partial line (a prompt) as soon as it pauses."""
        return self._lines("stdout")

    def stderr(self):
        return self._lines("stderr")

    async def wait(self) -> ExecutionResult:
        return await asyncio.shield(self._wait)

    async def kill(self):
        await _bridge.call_async(lambda cb, key, e: lib.boxlite_execution_kill(self._ptr, cb, key, e), "done")

    async def _kill_quietly(self):
        """kill(), shielded from the caller's cancellation and its errors swallowed (the
        command may have exited already): for cleanup of a cancelled exec."""
        if self._wait is not None and self._wait.done():
            return
        task = asyncio.ensure_future(self.kill())
        task.add_done_callback(_retrieve)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - best effort
            pass

    async def signal(self, sig: int):
        await _bridge.call_async(lambda cb, key, e: lib.boxlite_execution_signal(self._ptr, sig, cb, key, e), "done")

    async def resize_tty(self, rows: int, cols: int):
        await _bridge.call_async(
            lambda cb, key, e: lib.boxlite_execution_tty_resize(self._ptr, rows, cols, cb, key, e), "done")

    async def write_stdin(self, data):
        if isinstance(data, str):
            data = data.encode()
        err = _ffi.CBoxliteError()
        buf = ctypes.create_string_buffer(data, len(data))
        code = await self._loop.run_in_executor(
            None, lambda: lib.boxlite_execution_stdin_write(self._ptr, buf, len(data), ctypes.byref(err)))
        _bridge.check(code, err)

    def close_stdin(self):
        err = _ffi.CBoxliteError()
        _bridge.check(lib.boxlite_execution_stdin_close(self._ptr, ctypes.byref(err)), err)
