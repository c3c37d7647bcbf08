"""The reference's Python API where the SDK diverged from it (seeds/002): BoxInfo.state
(a BoxStateInfo), info() awaitable everywhere, SimpleBox(reuse_existing=), the volume
errors, no box left by a failed start, the native wait()'s error_message, the
documented RuntimeErrors, Box.name, list_info(_state), a cancelled SimpleBox.exec,
NUL bytes, a str where a list is expected, and the minor documented errors."""
import asyncio
import gc
import inspect

import pytest

import boxlite
from boxlite import BoxOptions, BoxStateInfo, SimpleBox


def run(coro):
    return asyncio.run(coro)


def test_box_info_state_name_and_list_info_filter(image):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            box = await rt.create(BoxOptions(image=image, auto_remove=False), name="ref-info")
            try:
                assert box.name == "ref-info"
                info = box.info()  # synchronous, as the reference's troubleshooting shows
                assert isinstance(info.state, BoxStateInfo)
                assert (info.state.status, info.state.running, info.state.pid) == ("configured", False, None)
                assert str(info.state) == "configured" and info.state == "configured" and info.status == "configured"
                assert (await box.info()).state.status == "configured"  # and awaitable, as its table says
                await box.start()
                info = await box.info()
                assert info.state.status == "running" and info.state.running is True
                assert isinstance(info.state.pid, int) and info.state.pid > 0
                assert info.id == box.id and info.image and info.cpus >= 1 and info.memory_mib >= 1
                got = await rt.get_info("ref-info")
                assert got.state.status == "running" and got.state == "running"
                listed = await rt.list_info()
                assert [i.state.status for i in listed if i.id == box.id] == ["running"]
                assert box.id in [i.id for i in await rt.list_info("running")]
                assert box.id in [i.id for i in await rt.list_info(_state=info.state)]
                assert await rt.list_info(_state="stopped") == []
                with pytest.raises(TypeError, match="_state"):
                    await rt.list_info(3)
                await box.stop()
                assert (await rt.get_info(box.id)).state == "stopped"
                assert box.id in [i.id for i in await rt.list_info("stopped")]
            finally:
                await rt.remove(box.id, force=True)
            unnamed = await rt.create(BoxOptions(image=image))
            assert unnamed.name is None
            await rt.remove(unnamed.id, force=True)
            async with SimpleBox(image=image, runtime=rt, name="ref-simple") as sb:
                pending = sb.info()
                assert inspect.iscoroutine(pending)  # SimpleBox.info is async def
                info = await pending
                assert info.state.status == "running" and info.state.running and info.name == "ref-simple"
            before = SimpleBox(image=image, runtime=rt)
            with pytest.raises(RuntimeError, match="Box not started"):
                await before.info()
    run(main())


def test_reuse_existing_and_get_or_create_without_name(image):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            async with SimpleBox(image=image, runtime=rt, name="ref-reuse", auto_remove=False,
                                 reuse_existing=True) as first:
                first_id = first.id
                await first.exec("sh", "-c", "echo kept > /root/mark")
            async with SimpleBox(image=image, runtime=rt, name="ref-reuse", auto_remove=False,
                                 reuse_existing=True) as again:
                assert again.id == first_id
                assert (await again.exec("cat", "/root/mark")).stdout == "kept\n"
            with pytest.raises(RuntimeError):  # without reuse_existing the name is taken
                async with SimpleBox(image=image, runtime=rt, name="ref-reuse", auto_remove=False):
                    pass
            assert [i.id for i in await rt.list_info()] == [first_id]  # the refused create left nothing
            await rt.remove(first_id, force=True)
            box, created = await rt.get_or_create(BoxOptions(image=image))
            assert created and box.name is None
            await rt.remove(box.id, force=True)
            assert await rt.list_info() == []
    run(main())


def test_volume_forms_and_errors(image, tmp_path):
    with pytest.raises(TypeError, match=r"^argument 'volumes': 'str' object cannot be cast as 'bool'$"):
        BoxOptions(image=image, volumes=[("/data", "/workspace", "ro")])
    with pytest.raises(TypeError, match="'int' object cannot be cast as 'bool'"):
        BoxOptions(image=image, volumes=[{"host": "/data", "guest": "/workspace", "read_only": 1}])
    for bad in ([("/data",)], [("/data", "/g", True, 1)]):
        with pytest.raises(RuntimeError, match=r"^volumes tuples must be \(host, guest\[, read_only\]\)$"):
            BoxOptions(image=image, volumes=bad)
    with pytest.raises(RuntimeError, match="^volume dict missing host/host_path$"):
        BoxOptions(image=image, volumes=[{"guest": "/workspace"}])
    with pytest.raises(RuntimeError, match="^volume dict missing guest/guest_path$"):
        BoxOptions(image=image, volumes=[{"host": "/data"}])
    with pytest.raises(TypeError):
        BoxOptions(image=image, volumes="/data:/workspace")
    opts = BoxOptions(image=image, volumes=[{"host": "/a", "guest": "/b"}, {"host_path": "/c", "guest_path": "/d",
                                            "read_only": True}, {"source": "/e", "target": "/f"}, ("/g", "/h", True)])
    assert opts.volumes == [("/a", "/b", False), ("/c", "/d", True), ("/e", "/f", False), ("/g", "/h", True)]
    (tmp_path / "in.txt").write_text("shared")
    (tmp_path / "rw").mkdir()

    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            async with SimpleBox(image=image, runtime=rt, volumes=[
                    {"host": str(tmp_path), "guest": "/ro", "read_only": True},
                    (str(tmp_path / "rw"), "/rw")]) as box:
                assert (await box.exec("cat", "/ro/in.txt")).stdout == "shared"
                assert (await box.exec("touch", "/ro/new")).exit_code != 0
                assert (await box.exec("touch", "/rw/new")).exit_code == 0
        assert not (tmp_path / "new").exists() and (tmp_path / "rw" / "new").exists()
    run(main())


def test_failed_start_leaves_no_box(image):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            for kwargs in ({"image": image, "working_dir": "/nonexistent"}, {"image": "no-such-image:latest"},
                           {"image": image, "working_dir": "/nonexistent", "auto_remove": False,
                            "name": "ref-failed"}):
                with pytest.raises(RuntimeError):
                    async with SimpleBox(runtime=rt, **kwargs):
                        pass
                assert await rt.list_info() == [], kwargs
            # A reused box whose start fails is the caller's: it is kept.
            box = await rt.create(BoxOptions(image=image, auto_remove=False, working_dir="/nonexistent"),
                                  name="ref-kept")
            with pytest.raises(RuntimeError):
                await SimpleBox(image=image, runtime=rt, name="ref-kept", reuse_existing=True).start()
            assert [i.id for i in await rt.list_info()] == [box.id]
            await rt.remove(box.id, force=True)
    run(main())


def test_native_wait_error_message(image):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            box = await rt.create(BoxOptions(image=image))
            try:
                res = await (await box.exec("true")).wait()
                assert (res.exit_code, res.error_message) == (0, None)
                res = await (await box.exec("sh", ["-c", "exit 4"])).wait()
                assert (res.exit_code, res.error_message) == (4, None)
                res = await (await box.exec("sleep", ["30"], timeout_secs=0.5)).wait()
                assert res.exit_code < 0 and res.error_message == "Command timed out after 0.5s"
                ex = await box.exec("sleep", ["30"])
                await ex.kill()
                res = await ex.wait()
                assert (res.exit_code, res.error_message) == (-9, "killed by signal 9")
                assert not hasattr(res, "stdout")  # the native result has no output, as documented
            finally:
                await rt.remove(box.id, force=True)
    run(main())


def test_documented_runtime_errors():
    with pytest.raises(RuntimeError, match="^unsupported registry transport: HTTP$"):
        boxlite.ImageRegistry(host="r.example.com", transport="HTTP")
    with pytest.raises(RuntimeError, match="^image registry host must be host\\[:port\\], not a URL: "
                                           "https://registry.example.com$"):
        boxlite.ImageRegistry(host="https://registry.example.com")
    with pytest.raises(RuntimeError, match="^image registry host is required$"):
        boxlite.ImageRegistry(host="")
    with pytest.raises(RuntimeError, match="^registry username and password must be provided together$"):
        boxlite.ImageRegistry(host="r.example.com", password="p")

    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            with pytest.raises(RuntimeError) as ei:  # a wrong image reference, as the reference catches it
                async with SimpleBox(image="Not A Valid//Reference:!", runtime=rt):
                    pass
            assert isinstance(ei.value, ValueError) and isinstance(ei.value, boxlite.InvalidArgumentError)
            assert await rt.list_info() == []
    run(main())


def test_cancelled_exec_kills_the_command_quietly(image):
    async def main():
        noise = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: noise.append(ctx))
        with boxlite.Boxlite(boxlite.Options()) as rt:
            async with SimpleBox(image=image, runtime=rt) as box:
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(box.exec("sleep", "31"), 1.0)
                # Cancelled while the exec starts, too.
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(box.exec("sleep", "32"), 0.001)
                for _ in range(50):
                    ps = (await box.exec("ps", "-o", "args")).stdout
                    if "sleep 31" not in ps and "sleep 32" not in ps:
                        break
                    await asyncio.sleep(0.1)
                assert "sleep 31" not in ps and "sleep 32" not in ps, ps
                r = await box.exec("echo", "still works")
                assert r.stdout == "still works\n"
        gc.collect()
        await asyncio.sleep(0.1)
        assert noise == []
    run(main())


def test_embedded_nul_and_str_for_list(image):
    with pytest.raises(TypeError, match="entrypoint must be a list of str"):
        BoxOptions(image=image, entrypoint="sh")
    with pytest.raises(TypeError, match="cmd must be a list of str"):
        BoxOptions(image=image, cmd="sleep 1")
    with pytest.raises(TypeError, match="hosts must be a list of str"):
        boxlite.Secret(name="k", value="v", hosts="api.example.com")
    with pytest.raises(TypeError):
        boxlite.Options(image_registries=boxlite.ImageRegistry(host="r.example.com"))

    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            with pytest.raises(ValueError, match="^embedded null byte$"):
                await rt.create(BoxOptions(image=image), name="a\0b")
            with pytest.raises(ValueError, match="^embedded null byte$"):
                await rt.create(BoxOptions(image=image, env=[("A", "x\0y")]))
            assert await rt.list_info() == []
            async with SimpleBox(image=image, runtime=rt, cmd=["sleep", "30"]) as box:
                with pytest.raises(ValueError, match="^embedded null byte$"):
                    await box.exec("echo", "a\0b")
                with pytest.raises(ValueError, match="^embedded null byte$"):
                    await box.exec("echo", "ok", env={"A": "x\0y"})
                with pytest.raises(TypeError, match="argument 'args'"):
                    await box._box.exec("echo", args="abc")
                assert (await box.exec("echo", "a", "b")).stdout == "a b\n"
    run(main())


def test_minor_documented_errors(image):
    with pytest.raises(OverflowError, match="out of range integral type conversion attempted"):
        BoxOptions(image=image, cpus=300)
    with pytest.raises(OverflowError):
        SimpleBox(image=image, cpus=256)
    assert BoxOptions(image=image, cpus=255).cpus == 255

    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            box = SimpleBox(image=image, runtime=rt)
            with pytest.raises(RuntimeError, match="Box not started"):
                await box.stop()
            async with box:
                with pytest.raises(ValueError, match="^timeout must be a number >= 0"):
                    await box.exec("true", timeout=-1)
                with pytest.raises(ValueError, match="^timeout_secs must be a number >= 0"):
                    await box._box.exec("true", timeout_secs=-1)
            await box.stop()  # a second stop does nothing
            async with boxlite.InteractiveBox(image, runtime=rt, tty=False) as ib:
                await ib.execution.write_stdin("exit 3\n")
                assert await asyncio.wait_for(ib.wait(), 30) is None
            assert await rt.list_info() == []
    run(main())


def test_attach_follows_the_main_command_and_returns_its_exit_code(image):
    # The reference's "Exit codes" example: attach() on the box runtime.create() made.
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            box = await rt.create(BoxOptions(image=image, cmd=["sh", "-c", "echo 'work done'; exit 7"]))
            try:
                await box.start()
                execution = await box.attach()
                lines = [line.rstrip() async for line in execution.stdout()]
                assert lines == ["work done"]
                assert (await execution.wait()).exit_code == 7
                # Never started: attach starts it; over already: its kept output and code.
                later = await rt.create(BoxOptions(image=image, cmd=["sh", "-c", "echo again; exit 3"]))
                first = await later.attach()
                assert (await first.wait()).exit_code == 3
                again = await later.attach()
                assert [line async for line in again.stdout()] == ["again\n"]
                assert (await again.wait()).exit_code == 3
                await rt.remove(later.id, force=True)
            finally:
                await rt.remove(box.id, force=True)
            assert not hasattr(SimpleBox, "attach")  # as documented: SimpleBox has none
    run(main())


def test_copy_takes_the_documented_parameters(image, tmp_path):
    # overwrite (True), follow_symlinks (False), include_parent (True), as the
    # reference's copy table gives them, on SimpleBox and the native box alike.
    async def main():
        src = tmp_path / "proj"
        src.mkdir()
        (src / "a.txt").write_text("new\n")
        async with SimpleBox(image=image) as box:
            await box.exec("sh", "-c", "mkdir -p /w/keep && echo old > /w/a.txt && ln -s /etc/hostname /w/link")
            await box.copy_in(str(src), "/w/keep")  # include_parent: /w/keep/proj
            await box.copy_in(str(src), "/w", include_parent=False)  # contents into /w
            assert (await box.exec("cat", "/w/keep/proj/a.txt", "/w/a.txt")).stdout == "new\nnew\n"
            (src / "a.txt").write_text("newer\n")
            with pytest.raises(RuntimeError, match="already exists"):
                await box.copy_in(str(src / "a.txt"), "/w/a.txt", overwrite=False)
            assert (await box.exec("cat", "/w/a.txt")).stdout == "new\n"
            out = tmp_path / "out"
            out.mkdir()
            await box.copy_out("/w/link", str(out / "as-link"))
            assert (out / "as-link").is_symlink()
            await box.copy_out("/w/link", str(out / "followed"), follow_symlinks=True)
            assert not (out / "followed").is_symlink() and (out / "followed").read_text().strip()
            with pytest.raises(TypeError, match="overwrite"):
                await box.copy_out("/w/a.txt", str(out / "x"), overwrite="yes")
    run(main())
