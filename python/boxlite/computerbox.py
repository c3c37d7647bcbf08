"""ComputerBox: a desktop box (XFCE + noVNC in lscr.io/linuxserver/webtop:ubuntu-xfce)
driven with xdotool, with the documented constructor, defaults and methods.

The GUI actions are plain execs of xdotool inside the box: a non-zero exit raises
ExecError (command, exit_code, stderr), and output that does not parse raises
ParseError, as documented. In a box without the desktop tools (another image, or
one whose desktop is not up), the error names what is missing."""
import base64
import shlex
import struct

from .errors import ParseError
from .simplebox import SimpleBox, require_tool_script

COMPUTERBOX_IMAGE = "lscr.io/linuxserver/webtop:ubuntu-xfce"
COMPUTERBOX_CPUS = 2
COMPUTERBOX_MEMORY_MIB = 2048
COMPUTERBOX_GUI_HTTP_PORT = 3000    # inside the box
COMPUTERBOX_GUI_HTTPS_PORT = 3001   # inside the box
COMPUTERBOX_DISPLAY = ":1"
COMPUTERBOX_SCREEN = (1024, 768)
DESKTOP_READY_TIMEOUT = 60

_SCROLL_BUTTONS = {"up": 4, "down": 5, "left": 6, "right": 7}


def _need(tool, why):
    """A shell prefix that fails with exit 127 and a message naming the missing tool."""
    msg = (f"{tool} not found in the box: ComputerBox {why} needs the desktop image {COMPUTERBOX_IMAGE} "
           f"({tool} and an X display on {COMPUTERBOX_DISPLAY})")
    return require_tool_script(f"command -v {tool} >/dev/null 2>&1", msg)


class ComputerBox(SimpleBox):
    """A desktop in a box: cpu=2, memory=2048 (MiB), GUI ports forwarded to the host's
    gui_http_port (3000) / gui_https_port (3001). The image and resolution are fixed
    (1024x768 on DISPLAY=:1): passing image= is a TypeError, never ignored."""

    IMAGE = COMPUTERBOX_IMAGE  # the documented fixed image (tests point it at a local layout)

    def __init__(self, cpu: int = COMPUTERBOX_CPUS, memory: int = COMPUTERBOX_MEMORY_MIB,
                 gui_http_port: int = COMPUTERBOX_GUI_HTTP_PORT, gui_https_port: int = COMPUTERBOX_GUI_HTTPS_PORT,
                 runtime=None, **kwargs):
        for fixed in ("image", "rootfs_path", "cpus", "memory_mib"):
            if fixed in kwargs:
                alt = {"cpus": " (use cpu=)", "memory_mib": " (use memory=)"}.get(fixed, "")
                raise TypeError(f"ComputerBox does not take {fixed}=: the image is fixed to {COMPUTERBOX_IMAGE}"
                                f"{alt}")
        w, h = COMPUTERBOX_SCREEN
        env = kwargs.pop("env", None) or []
        env = list(env.items()) if isinstance(env, dict) else list(env)
        env = [("DISPLAY", COMPUTERBOX_DISPLAY), ("DISPLAY_SIZEW", str(w)), ("DISPLAY_SIZEH", str(h))] + env
        ports = list(kwargs.pop("ports", None) or [])
        ports = [(gui_http_port, COMPUTERBOX_GUI_HTTP_PORT), (gui_https_port, COMPUTERBOX_GUI_HTTPS_PORT)] + ports
        super().__init__(image=self.IMAGE, cpus=cpu, memory_mib=memory, runtime=runtime, env=env, ports=ports,
                         **kwargs)
        self.gui_http_port, self.gui_https_port = gui_http_port, gui_https_port

    async def _run(self, what, script, check=True):
        return await self._sh(what, script, env={"DISPLAY": COMPUTERBOX_DISPLAY}, check=check)

    async def _xdotool(self, *args):
        cmd = "xdotool " + " ".join(shlex.quote(str(a)) for a in args)
        r = await self._run(cmd, _need("xdotool", args[0]) + "exec " + cmd)
        return r.stdout

    async def wait_until_ready(self, timeout: float = DESKTOP_READY_TIMEOUT) -> None:
        """Polls until the X display answers; TimeoutError after `timeout` seconds. A
        box without xdotool fails at once (ExecError naming it)."""
        probe = _need("xdotool", "wait_until_ready") + "xdotool getdisplaygeometry >/dev/null 2>&1"
        await self._poll_until_ready("xdotool getdisplaygeometry", probe, timeout,
                                     f"Desktop did not become ready within {timeout:g} seconds",
                                     env={"DISPLAY": COMPUTERBOX_DISPLAY})

    async def screenshot(self) -> dict:
        """{"data": base64 PNG, "width", "height", "format": "png"} of the whole screen."""
        script = (_need("import", "screenshot") +
                  "import -window root png:- | base64 | tr -d '\\n'")
        r = await self._run("import -window root png:-", script)
        data = r.stdout.strip()
        try:
            png = base64.b64decode(data, validate=True)
            if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
                raise ValueError("not a PNG")
            width, height = struct.unpack(">II", png[16:24])
        except (ValueError, struct.error) as e:
            raise ParseError(f"Failed to parse screenshot: {e}") from None
        return {"data": data, "width": width, "height": height, "format": "png"}

    async def mouse_move(self, x: int, y: int) -> None:
        await self._xdotool("mousemove", int(x), int(y))

    async def left_click(self) -> None:
        await self._xdotool("click", 1)

    async def right_click(self) -> None:
        await self._xdotool("click", 3)

    async def middle_click(self) -> None:
        await self._xdotool("click", 2)

    async def double_click(self) -> None:
        await self._xdotool("click", "--repeat", 2, 1)

    async def triple_click(self) -> None:
        await self._xdotool("click", "--repeat", 3, 1)

    async def left_click_drag(self, start_x: int, start_y: int, end_x: int, end_y: int) -> None:
        await self._xdotool("mousemove", int(start_x), int(start_y), "mousedown", 1,
                            "mousemove", int(end_x), int(end_y), "mouseup", 1)

    async def cursor_position(self):
        """(x, y); ParseError when xdotool's output does not parse."""
        out = await self._xdotool("getmouselocation", "--shell")
        vals = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        try:
            return int(vals["X"]), int(vals["Y"])
        except (KeyError, ValueError):
            raise ParseError(f"Failed to parse cursor position from xdotool output: {out!r}") from None

    async def type(self, text: str) -> None:  # noqa: A003 - documented name
        await self._xdotool("type", "--", text)

    async def key(self, text: str) -> None:
        await self._xdotool("key", "--", text)

    async def scroll(self, x: int, y: int, direction: str, amount: int = 3) -> None:
        if direction not in _SCROLL_BUTTONS:
            raise ValueError(f"scroll direction must be one of up, down, left, right, not {direction!r}")
        await self._xdotool("mousemove", int(x), int(y), "click", "--repeat", int(amount), _SCROLL_BUTTONS[direction])

    async def get_screen_size(self):
        """(width, height); ParseError when xdotool's output does not parse."""
        out = await self._xdotool("getdisplaygeometry")
        parts = out.split()
        try:
            if len(parts) != 2:
                raise ValueError
            return int(parts[0]), int(parts[1])
        except ValueError:
            raise ParseError(f"Failed to parse screen size from xdotool output: {out!r}") from None

