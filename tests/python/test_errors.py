"""Typed errors (issue 35): upstream's hierarchy in boxlite.errors, one class per C
API error code (in step with src/common/error.cpp's table), each front-end mapping
of a kind on real boxes, spawn failures as ExecError 127/126, a timeout carried as
data, and messages without our function names."""
import asyncio
import builtins
import os
import re
from pathlib import Path

import pytest

import boxlite
from boxlite import BoxOptions, Secret, SimpleBox, errors

# Upstream's sdks/python/boxlite/errors.py (the newest stored version): its
# __all__, and every class's base. BoxliteError derives from RuntimeError there.
UPSTREAM_ALL = [
    "AlreadyExistsError", "BoxliteError", "ConfigError", "DatabaseError", "EngineError", "ExecError",
    "ExecutionError", "ImageError", "InternalError", "InvalidArgumentError", "InvalidStateError", "MetadataError",
    "NetworkError", "NotFoundError", "ParseError", "PortalError", "ResourceExhaustedError", "RpcError",
    "RpcTransportError", "SessionReapedError", "StoppedError", "StorageError", "TimeoutError",
    "UnsupportedEngineError", "UnsupportedError",
]
ERROR_CPP = Path(__file__).resolve().parents[2] / "src" / "common" / "error.cpp"


def run(coro):
    return asyncio.run(coro)


def test_the_hierarchy_is_upstreams():
    assert errors.__all__ == UPSTREAM_ALL
    assert issubclass(errors.BoxliteError, RuntimeError)
    for name in UPSTREAM_ALL:
        cls = getattr(errors, name)
        assert isinstance(cls, type) and issubclass(cls, Exception), name
        if name != "BoxliteError":
            assert errors.BoxliteError in cls.__bases__, name  # a direct subclass, as upstream's
            assert issubclass(cls, RuntimeError), name  # the seed's `except RuntimeError` holds
    # Top level, as upstream's __init__ exports them.
    for name in ("BoxliteError", "ExecError", "TimeoutError", "ParseError"):
        assert getattr(boxlite, name) is getattr(errors, name) and name in boxlite.__all__
    assert boxlite.errors is errors
    assert not issubclass(errors.TimeoutError, builtins.TimeoutError)
    assert not hasattr(boxlite, "NativeError")


def test_exec_error_attributes_and_message():
    e = errors.ExecError("ls /x", 2, "no such file\n")
    assert (e.command, e.exit_code, e.stderr) == ("ls /x", 2, "no such file\n")
    assert str(e) == "Command 'ls /x' failed with exit code 2: no such file\n" == e.message
    assert isinstance(e, errors.BoxliteError) and isinstance(e, RuntimeError)
    assert errors.ExecutionError.spawn_failure is None and errors.ExecutionError.exit_code is None


def test_each_c_code_is_one_class_in_step_with_the_table():
    rows = re.findall(r'\{K::(\w+),\s*"(\w+)",\s*(\d+),\s*"\w+",\s*"\w+",\s*\d+,\s*"(\w+)"\}', ERROR_CPP.read_text())
    assert len(rows) == 25, rows  # every ErrorKind
    for i, (kind, name, c_code, python_class) in enumerate(rows):
        exc = errors.from_code(int(c_code), "m")
        assert type(exc).__name__ == python_class, (kind, python_class, type(exc))
        assert type(exc) is getattr(errors, python_class)
        assert (exc.code, exc.kind) == (int(c_code), errors.CODES[int(c_code)])
        if i < 21:  # the first 21 kinds are the C codes themselves, in order
            assert (int(c_code), exc.kind) == (i + 1, name)
    assert len({python_class for *_, python_class in rows[:21]}) == 21  # one class per code
    assert type(errors.from_code(99, "m")) is errors.InternalError


def test_documented_message_forms():
    e = errors.from_code(11, "Handle invalidated after stop(). Use runtime.get() to get a new handle.")
    assert type(e) is errors.StoppedError and e.kind == "Stopped"
    assert str(e) == "stopped: Handle invalidated after stop(). Use runtime.get() to get a new handle."
    assert str(errors.from_code(11, "stopped: x")) == "stopped: x"
    assert str(errors.from_code(4, "Cannot restore")) == "invalid state: Cannot restore"
    bad = errors.from_code(5, "cpus must be between 1 and 255, got 0")
    assert isinstance(bad, errors.InvalidArgumentError) and isinstance(bad, ValueError)
    assert str(bad) == "cpus must be between 1 and 255, got 0"


def no_function_names(exc):
    """Messages never show our function names (C API or core)."""
    assert "boxlite_" not in str(exc), str(exc)


def test_not_found_already_exists_and_invalid_argument(image):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            with pytest.raises(errors.NotFoundError) as ei:
                await rt.remove("no-such-box")
            assert "no-such-box" in str(ei.value) and ei.value.kind == "NotFound"
            no_function_names(ei.value)
            assert await rt.get("no-such-box") is None  # documented: None, not an error
            box = await rt.create(BoxOptions(image=image, auto_remove=False), name="taken")
            try:
                with pytest.raises(errors.AlreadyExistsError) as ei:
                    await rt.create(BoxOptions(image=image), name="taken")
                assert "taken" in str(ei.value)
                no_function_names(ei.value)
            finally:
                await rt.remove(box.id, force=True)
            with pytest.raises(errors.InvalidArgumentError) as ei:
                await rt.create(BoxOptions(image=image, secrets=[Secret(name="X", value="")]))
            assert str(ei.value) == "secret 'X' has an empty value"
            with pytest.raises(errors.InvalidArgumentError, match="^working_dir must be an absolute path"):
                await rt.create(BoxOptions(image=image, working_dir="relative"))
            with pytest.raises(errors.UnsupportedError) as ei:
                boxlite.Boxlite.rest(None)
            assert ei.value.kind == "Unsupported"
            assert await rt.list_info() == []
    run(main())


def test_a_failed_pull_is_an_image_error_and_a_runtime_error():
    reg = os.environ["BOXLITE_TEST_REGISTRY"]

    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            with pytest.raises(RuntimeError) as ei:
                await rt.images.pull(f"{reg}/test/does-not-exist:latest")
            assert type(ei.value) is errors.ImageError and ei.value.kind == "Image"
            assert "does-not-exist" in str(ei.value)
            no_function_names(ei.value)
            with pytest.raises(errors.ImageError):
                async with SimpleBox(image="no-such-image:latest", runtime=rt):
                    pass
            assert await rt.list_info() == []
    run(main())


def test_a_command_that_cannot_start_is_exec_error_127_or_126(image):
    async def main():
        async with SimpleBox(image=image) as box:
            with pytest.raises(errors.ExecError) as ei:
                await box.exec("nope", "arg")
            e = ei.value
            assert (e.command, e.exit_code) == ("nope arg", 127)
            assert isinstance(e, RuntimeError) and isinstance(e, errors.BoxliteError)
            assert "spawn_failed" in str(e) and "not found in $PATH" in str(e)
            assert type(e.__cause__) is errors.ExecutionError and e.__cause__.spawn_failure == "NotFound"
            for kwargs, failure in (({"cmd": "/etc/passwd"}, "NotExecutable"),
                                    ({"cmd": "true", "cwd": "/no/such/dir"}, "BadWorkingDir"),
                                    ({"cmd": "true", "user": "nosuchuser"}, "UnknownUser")):
                kw = dict(kwargs)
                cmd = kw.pop("cmd")
                with pytest.raises(errors.ExecError) as ei:
                    await box.exec(cmd, **kw)
                assert ei.value.exit_code == 126, (kwargs, ei.value)
                assert ei.value.__cause__.spawn_failure == failure
                no_function_names(ei.value)
            # The native Box.exec raises the runtime's ExecutionError, typed.
            with pytest.raises(errors.ExecutionError) as ei:
                await box._box.exec("nope")
            assert (ei.value.spawn_failure, ei.value.exit_code, ei.value.kind) == ("NotFound", 127, "Execution")
            assert (await box.exec("true")).exit_code == 0  # the box is fine
    run(main())


def test_a_timeout_is_carried_as_data(image, tmp_path):
    async def main():
        async with SimpleBox(image=image) as box:
            r = await box.exec("sleep", "30", timeout=1.0)
            assert r.timed_out and r.exit_code < 0 and r.error_message == "Command timed out after 1s"
            # Killed by a signal, saying "Command timed out" itself: not a timeout.
            r = await box.exec("sh", "-c", "echo 'Command timed out' >&2; kill -9 $$")
            assert (r.exit_code, r.timed_out, r.error_message) == (-9, False, "killed by signal 9")
            r = await box.exec("true", timeout=5.0)
            assert (r.exit_code, r.timed_out, r.error_message) == (0, False, None)
        ws = tmp_path / "ws"
        ws.mkdir()
        with boxlite.Boxlite(boxlite.Options()) as rt:
            ex = boxlite.BoxliteExecutor(image, ws, runtime=rt)
            await ex.start()
            try:
                r = await ex.exec("sleep 30", timeout=1)
                assert r.exit_code == -1 and r.stderr.endswith("Command timed out after 1s")
                r = await ex.exec("echo 'Command timed out' >&2; kill -9 $$", timeout=10)
                assert r.exit_code == -9 and r.stderr == "Command timed out\n"
            finally:
                await ex.stop()
    run(main())
