"""The sandbox executor a consumer agent framework expects (seed 000): exec(command)
returns an ExecResult with as_text(); host workspace paths given as cwd are
translated to /workspace/...; a timeout yields exit_code -1 and
"Command timed out after Ns" in stderr.

The host workspace is mounted at /workspace (a volume), so edits on either side
are visible to the other at once."""
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional

from .runtime import AsyncStartStop
from .simplebox import SimpleBox

GUEST_WORKSPACE = "/workspace"


class SandboxInitError(RuntimeError):
    """The sandbox could not be created or verified."""


@dataclass
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int

    def as_text(self, max_chars: int = 10_000) -> str:
        """stdout, a STDERR: block when there is stderr, then "Exit code: N" (always
        kept); longer than max_chars, the middle is cut and marked. The same
        rendering as the core's BufferedResult::as_text."""
        body = self.stdout
        if self.stderr:
            if body and not body.endswith("\n"):
                body += "\n"
            body += "STDERR:\n" + self.stderr
        if len(body) > max_chars:
            head, tail = max_chars // 2, max_chars - max_chars // 2
            omitted = len(body) - max_chars
            body = body[:head] + f"\n... ({omitted} chars truncated) ...\n" + body[len(body) - tail:]
        exit_line = f"Exit code: {self.exit_code}"
        if not body:
            return exit_line
        if not body.endswith("\n"):
            body += "\n"
        return body + "\n" + exit_line


class BoxliteExecutor(AsyncStartStop):
    def __init__(self, image: str, workspace, sandbox_home=None, cpus: Optional[int] = None,
                 memory_mib: Optional[int] = None, default_timeout: float = 120.0, runtime=None, **box_kwargs):
        self.workspace = Path(workspace).resolve()
        self.default_timeout = default_timeout
        self._image, self._cpus, self._memory = image, cpus, memory_mib
        self._home, self._runtime, self._box_kwargs = sandbox_home, runtime, box_kwargs
        self._own_runtime = None
        self._box = None

    async def start(self):
        from .options import Options
        from .runtime import Boxlite
        try:
            rt = self._runtime
            if rt is None:
                home = self._home() if callable(self._home) else self._home
                self._own_runtime = rt = Boxlite(Options(home_dir=os.fspath(home) if home else None))
            kwargs = dict(self._box_kwargs)
            if self.workspace.is_dir():
                kwargs["volumes"] = list(kwargs.get("volumes") or []) + [(str(self.workspace), GUEST_WORKSPACE)]
            box = SimpleBox(image=self._image, cpus=self._cpus, memory_mib=self._memory, runtime=rt, **kwargs)
            await box.start()
            self._box = box
            check = await box.exec("true")
            if check.exit_code != 0:
                raise SandboxInitError(f"sandbox check failed: exit code {check.exit_code}")
        except SandboxInitError:
            await self.stop()
            raise
        except Exception as e:
            await self.stop()
            raise SandboxInitError(f"boxlite sandbox unavailable: {e}") from e

    def translate_cwd(self, cwd: Optional[str]) -> Optional[str]:
        """A host path inside the workspace -> the same path under /workspace."""
        if cwd is None:
            return GUEST_WORKSPACE if self.workspace.is_dir() else None
        p = Path(cwd)
        if not p.is_absolute():
            # Relative to the workspace, as a command's own paths are (the box's
            # exec takes only absolute working directories).
            base = PurePosixPath(GUEST_WORKSPACE if self.workspace.is_dir() else "/")
            return str(base / PurePosixPath(cwd))
        try:
            rel = p.resolve().relative_to(self.workspace)
        except ValueError:
            return cwd  # already a guest path, or outside the workspace
        return str(PurePosixPath(GUEST_WORKSPACE) / rel.as_posix()) if str(rel) != "." else GUEST_WORKSPACE

    async def exec(self, command: str, cwd: Optional[str] = None, env: Optional[dict] = None,
                   timeout: Optional[float] = None) -> ExecResult:
        if self._box is None:
            raise RuntimeError("executor not started")
        limit = self.default_timeout if timeout is None else timeout
        r = await self._box.exec("sh", "-c", command, env=env, cwd=self.translate_cwd(cwd), timeout=limit)
        if r.timed_out:
            stderr = (r.stderr + ("\n" if r.stderr and not r.stderr.endswith("\n") else "")
                      + f"Command timed out after {limit:g}s") if r.stderr else f"Command timed out after {limit:g}s"
            return ExecResult(r.stdout, stderr, -1)
        return ExecResult(r.stdout, r.stderr, r.exit_code)

    async def sync_back(self):
        """Nothing to do: /workspace is the host workspace itself (kept for callers
        of the earlier copying executor)."""

    async def stop(self):
        box, self._box = self._box, None
        try:
            if box is not None:
                await box.stop()
        finally:
            if self._own_runtime is not None:
                self._own_runtime.close()
                self._own_runtime = None
