"""SimpleBox (buffered exec), CodeBox (Python code) and InteractiveBox (a PTY shell)."""
import asyncio
import os
import shlex
import sys
import time
from dataclasses import dataclass
from typing import Optional

from .errors import ExecError, ExecutionError, TimeoutError
from .options import BoxOptions
from .runtime import AsyncStartStop, Boxlite


@dataclass
class ExecResult:
    """exit_code (negative: killed by that signal, e.g. on timeout), decoded output,
    timed_out (the exec's timeout ended it), and error_message, set only when the
    process died abnormally. Upstream's fields, in its order."""
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    error_message: Optional[str] = None


def require_tool_script(test, message):
    """A shell prefix for the image-specific boxes (ComputerBox, BrowserBox,
    SkillBox): when `test` fails, it prints `message` and exits 127, so the
    ExecError names what the box is missing."""
    return f"{test} || {{ echo {shlex.quote(message)} >&2; exit 127; }}; "


_NOT_STARTED = "Box not started: use 'async with' or await start() first"


class SimpleBox(AsyncStartStop):
    """A box created and started on `async with` entry, stopped (and removed when
    auto_remove) on exit. Extra kwargs go to BoxOptions.

    With a name and reuse_existing=True, start() reuses the box of that name when
    there is one (the runtime's get_or_create) instead of failing on the name."""

    def __init__(self, image: Optional[str] = None, memory_mib: Optional[int] = None, cpus: Optional[int] = None,
                 runtime: Optional[Boxlite] = None, name: Optional[str] = None, auto_remove: bool = True,
                 reuse_existing: bool = False, rootfs_path: Optional[str] = None, **kwargs):
        self._options = BoxOptions(image=image, rootfs_path=rootfs_path, memory_mib=memory_mib, cpus=cpus,
                                   auto_remove=auto_remove, **kwargs)
        if not isinstance(reuse_existing, bool):
            raise TypeError(f"argument 'reuse_existing': '{type(reuse_existing).__name__}' object cannot be "
                            "cast as 'bool'")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"argument 'name': expected str, not {type(name).__name__}")
        self._runtime = runtime
        self._name = name
        self._reuse_existing = reuse_existing
        self._box = None
        self._ever_started = False

    async def start(self):
        if self._box is not None:
            return self
        rt = self._runtime or Boxlite.default()
        if self._reuse_existing and self._name:
            box, created = await rt.get_or_create(self._options, name=self._name)
        else:
            box, created = await rt.create(self._options, name=self._name), True
        try:
            await box.start()
        except BaseException:
            # A box this start created and could not start (a bad image, a missing
            # working_dir) is removed, not left behind; a reused box is the caller's.
            if created:
                await _remove_quietly(rt, box)
            raise
        self._box = box
        self._ever_started = True
        return self

    @property
    def id(self) -> str:
        return self._started().id

    @property
    def name(self) -> Optional[str]:
        return self._name

    def _started(self):
        if self._box is None:
            raise RuntimeError(_NOT_STARTED)
        return self._box

    async def _sh(self, what, script, *, env=None, timeout=None, check=True):
        """Runs a shell script in the box; with check, a non-zero exit is ExecError(what)."""
        r = await self.exec("sh", "-c", script, env=env, timeout=timeout)
        if check and r.exit_code != 0:
            raise ExecError(what, r.exit_code, r.stderr)
        return r

    async def _poll_until_ready(self, what, script, timeout, late_message, env=None):
        """Runs `script` every 0.5 s until it exits 0. Exit 127 (a missing tool, see
        require_tool_script) is ExecError(what) at once; past `timeout` seconds,
        TimeoutError(late_message)."""
        deadline = time.monotonic() + timeout
        while True:
            r = await self._sh(what, script, env=env, check=False)
            if r.exit_code == 0:
                return
            if r.exit_code == 127:
                raise ExecError(what, r.exit_code, r.stderr)
            if time.monotonic() >= deadline:
                raise TimeoutError(late_message)
            await asyncio.sleep(0.5)

    async def exec(self, cmd: str, *args: str, env: Optional[dict] = None, user: Optional[str] = None,
                   timeout: Optional[float] = None, cwd: Optional[str] = None) -> ExecResult:
        """Runs cmd with args to completion. A non-zero exit is a result, never an
        error; on timeout the process is killed, exit_code is negative and timed_out
        is True. A command that cannot start raises ExecError with the exit code a
        shell gives it: 127 when there is no such command, 126 when it cannot be run
        (not executable, a missing working directory, an unknown user), as upstream
        does; boxlite's own failure to start it stays an ExecutionError."""
        box = self._started()
        if env is not None and not isinstance(env, dict):
            raise TypeError(f"env must be a dict[str, str], not {type(env).__name__}")
        if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
                                    or not timeout >= 0):
            raise ValueError(f"timeout must be a number >= 0, not {timeout!r}")
        pairs = [(str(k), str(v)) for k, v in (env or {}).items()]
        try:
            ex = await box.exec(cmd, args=list(args), env=pairs, timeout_secs=timeout, cwd=cwd, user=user)
        except ExecutionError as e:
            if e.exit_code not in (126, 127):
                raise
            raise ExecError(" ".join([cmd, *args]), e.exit_code, str(e)) from e
        try:
            out, err = await asyncio.gather(_collect(ex.stdout()), _collect(ex.stderr()))
            res = await ex.wait()
        except BaseException:
            # Cancelled (asyncio.wait_for) or failed while it ran: the command is killed
            # in the box, not left running there (the kill is shielded).
            await ex._kill_quietly()
            raise
        return ExecResult(res.exit_code, out, err, res.timed_out, res.error_message)

    async def copy_in(self, host_path, container_dest, overwrite: bool = True, follow_symlinks: bool = False,
                      include_parent: bool = True):
        await self._started().copy_in(host_path, container_dest, overwrite=overwrite,
                                      follow_symlinks=follow_symlinks, include_parent=include_parent)

    async def copy_out(self, container_src, host_dest, overwrite: bool = True, follow_symlinks: bool = False,
                       include_parent: bool = True):
        await self._started().copy_out(container_src, host_dest, overwrite=overwrite,
                                       follow_symlinks=follow_symlinks, include_parent=include_parent)

    async def info(self):
        """The box's BoxInfo (async, as documented: `(await box.info()).state.status`)."""
        return self._started().info()

    @property
    def snapshot(self):
        """The started box's SnapshotHandle (box.snapshot)."""
        return self._started().snapshot

    def clone_box(self, *args, options=None, name=None):
        """The started box's clone_box: a native Box, stopped until its first exec."""
        return self._started().clone_box(*args, options=options, name=name)

    def export(self, *args, dest=None, options=None):
        """The started box's export: the .boxlite archive's path."""
        return self._started().export(*args, dest=dest, options=options)

    async def metrics(self):
        return await self._started().metrics()

    async def stop(self):
        """Stops the box (and removes it when auto_remove). RuntimeError before start,
        as documented; a second stop does nothing."""
        if self._box is None and not self._ever_started:
            raise RuntimeError(_NOT_STARTED)
        await self._stop_if_started()

    async def _stop_if_started(self):
        box, self._box = self._box, None
        if box is None:
            return
        await box.stop()
        if self._options.auto_remove:
            rt = box._runtime
            try:
                await rt.remove(box.id, force=True)
            except RuntimeError:
                pass  # already removed by the runtime (auto_remove)


async def _collect(it):
    return "".join([s async for s in it])


async def _remove_quietly(rt, box):
    try:
        await asyncio.shield(rt.remove(box.id, force=True))
    except Exception:  # noqa: BLE001 - the start's own error is the one raised
        pass


class CodeBox(SimpleBox):
    """Runs Python code in a python:slim style image (interpreter at /usr/local/bin/python)."""

    def __init__(self, image: str = "python:slim", memory_mib=None, cpus=None, runtime=None, name=None,
                 auto_remove=True, python: str = "/usr/local/bin/python", **kwargs):
        super().__init__(image=image, memory_mib=memory_mib, cpus=cpus, runtime=runtime, name=name,
                         auto_remove=auto_remove, **kwargs)
        self._python = python

    async def run(self, code: str, timeout: Optional[int] = None) -> str:
        """stdout only; a failure does not raise and its traceback (stderr) is not
        returned; timeout is accepted and, as documented, not enforced."""
        del timeout
        return (await self.exec(self._python, "-c", code)).stdout

    async def run_script(self, script_path) -> str:
        with open(script_path, encoding="utf-8") as f:
            return await self.run(f.read())

    async def install_package(self, package: str) -> str:
        r = await self.exec(self._python, "-m", "pip", "install", package)
        return r.stdout + r.stderr

    async def install_packages(self, *packages: str) -> str:
        r = await self.exec(self._python, "-m", "pip", "install", *packages)
        return r.stdout + r.stderr


class InteractiveBox(SimpleBox):
    """A shell on a PTY, forwarded to this process's terminal.

    tty=None forwards only when stdin is a TTY; True forces it (termios.error
    without one); False never forwards (drive it with the native execution)."""

    def __init__(self, image: str, shell: str = "/bin/sh", tty: Optional[bool] = None, memory_mib=None, cpus=None,
                 runtime=None, name=None, auto_remove=True, env=None, **kwargs):
        super().__init__(image=image, memory_mib=memory_mib, cpus=cpus, runtime=runtime, name=name,
                         auto_remove=auto_remove, **kwargs)
        self._shell = shell
        self._env = list(env or [])
        if tty is None:
            tty = os.isatty(sys.stdin.fileno()) if _has_fileno(sys.stdin) else False
        self._forward = tty
        self._saved = None
        self.execution = None
        self._tasks = []

    async def __aenter__(self):
        if self._forward:
            import termios
            import tty as ttymod
            fd = sys.stdin.fileno()
            self._saved = termios.tcgetattr(fd)  # termios.error without a TTY, as documented
            ttymod.setraw(fd)
        try:
            await self.start()
            self.execution = await self._box.exec(self._shell, env=self._env, tty=True)
        except BaseException:
            await self._restore()
            await self._stop_if_started()
            raise
        if self._forward:
            cols, rows = os.get_terminal_size(sys.stdin.fileno())
            if rows > 0 and cols > 0:  # a terminal that never had a size reports 0x0
                await self.execution.resize_tty(rows, cols)
            self._tasks = [asyncio.ensure_future(self._pump_out()), asyncio.ensure_future(self._pump_in())]
        return self

    async def __aexit__(self, *exc):
        for t in self._tasks:
            t.cancel()
        await self._restore()
        await self.stop()
        return False

    async def wait(self) -> None:
        """Waits until the shell exits; returns None, as documented."""
        await self.execution.wait()

    async def _restore(self):
        if self._saved is not None:
            import termios
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._saved)
            self._saved = None

    async def _pump_out(self):
        async for text in self.execution.stdout():
            sys.stdout.write(text)
            sys.stdout.flush()

    async def _pump_in(self):
        # A reader on the event loop, not a thread: a thread blocked in read() would
        # keep asyncio.run() from returning after the shell exits.
        loop = asyncio.get_running_loop()
        fd = sys.stdin.fileno()
        ready = asyncio.Event()
        loop.add_reader(fd, ready.set)
        try:
            while True:
                await ready.wait()
                ready.clear()
                data = os.read(fd, 4096)
                if not data:
                    self.execution.close_stdin()
                    return
                await self.execution.write_stdin(data)
        finally:
            loop.remove_reader(fd)


def _has_fileno(f):
    try:
        f.fileno()
        return True
    except (AttributeError, OSError, ValueError):
        return False
