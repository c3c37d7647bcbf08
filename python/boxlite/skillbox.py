"""SkillBox: the Claude Code CLI in a box (ghcr.io/boxlite-ai/boxlite-skillbox:0.1.0),
with the documented constructor and defaults (name "skill-box", 4096 MiB, 10 GB disk,
noVNC GUI ports picked at random, auto_remove) and methods.

The OAuth token comes from oauth_token= or CLAUDE_CODE_OAUTH_TOKEN; without one,
entering the box raises ValueError, as documented. The methods are execs of the
image's tools: `claude -p` for call(), git for install_skill() (a skill "owner/repo"
is cloned from GitHub into the box's ~/.claude/skills/). In a box without them
(another image), the error names what is missing."""
import os
import shlex
import socket
from typing import Iterable, Optional

from .simplebox import SimpleBox, require_tool_script

SKILLBOX_IMAGE = "ghcr.io/boxlite-ai/boxlite-skillbox:0.1.0"
SKILLBOX_MEMORY_MIB = 4096
SKILLBOX_DISK_SIZE_GB = 10
SKILLBOX_GUI_HTTP_PORT = 3000    # noVNC inside the box
SKILLBOX_GUI_HTTPS_PORT = 3001
SKILLBOX_TOKEN_ENV = "CLAUDE_CODE_OAUTH_TOKEN"
SKILLBOX_SKILLS_DIR = "/root/.claude/skills"


def _free_port() -> int:
    """A host port nobody listens on now: the documented "0 = randomly assigned"."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _need(tool, why):
    return require_tool_script(f"command -v {tool} >/dev/null 2>&1",
                               f"{tool} not found in the box: SkillBox {why} needs the image {SKILLBOX_IMAGE}")


class SkillBox(SimpleBox):
    IMAGE = SKILLBOX_IMAGE  # the documented fixed image (tests point it at a local layout)

    def __init__(self, skills: Optional[Iterable[str]] = None, oauth_token: Optional[str] = None,
                 name: Optional[str] = "skill-box", memory_mib: int = SKILLBOX_MEMORY_MIB,
                 disk_size_gb: int = SKILLBOX_DISK_SIZE_GB, gui_http_port: int = 0, gui_https_port: int = 0,
                 auto_remove: bool = True, runtime=None, **kwargs):
        for fixed in ("image", "rootfs_path"):
            if fixed in kwargs:
                raise TypeError(f"SkillBox does not take {fixed}=: the image is fixed to {SKILLBOX_IMAGE}")
        self.skills = list(skills or [])
        for s in self.skills:
            if not isinstance(s, str) or s.count("/") != 1 or any(not p or p in (".", "..") for p in s.split("/")):
                raise ValueError(f"SkillBox skills are GitHub repositories 'owner/repo', not {s!r}")
        self._oauth_token = oauth_token
        self.gui_http_port = gui_http_port or _free_port()
        self.gui_https_port = gui_https_port or _free_port()
        ports = [(self.gui_http_port, SKILLBOX_GUI_HTTP_PORT), (self.gui_https_port, SKILLBOX_GUI_HTTPS_PORT)]
        ports += list(kwargs.pop("ports", None) or [])
        super().__init__(image=self.IMAGE, memory_mib=memory_mib, runtime=runtime, name=name,
                         auto_remove=auto_remove, disk_size_gb=disk_size_gb, ports=ports, **kwargs)

    async def start(self):
        if self._box is not None:
            return self
        token = self._oauth_token or os.environ.get(SKILLBOX_TOKEN_ENV, "")
        if not token:
            raise ValueError(f"SkillBox needs a Claude OAuth token: pass oauth_token=... or set {SKILLBOX_TOKEN_ENV}")
        self._token = token
        await super().start()
        try:
            for skill in self.skills:
                await self.install_skill(skill)
        except BaseException:
            await self._stop_if_started()  # a failed start leaves no box behind
            raise
        return self

    async def _run(self, what, script, timeout=None):
        return await self._sh(what, script, env={SKILLBOX_TOKEN_ENV: self._token}, timeout=timeout)

    async def wait_until_ready(self, timeout: float = 60) -> None:
        """Polls until the claude CLI answers; TimeoutError after `timeout` seconds. A
        box without claude fails at once (ExecError naming it)."""
        await self._poll_until_ready("claude --version",
                                     _need("claude", "wait_until_ready") + "claude --version >/dev/null 2>&1", timeout,
                                     f"SkillBox: claude did not become ready within {timeout} s")

    async def call(self, prompt: str, timeout: Optional[float] = None) -> str:
        """One non-interactive turn (`claude -p PROMPT`); returns its answer."""
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("SkillBox.call needs a non-empty prompt string")
        cmd = "claude -p " + shlex.quote(prompt)
        r = await self._run(cmd, _need("claude", "call") + "exec " + cmd, timeout=timeout)
        return r.stdout

    async def install_skill(self, skill: str) -> None:
        """Clones the GitHub repository `owner/repo` into the box's skills directory."""
        if not isinstance(skill, str) or skill.count("/") != 1:
            raise ValueError(f"SkillBox skills are GitHub repositories 'owner/repo', not {skill!r}")
        dest = f"{SKILLBOX_SKILLS_DIR}/{skill.split('/')[1]}"
        cmd = (f"mkdir -p {SKILLBOX_SKILLS_DIR} && rm -rf {shlex.quote(dest)} && "
               f"git clone --depth 1 {shlex.quote('https://github.com/' + skill + '.git')} {shlex.quote(dest)}")
        await self._run(f"install_skill {skill}", _need("git", "install_skill") + cmd)
