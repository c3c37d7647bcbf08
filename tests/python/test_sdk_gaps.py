"""The gaps of issue 9: stage metrics through the C API, SecurityOptions presets
mapped to the core, ExecError/ParseError where the SDK raises them (ComputerBox),
BrowserBox, Boxlite.rest / rt.volumes refusals, the Stopped message format,
finalisers off the caller's thread, and bounded unread output."""
import asyncio
import gc
import socket
import time
import warnings

import pytest

import boxlite
from boxlite import BoxOptions, SimpleBox
from boxlite import runtime as rtmod


def free_port():
    """A host port nobody listens on now. Fixed ports in the kernel's ephemeral range
    (32768-60999 here) collide now and then with some connection's local port."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def run(coro):
    return asyncio.run(coro)


# ---- 1. BoxMetrics stage_* through boxlite_box_metrics_ex

def test_box_metrics_stage_timings(image):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            box = await rt.create(BoxOptions(image=image))
            m = await box.metrics()
            assert m.stage_image_prepare_ms is not None and m.stage_image_prepare_ms >= 0
            assert m.stage_box_spawn_ms is None  # never started
            async with box:
                await (await box.exec("true")).wait()
                m = await box.metrics()
            for name in ("stage_filesystem_setup_ms", "stage_image_prepare_ms", "stage_box_spawn_ms",
                         "stage_container_init_ms"):
                v = getattr(m, name)
                assert isinstance(v, int) and v >= 0, (name, v)
            assert m.stage_guest_rootfs_ms is None  # a jail box has no disk image
            assert m.total_create_duration_ms > 0 and m.guest_boot_duration_ms >= 0
            assert m.commands_executed_total >= 1
            rm = await rt.metrics()
            assert {"num_running_boxes", "boxes_created_total", "boxes_failed_total", "total_commands_executed",
                    "total_exec_errors"} <= set(vars(rm))
    run(main())


# ---- 3. SecurityOptions presets mapped to the core

def limit(name):
    """The soft limit `name` of /proc/self/limits, printed by the box's shell."""
    return f"grep '^{name}  ' /proc/self/limits | awk '{{print $(NF-2)}}'"


SHOW = f"ulimit -n; {limit('Max processes')}; grep Seccomp: /proc/self/status"


def test_security_presets_are_usable_and_enforced(image):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            sec = boxlite.AdvancedBoxOptions(security=boxlite.SecurityOptions.maximum())
            async with SimpleBox(image=image, runtime=rt, advanced=sec) as box:
                r = await box.exec("sh", "-c", SHOW + "; " + limit("Max file size"))
                lines = r.stdout.split("\n")
                assert lines[0] == "1024" and lines[1] == "100", r.stdout
                assert "Seccomp:\t2" in r.stdout
                assert lines[3] == str(1 << 30), r.stdout  # max_file_size = 1 GiB
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # standard(): nothing to warn about
                async with SimpleBox(image=image, runtime=rt, advanced=boxlite.AdvancedBoxOptions(
                        security=boxlite.SecurityOptions.standard())) as box:
                    r = await box.exec("sh", "-c", SHOW)
                    assert "Seccomp:\t2" in r.stdout and r.stdout.split()[:2] != ["1024", "100"], r.stdout
            with pytest.warns(RuntimeWarning, match="jailer_enabled=False.*close_fds=False"):
                box = SimpleBox(image=image, runtime=rt, advanced=boxlite.AdvancedBoxOptions(
                    security=boxlite.SecurityOptions.development()))
                await box.start()
            try:
                r = await box.exec("sh", "-c", SHOW)
                assert "Seccomp:\t0" in r.stdout  # development(): the seccomp filter is off
            finally:
                await box.stop()
            custom = boxlite.SecurityOptions(jailer_enabled=True, seccomp_enabled=True, max_open_files=77,
                                             max_cpu_time=600, max_memory=8 << 30, max_file_size=1 << 20)
            async with SimpleBox(image=image, runtime=rt, advanced=boxlite.AdvancedBoxOptions(
                    security=custom)) as box:
                r = await box.exec("sh", "-c", f"ulimit -n; {limit('Max cpu time')}; {limit('Max address space')}; "
                                   "dd if=/dev/zero of=/f bs=1024 count=2048 2>/dev/null; wc -c </f")
                assert r.stdout.split() == ["77", "600", str(8 << 30), str(1 << 20)], r.stdout
    with pytest.raises(ValueError, match="max_processes must be a positive int"):
        boxlite.SecurityOptions(max_processes=0)
    run(main())


# ---- 2 + 4. ComputerBox: documented defaults, ExecError / ParseError / TimeoutError

FAKE_XDOTOOL = r"""#!/bin/sh
mode=$(cat /tmp/xmode 2>/dev/null)
case "$1" in
  getmouselocation) [ "$mode" = bad ] && echo 'garbage' || printf 'X=10\nY=20\nSCREEN=0\nWINDOW=1\n' ;;
  getdisplaygeometry) [ "$mode" = down ] && { echo "Can't open display" >&2; exit 1; }; echo '1024 768' ;;
  click) echo "click failed: $*" >&2; exit 3 ;;
  *) echo "$@" >> /tmp/xlog ;;
esac
"""


def test_computerbox_defaults_and_errors(image, monkeypatch, tmp_path):
    with pytest.raises(TypeError, match="image is fixed to lscr.io/linuxserver/webtop:ubuntu-xfce"):
        boxlite.ComputerBox(image="alpine")
    cb = boxlite.ComputerBox()
    assert (cb._options.cpus, cb._options.memory_mib) == (2, 2048)
    assert cb._options.image == "lscr.io/linuxserver/webtop:ubuntu-xfce"
    assert cb._options.ports[:2] == [(3000, 3000, "tcp", None), (3001, 3001, "tcp", None)]
    assert ("DISPLAY", ":1") in cb._options.env
    monkeypatch.setattr(boxlite.ComputerBox, "IMAGE", image)  # no desktop image here: busybox

    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            async with boxlite.ComputerBox(runtime=rt, gui_http_port=free_port(), gui_https_port=free_port()) as desk:
                info = await desk.info()
                assert (info.cpus, info.memory_mib) == (2, 2048)
                # No xdotool in the box: a clear error naming what is missing.
                with pytest.raises(boxlite.ExecError, match="xdotool not found in the box.*webtop") as e:
                    await desk.wait_until_ready(timeout=5)
                assert e.value.exit_code == 127
                with pytest.raises(boxlite.ExecError, match="xdotool not found"):
                    await desk.mouse_move(1, 2)
                with pytest.raises(boxlite.ExecError, match="import not found in the box"):
                    await desk.screenshot()
                # A stand-in xdotool: parse errors and failing actions.
                src = tmp_path / "xdotool"
                src.write_text(FAKE_XDOTOOL)
                await desk.copy_in(str(src), "/bin/xdotool")
                assert (await desk.exec("chmod", "755", "/bin/xdotool")).exit_code == 0
                await desk.wait_until_ready(timeout=5)
                assert await desk.get_screen_size() == (1024, 768)
                assert await desk.cursor_position() == (10, 20)
                await desk.mouse_move(5, 6)
                await desk.type("hi there")
                await desk.key("ctrl+c")
                await desk.scroll(1, 2, "down", amount=2)
                await desk.left_click_drag(1, 2, 3, 4)
                log = (await desk.exec("cat", "/tmp/xlog")).stdout
                assert log.splitlines() == ["mousemove 5 6", "type -- hi there", "key -- ctrl+c",
                                            "mousemove 1 2 click --repeat 2 5",
                                            "mousemove 1 2 mousedown 1 mousemove 3 4 mouseup 1"]
                with pytest.raises(ValueError, match="scroll direction"):
                    await desk.scroll(1, 2, "sideways")
                with pytest.raises(boxlite.ExecError) as e:
                    await desk.left_click()
                assert (e.value.command, e.value.exit_code) == ("xdotool click 1", 3)
                assert "click failed: click 1" in e.value.stderr
                assert isinstance(e.value, boxlite.BoxliteError)
                await desk.exec("sh", "-c", "echo bad > /tmp/xmode")
                with pytest.raises(boxlite.ParseError, match="Failed to parse cursor position"):
                    await desk.cursor_position()
                await desk.exec("sh", "-c", "echo down > /tmp/xmode")
                t = time.monotonic()
                with pytest.raises(boxlite.TimeoutError, match="Desktop did not become ready within 1 seconds"):
                    await desk.wait_until_ready(timeout=1)
                assert time.monotonic() - t < 10
    run(main())


def test_timeout_error_is_not_the_builtin():
    assert issubclass(boxlite.TimeoutError, boxlite.BoxliteError)
    assert not issubclass(boxlite.TimeoutError, TimeoutError)  # as documented
    assert boxlite.ParseError("x").message == "x"


# ---- 4. BrowserBox

def test_browserbox_options_and_missing_browser(image, monkeypatch):
    o = boxlite.BrowserBoxOptions()
    assert (o.browser, o.cpu, o.memory, o.port, o.cdp_port) == ("chromium", 2, 2048, None, None)
    with pytest.raises(ValueError, match="browser must be one of chromium, firefox, webkit"):
        boxlite.BrowserBoxOptions(browser="opera")
    with pytest.raises(TypeError, match="BrowserBoxOptions"):
        boxlite.BrowserBox(browser="chromium")
    bb = boxlite.BrowserBox()
    assert (bb._options.cpus, bb._options.memory_mib) == (2, 2048)
    assert bb._options.image == "mcr.microsoft.com/playwright:v1.58.0-jammy"
    monkeypatch.setattr(boxlite.BrowserBox, "IMAGE", image)

    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            opts = boxlite.BrowserBoxOptions(port=free_port(), cdp_port=free_port())
            async with boxlite.BrowserBox(opts, runtime=rt) as bb:
                with pytest.raises(boxlite.ExecError, match="npx not found in the box.*playwright:v1.58.0-jammy"):
                    await bb.playwright_endpoint(timeout=5)
                with pytest.raises(RuntimeError, match="mutually exclusive"):
                    await bb.endpoint(timeout=5)
            async with boxlite.BrowserBox(boxlite.BrowserBoxOptions(port=free_port(), cdp_port=free_port()),
                                          runtime=rt) as bb:
                with pytest.raises(boxlite.ExecError, match="chromium binary .* not found in the box"):
                    await bb.endpoint(timeout=5)
            with pytest.raises(ValueError, match="webkit has no CDP"):
                await boxlite.BrowserBox(boxlite.BrowserBoxOptions(browser="webkit")).endpoint()
    run(main())


# ---- 4. Boxlite.rest and rt.volumes: refused, naming them

def test_rest_and_volumes_are_refused_by_name(monkeypatch):
    from boxlite import ApiKeyCredential, BoxliteRestOptions
    opts = BoxliteRestOptions(url="https://api.boxlite.ai", credential=ApiKeyCredential("blk_live_x"))
    assert "blk_live_x" not in repr(opts)
    with pytest.raises(RuntimeError, match=r"Boxlite.rest\(\) is not supported: boxlite has no REST runtime"):
        boxlite.Boxlite.rest(opts)
    monkeypatch.delenv("BOXLITE_REST_URL", raising=False)
    with pytest.raises(ValueError, match="BOXLITE_REST_URL"):
        BoxliteRestOptions.from_env()
    monkeypatch.setenv("BOXLITE_REST_URL", "http://localhost:1")
    monkeypatch.setenv("BOXLITE_API_KEY", "k")
    assert BoxliteRestOptions.from_env().credential.api_key == "k"

    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            for call, name in ((rt.volumes.create("v"), "create"), (rt.volumes.list(), "list"),
                               (rt.volumes.get("x"), "get"), (rt.volumes.remove("x"), "remove")):
                with pytest.raises(RuntimeError, match=rf"rt.volumes.{name}\(\) is not supported: managed volumes "
                                                       "need a REST runtime"):
                    await call
    run(main())


# ---- Stopped: "stopped: <message>"

def test_stopped_errors_have_the_documented_form(image):
    err = boxlite.errors.from_code(11, "Handle invalidated after stop(). Use runtime.get() to get a new handle.")
    assert str(err) == "stopped: Handle invalidated after stop(). Use runtime.get() to get a new handle."
    assert isinstance(err, boxlite.errors.StoppedError) and isinstance(err, RuntimeError) and err.kind == "Stopped"
    assert str(boxlite.errors.from_code(11, "stopped: x")) == "stopped: x"

    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            await rt.shutdown()
            with pytest.raises(RuntimeError, match="^stopped: Cannot create box: runtime has been shut down$"):
                await rt.create(BoxOptions(image=image))
    run(main())


# ---- 5. Finalisers never block the caller; unread output is bounded

def test_box_finaliser_does_not_block(image):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            box = await rt.create(BoxOptions(image=image))
            await box.start()
            box_id = box.id
            t = time.monotonic()
            del box
            gc.collect()
            assert time.monotonic() - t < 0.2  # stopping and removing the box happens on the reaper
            assert await asyncio.to_thread(rtmod._reaper.flush, 60)
            assert box_id not in [i.id for i in await rt.list_info()]  # auto_remove: gone
    run(main())


def test_unread_output_is_bounded(image, monkeypatch):
    cap = 256 << 10
    monkeypatch.setattr(rtmod.Execution, "max_unread_bytes", cap)

    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            async with SimpleBox(image=image, runtime=rt) as sb:
                box = sb._box
                total = 16 << 20
                ex = await box.exec("head", args=["-c", str(total), "/dev/zero"])
                await asyncio.sleep(3)
                # cap + the C API's 1 MiB window + one chunk at most, and the command is paused.
                assert 0 < ex.unread_bytes <= cap + (1 << 20) + (256 << 10), ex.unread_bytes
                assert not ex._wait.done()
                got = 0
                async for text in ex.stdout():
                    got += len(text)
                assert got == total
                assert (await ex.wait()).exit_code == 0
                assert ex.unread_bytes == 0
                # A paused command nobody reads can still be killed.
                ex = await box.exec("yes")
                await asyncio.sleep(1)
                await asyncio.wait_for(ex.kill(), 30)
                assert (await asyncio.wait_for(ex.wait(), 30)).exit_code == -9
                # Small output needs no reader: wait() alone completes.
                ex = await box.exec("sh", args=["-c", "head -c 100000 /dev/zero"])
                assert (await asyncio.wait_for(ex.wait(), 30)).exit_code == 0
    run(main())
