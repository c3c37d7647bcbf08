"""ctypes declarations of include/boxlite.h and the loading of libboxlite.so.

Only the functions the package uses are declared; their argtypes/restype are
set so ctypes checks arity and never truncates pointers.
"""
import ctypes
import ctypes.util
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_int, c_int64, c_size_t,
                    c_uint8, c_uint16, c_uint64, c_void_p)

from . import _buildinfo


class CBoxliteError(Structure):
    _fields_ = [("code", c_int), ("message", c_void_p)]


class BoxliteImageRegistry(Structure):
    _fields_ = [("host", c_char_p), ("transport", c_int), ("skip_verify", c_int), ("search", c_int),
                ("username", c_char_p), ("password", c_char_p), ("bearer_token", c_char_p)]


class BoxliteCommand(Structure):
    _fields_ = [("command", c_char_p), ("args", POINTER(c_char_p)), ("argc", c_int),
                ("env_pairs", POINTER(c_char_p)), ("env_count", c_int), ("workdir", c_char_p),
                ("user", c_char_p), ("timeout_secs", c_double), ("tty", c_int)]


class CBoxInfo(Structure):
    _fields_ = [("id", c_char_p), ("name", c_char_p), ("image", c_char_p), ("status", c_char_p),
                ("running", c_int), ("pid", c_int), ("cpus", c_int), ("memory_mib", c_int),
                ("created_at", c_int64)]


class CBoxInfoList(Structure):
    _fields_ = [("items", POINTER(CBoxInfo)), ("count", c_int)]


class CBoxMetrics(Structure):
    _fields_ = [("cpu_percent", c_double), ("memory_bytes", c_int64), ("commands_executed", c_int),
                ("exec_errors", c_int), ("bytes_sent", c_int64), ("bytes_received", c_int64),
                ("create_duration_ms", c_int64), ("boot_duration_ms", c_int64),
                ("network_bytes_sent", c_int64), ("network_bytes_received", c_int64),
                ("network_tcp_connections", c_int), ("network_tcp_errors", c_int)]


class CBoxMetricsEx(Structure):
    """The versioned extension (struct_size first; fields are only appended)."""
    _fields_ = [("struct_size", c_size_t), ("base", CBoxMetrics), ("stage_filesystem_setup_ms", c_int64),
                ("stage_image_prepare_ms", c_int64), ("stage_guest_rootfs_ms", c_int64),
                ("stage_box_spawn_ms", c_int64), ("stage_container_init_ms", c_int64),
                ("commands_executed_total", c_uint64), ("exec_errors_total", c_uint64)]


class CRuntimeMetrics(Structure):
    _fields_ = [("boxes_created_total", c_int), ("boxes_failed_total", c_int), ("num_running_boxes", c_int),
                ("total_commands_executed", c_int), ("total_exec_errors", c_int)]


class CImagePullResult(Structure):
    _fields_ = [("reference", c_char_p), ("config_digest", c_char_p), ("layer_count", c_int)]


class CImageInfo(Structure):
    _fields_ = [("reference", c_char_p), ("repository", c_char_p), ("tag", c_char_p), ("id", c_char_p),
                ("cached_at", c_int64), ("size", c_uint64), ("has_size", c_int)]


class CImageInfoList(Structure):
    _fields_ = [("items", POINTER(CImageInfo)), ("count", c_int)]


class CSnapshotInfo(Structure):
    _fields_ = [("id", c_char_p), ("box_id", c_char_p), ("name", c_char_p), ("created_at", c_int64),
                ("container_disk_bytes", c_uint64), ("size_bytes", c_uint64)]


class CSnapshotInfoList(Structure):
    _fields_ = [("items", POINTER(CSnapshotInfo)), ("count", c_int)]


ErrP = POINTER(CBoxliteError)
# Callback types (user_data is always last).
BoxCb = CFUNCTYPE(None, c_void_p, ErrP, c_void_p)
GetOrCreateCb = CFUNCTYPE(None, c_void_p, c_int, ErrP, c_void_p)
DoneCb = CFUNCTYPE(None, ErrP, c_void_p)
OutputCb = CFUNCTYPE(None, POINTER(c_uint8), c_size_t, c_void_p)
WaitCb = CFUNCTYPE(None, c_int, ErrP, c_void_p)
InfoCb = CFUNCTYPE(None, POINTER(CBoxInfo), ErrP, c_void_p)
InfoListCb = CFUNCTYPE(None, POINTER(CBoxInfoList), ErrP, c_void_p)
BoxMetricsCb = CFUNCTYPE(None, POINTER(CBoxMetrics), ErrP, c_void_p)
BoxMetricsExCb = CFUNCTYPE(None, POINTER(CBoxMetricsEx), ErrP, c_void_p)
RuntimeMetricsCb = CFUNCTYPE(None, POINTER(CRuntimeMetrics), ErrP, c_void_p)
PullCb = CFUNCTYPE(None, POINTER(CImagePullResult), ErrP, c_void_p)
ImageListCb = CFUNCTYPE(None, POINTER(CImageInfoList), ErrP, c_void_p)
SnapshotInfoCb = CFUNCTYPE(None, POINTER(CSnapshotInfo), ErrP, c_void_p)
SnapshotInfoListCb = CFUNCTYPE(None, POINTER(CSnapshotInfoList), ErrP, c_void_p)
ExportCb = CFUNCTYPE(None, c_char_p, ErrP, c_void_p)


def _candidates():
    env = os.environ.get("BOXLITE_LIB")
    if env:
        yield env
        return
    if _buildinfo.LIBRARY:
        yield _buildinfo.LIBRARY
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libboxlite.so")
    # Running from the source tree (python/boxlite): the default build directory.
    yield os.path.join(here, "..", "..", "build", "libboxlite.so")
    found = ctypes.util.find_library("boxlite")
    if found:
        yield found
    for prefix in ("/usr/local/lib", "/usr/lib"):
        yield os.path.join(prefix, "libboxlite.so")


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("boxlite: libboxlite.so not found; set BOXLITE_LIB to its path. Tried: " + ", ".join(tried))


lib = _load()

_R = c_int  # enum BoxliteErrorCode
_SIGS = {
    "boxlite_version": (c_char_p, []),
    "boxlite_runtime_new": (_R, [c_char_p, POINTER(BoxliteImageRegistry), c_int, POINTER(c_void_p), ErrP]),
    "boxlite_runtime_free": (None, [c_void_p]),
    "boxlite_runtime_drain": (c_int, [c_void_p, c_int, ErrP]),
    "boxlite_runtime_shutdown": (_R, [c_void_p, c_int, DoneCb, c_void_p, ErrP]),
    "boxlite_runtime_metrics": (_R, [c_void_p, RuntimeMetricsCb, c_void_p, ErrP]),
    "boxlite_create_box": (_R, [c_void_p, c_void_p, BoxCb, c_void_p, ErrP]),
    "boxlite_get_or_create_box": (_R, [c_void_p, c_void_p, GetOrCreateCb, c_void_p, ErrP]),
    "boxlite_start_box": (_R, [c_void_p, DoneCb, c_void_p, ErrP]),
    "boxlite_stop_box": (_R, [c_void_p, DoneCb, c_void_p, ErrP]),
    "boxlite_get": (_R, [c_void_p, c_char_p, BoxCb, c_void_p, ErrP]),
    "boxlite_remove": (_R, [c_void_p, c_char_p, c_int, DoneCb, c_void_p, ErrP]),
    "boxlite_get_info": (_R, [c_void_p, c_char_p, InfoCb, c_void_p, ErrP]),
    "boxlite_list_info": (_R, [c_void_p, InfoListCb, c_void_p, ErrP]),
    "boxlite_box_id": (c_void_p, [c_void_p]),
    "boxlite_box_info": (POINTER(CBoxInfo), [c_void_p]),
    "boxlite_box_free": (None, [c_void_p]),
    "boxlite_box_metrics": (_R, [c_void_p, BoxMetricsCb, c_void_p, ErrP]),
    "boxlite_box_metrics_ex": (_R, [c_void_p, BoxMetricsExCb, c_void_p, ErrP]),
    "boxlite_copy_into": (_R, [c_void_p, c_char_p, c_char_p, DoneCb, c_void_p, ErrP]),
    "boxlite_copy_out": (_R, [c_void_p, c_char_p, c_char_p, DoneCb, c_void_p, ErrP]),
    "boxlite_copy_into_with": (_R, [c_void_p, c_char_p, c_char_p, c_int, c_int, c_int, DoneCb, c_void_p, ErrP]),
    "boxlite_copy_out_with": (_R, [c_void_p, c_char_p, c_char_p, c_int, c_int, c_int, DoneCb, c_void_p, ErrP]),
    "boxlite_box_exec_streamed": (_R, [c_void_p, POINTER(BoxliteCommand), OutputCb, OutputCb, c_void_p,
                                       POINTER(c_void_p), ErrP]),
    "boxlite_box_exec_acked_ex": (_R, [c_void_p, POINTER(BoxliteCommand), OutputCb, OutputCb, c_void_p,
                                       POINTER(c_void_p), POINTER(c_int), ErrP]),
    "boxlite_spawn_failure_exit_code": (c_int, [c_int]),
    "boxlite_box_attach_acked": (_R, [c_void_p, OutputCb, OutputCb, c_void_p, POINTER(c_void_p), ErrP]),
    "boxlite_execution_ack_output": (_R, [c_void_p, c_size_t, ErrP]),
    "boxlite_execution_stdin_write": (_R, [c_void_p, c_void_p, c_size_t, ErrP]),
    "boxlite_execution_stdin_close": (_R, [c_void_p, ErrP]),
    "boxlite_execution_wait": (_R, [c_void_p, WaitCb, c_void_p, ErrP]),
    "boxlite_execution_kill": (_R, [c_void_p, DoneCb, c_void_p, ErrP]),
    "boxlite_execution_signal": (_R, [c_void_p, c_int, DoneCb, c_void_p, ErrP]),
    "boxlite_execution_tty_resize": (_R, [c_void_p, c_int, c_int, DoneCb, c_void_p, ErrP]),
    "boxlite_execution_timed_out": (c_int, [c_void_p]),
    "boxlite_execution_free": (None, [c_void_p]),
    "boxlite_options_new": (_R, [c_char_p, POINTER(c_void_p), ErrP]),
    "boxlite_options_set_cpus": (None, [c_void_p, c_int]),
    "boxlite_options_set_memory": (None, [c_void_p, c_int]),
    "boxlite_options_set_disk_size_gb": (None, [c_void_p, ctypes.c_uint64]),
    "boxlite_options_add_bind_mount": (None, [c_void_p, c_char_p, c_char_p, c_int]),
    "boxlite_options_add_port": (_R, [c_void_p, c_uint16, c_uint16, c_int, c_char_p]),
    "boxlite_options_add_secret": (None, [c_void_p, c_char_p, c_char_p, c_char_p, POINTER(c_char_p), c_int]),
    "boxlite_options_set_network_enabled": (None, [c_void_p]),
    "boxlite_options_set_network_disabled": (None, [c_void_p]),
    "boxlite_options_add_allow_net": (None, [c_void_p, c_char_p]),
    "boxlite_options_set_name": (None, [c_void_p, c_char_p]),
    "boxlite_options_set_rootfs_path": (None, [c_void_p, c_char_p]),
    "boxlite_options_set_workdir": (None, [c_void_p, c_char_p]),
    "boxlite_options_set_user": (None, [c_void_p, c_char_p]),
    "boxlite_options_add_env": (None, [c_void_p, c_char_p, c_char_p]),
    "boxlite_options_set_entrypoint": (None, [c_void_p, POINTER(c_char_p), c_int]),
    "boxlite_options_set_cmd": (None, [c_void_p, POINTER(c_char_p), c_int]),
    "boxlite_options_set_auto_remove": (None, [c_void_p, c_int]),
    "boxlite_options_set_detach": (None, [c_void_p, c_int]),
    "boxlite_options_set_engine": (_R, [c_void_p, c_char_p, ErrP]),
    "boxlite_options_set_advanced": (None, [c_void_p, c_void_p]),
    "boxlite_options_free": (None, [c_void_p]),
    "boxlite_advanced_options_new": (_R, [POINTER(c_void_p), ErrP]),
    "boxlite_advanced_options_set_security_enabled": (None, [c_void_p, c_int]),
    "boxlite_advanced_options_set_seccomp_enabled": (None, [c_void_p, c_int]),
    "boxlite_advanced_options_set_max_open_files": (None, [c_void_p, c_uint64]),
    "boxlite_advanced_options_set_max_file_size": (None, [c_void_p, c_uint64]),
    "boxlite_advanced_options_set_max_processes": (None, [c_void_p, c_uint64]),
    "boxlite_advanced_options_set_max_memory": (None, [c_void_p, c_uint64]),
    "boxlite_advanced_options_set_max_cpu_time": (None, [c_void_p, c_uint64]),
    "boxlite_advanced_options_free": (None, [c_void_p]),
    "boxlite_runtime_images": (_R, [c_void_p, POINTER(c_void_p), ErrP]),
    "boxlite_image_pull": (_R, [c_void_p, c_char_p, PullCb, c_void_p, ErrP]),
    "boxlite_image_list": (_R, [c_void_p, ImageListCb, c_void_p, ErrP]),
    "boxlite_image_free": (None, [c_void_p]),
    "boxlite_box_snapshot_create": (_R, [c_void_p, c_char_p, SnapshotInfoCb, c_void_p, ErrP]),
    "boxlite_box_snapshot_list": (_R, [c_void_p, SnapshotInfoListCb, c_void_p, ErrP]),
    "boxlite_box_snapshot_get": (_R, [c_void_p, c_char_p, SnapshotInfoCb, c_void_p, ErrP]),
    "boxlite_box_snapshot_remove": (_R, [c_void_p, c_char_p, DoneCb, c_void_p, ErrP]),
    "boxlite_box_snapshot_restore": (_R, [c_void_p, c_char_p, DoneCb, c_void_p, ErrP]),
    "boxlite_box_clone": (_R, [c_void_p, c_char_p, BoxCb, c_void_p, ErrP]),
    "boxlite_box_export": (_R, [c_void_p, c_char_p, ExportCb, c_void_p, ErrP]),
    "boxlite_runtime_import_box": (_R, [c_void_p, c_char_p, c_char_p, BoxCb, c_void_p, ErrP]),
    "boxlite_error_free": (None, [ErrP]),
    "boxlite_free_string": (None, [c_void_p]),
    "boxlite_free_box_info": (None, [POINTER(CBoxInfo)]),
}
for _name, (_res, _args) in _SIGS.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


def _encode(s, what="str"):
    if not isinstance(s, str):
        raise TypeError(f"expected {what}, not {type(s).__name__}")
    if "\0" in s:
        # As CPython does for a path or an argv entry: a C string would end there.
        raise ValueError("embedded null byte")
    return s.encode("utf-8")


def cstr(s):
    """str -> bytes for a const char* (None stays NULL). A str holding a NUL is
    ValueError("embedded null byte"), never silently cut at it."""
    return None if s is None else _encode(s)


def pystr(b):
    return None if b is None else b.decode("utf-8", "replace")


def str_array(items):
    """A char*[] of the str items (a plain str is TypeError, not its characters)."""
    if isinstance(items, (str, bytes)):
        raise TypeError(f"expected a list of str, not {type(items).__name__}")
    items = list(items)
    arr = (c_char_p * max(len(items), 1))()
    for i, s in enumerate(items):
        arr[i] = _encode(s, "a list of str")
    return arr


def take_error(err):
    """(code, message) of a filled CBoxliteError, freeing its message."""
    msg = ctypes.string_at(err.message).decode("utf-8", "replace") if err.message else ""
    code = err.code
    lib.boxlite_error_free(ctypes.byref(err))
    return code, msg


def read_error(errp):
    """(code, message) of a callback's CBoxliteError* (owned by the library)."""
    e = errp.contents
    msg = ctypes.string_at(e.message).decode("utf-8", "replace") if e.message else ""
    return e.code, msg
