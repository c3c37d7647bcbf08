"""SimpleBox (buffered exec), CodeBox (Python code) and InteractiveBox (a PTY shell)."""
import asyncio
import os
import shlex
import sys
import time
from dataclasses import dataclass
from typing import Optional

from .errors import ExecError, TimeoutError
from .options import BoxOptions
from .runtime import AsyncStartStop, Boxlite


@dataclass
class ExecResult:
    """exit_code (negative: killed by that signal, e.g. on timeout), decoded output,
    and error_message, set only when the process died abnormally."""
    exit_code: int
    stdout: str
    stderr: str
    error_message: Optional[str] = None


def require_tool_script(test, message):
    """A shell prefix for the image-specific boxes (ComputerBox, BrowserBox,
    SkillBox): when `test` fails, it prints `message` and exits 127, so the
    ExecError names what the box is missing."""
    return f"{test} || {{ echo {shlex.quote(message)} >&2; exit 127; }}; "


class SimpleBox(AsyncStartStop):
    """A box created and started on `async with` entry, stopped (and removed when
    auto_remove) on exit. Extra kwargs go to BoxOptions."""

    def __init__(self, image: Optional[str] = None, memory_mib: Optional[int] = None, cpus: Optional[int] = None,
                 runtime: Optional[Boxlite] = None, name: Optional[str] = None, auto_remove: bool = True,
                 **kwargs):
        self._options = BoxOptions(image=image, memory_mib=memory_mib, cpus=cpus, auto_remove=auto_remove,
                                   **kwargs)
        self._runtime = runtime
        self._name = name
        self._box = None

    async def start(self):
        if self._box is not None:
            return self
        rt = self._runtime or Boxlite.default()
        box = await rt.create(self._options, name=self._name)
        await box.start()
        self._box = box
        return self

    @property
    def id(self) -> str:
        if self._box is None:
            raise RuntimeError("Box not started: use 'async with' or await start() first")
        return self._box.id

    def _started(self):
        if self._box is None:
            raise RuntimeError("Box not started: use 'async with' or await start() first")
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
        error; on timeout the process is killed and exit_code is negative."""
        box = self._started()
        if env is not None and not isinstance(env, dict):
            raise TypeError(f"env must be a dict[str, str], not {type(env).__name__}")
        pairs = [(str(k), str(v)) for k, v in (env or {}).items()]
        ex = await box.exec(cmd, args=list(args), env=pairs, timeout_secs=timeout, cwd=cwd, user=user)
        out, err = await asyncio.gather(_collect(ex.stdout()), _collect(ex.stderr()))
        res = await ex.wait()
        msg = None
        if res.timed_out:
            msg = f"Command timed out after {timeout:g}s"
        elif res.exit_code < 0:
            msg = f"killed by signal {-res.exit_code}"
        return ExecResult(res.exit_code, out, err, msg)

    async def copy_in(self, host_path, guest_path):
        await self._started().copy_in(host_path, guest_path)

    async def copy_out(self, guest_path, host_path):
        await self._started().copy_out(guest_path, host_path)

    def info(self):
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
            await self.stop()
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

    async def wait(self):
        return await self.execution.wait()

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
