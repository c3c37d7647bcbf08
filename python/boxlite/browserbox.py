"""BrowserBox: a browser in a box (mcr.microsoft.com/playwright:v1.58.0-jammy), reached
from the host through Playwright Server (playwright_endpoint) or CDP (endpoint),
with the documented BrowserBoxOptions and defaults (chromium, 2 CPUs, 2048 MiB,
port 3000, cdp_port 9222).

Both endpoints start a server inside the box with an exec and wait until it
listens. In a box without it (another image), the error names what is missing."""
import asyncio
import time
from dataclasses import dataclass
from typing import Optional

from .errors import TimeoutError
from .simplebox import SimpleBox, require_tool_script

BROWSERBOX_IMAGE = "mcr.microsoft.com/playwright:v1.58.0-jammy"
BROWSERBOX_PLAYWRIGHT_PORT = 3000
BROWSERBOX_CDP_PORT = 9222
_BROWSERS = ("chromium", "firefox", "webkit")


@dataclass
class BrowserBoxOptions:
    browser: str = "chromium"
    memory: int = 2048
    cpu: int = 2
    port: Optional[int] = None      # Playwright Server, host side (None = 3000)
    cdp_port: Optional[int] = None  # CDP, host side (None = 9222)

    def __post_init__(self):
        if self.browser not in _BROWSERS:
            raise ValueError(f"BrowserBoxOptions browser must be one of {', '.join(_BROWSERS)}, not {self.browser!r}")


def _listening(port):
    """A shell test for a TCP socket listening on `port` (no tool needed: /proc)."""
    return f"grep -qi ':{port:04X} [0-9A-F:]* 0A' /proc/net/tcp /proc/net/tcp6 2>/dev/null"


class BrowserBox(SimpleBox):
    """BrowserBox(options: BrowserBoxOptions | None = None, runtime=None, **kwargs)."""

    IMAGE = BROWSERBOX_IMAGE  # the documented image (tests point it at a local layout)

    def __init__(self, options: Optional[BrowserBoxOptions] = None, runtime=None, **kwargs):
        if options is not None and not isinstance(options, BrowserBoxOptions):
            raise TypeError("BrowserBox's first argument is a BrowserBoxOptions (the browser type is set there, "
                            "not with constructor keywords)")
        for fixed in ("browser", "image", "rootfs_path"):
            if fixed in kwargs:
                raise TypeError(f"BrowserBox does not take {fixed}=: set it through BrowserBoxOptions"
                                if fixed == "browser" else
                                f"BrowserBox does not take {fixed}=: the image is {BROWSERBOX_IMAGE}")
        self.options = o = options or BrowserBoxOptions()
        self._host_port = o.port or BROWSERBOX_PLAYWRIGHT_PORT
        self._host_cdp_port = o.cdp_port or BROWSERBOX_CDP_PORT
        ports = [(self._host_port, BROWSERBOX_PLAYWRIGHT_PORT), (self._host_cdp_port, BROWSERBOX_CDP_PORT)]
        ports += list(kwargs.pop("ports", None) or [])
        kwargs.setdefault("cpus", o.cpu)
        kwargs.setdefault("memory_mib", o.memory)
        super().__init__(image=self.IMAGE, runtime=runtime, ports=ports, **kwargs)
        self._mode = None

    def _claim(self, mode):
        if self._mode is not None and self._mode != mode:
            other = "playwright_endpoint()" if self._mode == "playwright" else "endpoint()"
            raise RuntimeError(f"BrowserBox: {other} was already used on this box; endpoint() and "
                               "playwright_endpoint() are mutually exclusive on one instance")
        self._mode = mode

    async def _serve(self, what, tool, test, start, port, timeout):
        """Starts `start` in the background in the box and waits for `port`; `test`
        (a shell test) must pass first, else ExecError naming the missing `tool`."""
        check = require_tool_script(test, f"{tool} not found in the box: BrowserBox {what} needs the image {BROWSERBOX_IMAGE}")
        await self._sh(start, f"{check}{_listening(port)} && exit 0; "
                       f"nohup {start} >/tmp/boxlite-browser.log 2>&1 </dev/null & exit 0")
        deadline = time.monotonic() + timeout
        while True:
            if (await self.exec("sh", "-c", _listening(port))).exit_code == 0:
                return
            if time.monotonic() >= deadline:
                log = (await self.exec("sh", "-c", "tail -c 2000 /tmp/boxlite-browser.log")).stdout
                raise TimeoutError(f"Browser did not become ready within {timeout:g} seconds: {log.strip()}")
            await asyncio.sleep(0.5)

    async def playwright_endpoint(self, timeout: float = 60) -> str:
        """Starts Playwright Server in the box (any browser); returns ws://localhost:PORT/."""
        self._claim("playwright")
        await self._serve("playwright_endpoint()", "npx", "command -v npx >/dev/null 2>&1",
                          f"npx -y playwright run-server --port {BROWSERBOX_PLAYWRIGHT_PORT} --host 0.0.0.0",
                          BROWSERBOX_PLAYWRIGHT_PORT, timeout)
        return f"ws://localhost:{self._host_port}/"

    async def endpoint(self, timeout: float = 60) -> str:
        """Starts the browser with remote debugging (CDP; not WebKit: ValueError) and
        returns http://localhost:CDP_PORT."""
        if self.options.browser == "webkit":
            raise ValueError("webkit has no CDP endpoint: use playwright_endpoint() for webkit")
        self._claim("cdp")
        if self.options.browser == "chromium":
            glob, flags = "/ms-playwright/chromium-*/chrome-linux/chrome", ("--headless=new --no-sandbox "
                                                                           "--remote-debugging-address=0.0.0.0")
        else:
            glob, flags = "/ms-playwright/firefox-*/firefox/firefox", "--headless"
        start = f"sh -c 'exec $(ls -d {glob} | head -n1) {flags} --remote-debugging-port={BROWSERBOX_CDP_PORT}'"
        await self._serve("endpoint()", f"the {self.options.browser} binary ({glob})",
                          f"ls -d {glob} >/dev/null 2>&1", start, BROWSERBOX_CDP_PORT, timeout)
        return f"http://localhost:{self._host_cdp_port}"

    async def connect(self, timeout: float = 60):
        """A host-side Playwright Browser connected to playwright_endpoint() (needs the
        playwright package on the host; ImportError naming it otherwise)."""
        try:
            from playwright.async_api import async_playwright
        except ImportError as e:
            raise ImportError("BrowserBox.connect() needs the playwright package on the host: "
                              "pip install playwright==1.58.0") from e
        ws = await self.playwright_endpoint(timeout=timeout)
        pw = await async_playwright().start()
        return await getattr(pw, self.options.browser).connect(ws)
