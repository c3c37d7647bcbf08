"""SimpleBox and the exec semantics of spec/1 (acceptance checks 1-8, 16, 17, 35)."""
import asyncio
import os
import time

import pytest

import boxlite
from boxlite import BoxOptions, SimpleBox


def run(coro):
    return asyncio.run(coro)


def test_exec_results(image):
    async def main():
        async with SimpleBox(image=image) as box:
            r = await box.exec("sh", "-c", "exit 3")
            assert r.exit_code == 3 and r.error_message is None
            r = await box.exec("false")
            assert r.exit_code == 1
            r = await box.exec("echo", "hello from the box")
            assert (r.exit_code, r.stdout, r.stderr, r.error_message) == (0, "hello from the box\n", "", None)
            r = await box.exec("sh", "-c", "echo err >&2; exit 5")
            assert (r.exit_code, r.stderr) == (5, "err\n")
            assert (await box.exec("sh", "-c", "echo $FOO", env={"FOO": "bar"})).stdout == "bar\n"
            assert (await box.exec("pwd", cwd="/tmp")).stdout == "/tmp\n"
            assert (await box.exec("id", "-un", user="nobody")).stdout == "nobody\n"
            assert (await box.exec("touch", "/tmp/x")).exit_code == 0
            assert (await box.exec("test", "-f", "/tmp/x")).exit_code == 0
    run(main())


def test_missing_command_is_exec_error_127(image):
    """Issue 35 overrides the seed (a RuntimeError, not a BoxliteError): as upstream,
    an ExecError with exit code 127, still a RuntimeError whose message has
    spawn_failed and "not found in $PATH" (docs/decisions.md)."""
    async def main():
        async with SimpleBox(image=image) as box:
            with pytest.raises(RuntimeError) as ei:
                await box.exec("nope")
            assert isinstance(ei.value, boxlite.ExecError) and isinstance(ei.value, boxlite.BoxliteError)
            assert (ei.value.command, ei.value.exit_code) == ("nope", 127)
            assert "spawn_failed" in str(ei.value) and "not found in $PATH" in str(ei.value)
    run(main())


def test_timeout_returns_negative_exit(image):
    async def main():
        async with SimpleBox(image=image) as box:
            t = time.monotonic()
            r = await box.exec("sleep", "30", timeout=1.0)
            took = time.monotonic() - t
            assert r.exit_code < 0 and took < 5, (r, took)
            assert r.timed_out and r.error_message == "Command timed out after 1s"
    run(main())


def test_validation_errors(image):
    with pytest.raises(ValueError, match="Either 'image' or 'rootfs_path' must be provided"):
        SimpleBox()
    with pytest.raises(TypeError):
        BoxOptions(image=image, env={"A": "b"})
    with pytest.raises(TypeError, match="unknown field"):
        BoxOptions(image=image, disk_gib=8)
    with pytest.raises(TypeError, match="volumes entries must be tuple or dict"):
        BoxOptions(image=image, volumes=["name"])
    with pytest.raises(ValueError, match=r"\(must be absolute\)"):
        BoxOptions(image=image, volumes=[("/tmp", "data")])
    with pytest.raises(ValueError, match=r"\(cannot mount to system directory\)"):
        BoxOptions(image=image, volumes=[("/tmp", "/etc")])
    with pytest.raises(ValueError):
        boxlite.NetworkSpec(mode="bogus")
    with pytest.raises(RuntimeError, match="together"):  # documented as RuntimeError
        boxlite.ImageRegistry(host="r.example.com", username="u")


def test_unsupported_options_are_named(image):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            # disk_size_gb sizes a jail box's disk too (docs/storage.md).
            box = await rt.create(BoxOptions(image=image, disk_size_gb=8))
            await rt.remove(box.id, force=True)
            # The presets map to the core (test_sdk_gaps.py checks what they enforce).
            for preset in (boxlite.SecurityOptions.standard(), boxlite.SecurityOptions.maximum()):
                box = await rt.create(BoxOptions(image=image, advanced=boxlite.AdvancedBoxOptions(security=preset)))
                await rt.remove(box.id, force=True)
            with pytest.warns(RuntimeWarning, match="close_fds=False"):
                box = await rt.create(BoxOptions(image=image, advanced=boxlite.AdvancedBoxOptions(
                    security=boxlite.SecurityOptions.development())))
            await rt.remove(box.id, force=True)
    run(main())


def test_a_volume_is_shared_both_ways(image, tmp_path):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            (tmp_path / "in.txt").write_text("from host")
            async with SimpleBox(image=image, runtime=rt, volumes=[(str(tmp_path), "/workspace")]) as box:
                r = await box.exec("sh", "-c", "cat /workspace/in.txt; echo from box > /workspace/out.txt")
                assert r.exit_code == 0, r.stderr
                assert r.stdout == "from host"
            assert (tmp_path / "out.txt").read_text() == "from box\n"
    run(main())


def test_id_before_start_and_lifecycle(image, tmp_path):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            box = SimpleBox(image=image, runtime=rt, auto_remove=False, name="kept")
            with pytest.raises(RuntimeError):
                _ = box.id
            with pytest.raises(RuntimeError, match="Box not started"):
                await box.exec("true")
            async with box:
                box_id = box.id
                assert isinstance(box_id, str) and box_id
                assert (await box.info()).state.status == "running"
                src = tmp_path / "in.txt"
                src.write_text("payload\n")
                await box.copy_in(str(src), "/tmp/in.txt")
                assert (await box.exec("cat", "/tmp/in.txt")).stdout == "payload\n"
                await box.exec("sh", "-c", "echo back > /tmp/out.txt")
                await box.copy_out("/tmp/out.txt", str(tmp_path / "out.txt"))
                assert (tmp_path / "out.txt").read_text() == "back\n"
                m = await box.metrics()
                assert m.commands_executed_total >= 3 and m.memory_bytes >= 0
            # auto_remove=False: still listed until removed
            assert box_id in [i.id for i in await rt.list_info()]
            assert (await rt.get_info("kept")).status == "stopped"
            await rt.remove(box_id, force=True)
            assert box_id not in [i.id for i in await rt.list_info()]
            # auto_remove=True (default): gone after stop
            async with SimpleBox(image=image, runtime=rt) as b2:
                gone = b2.id
            assert gone not in [i.id for i in await rt.list_info()]
            rm = await rt.metrics()
            assert rm.boxes_created_total == 2 and rm.total_commands_executed >= 2
    run(main())


def test_16_concurrent_exec_no_hang(image):
    """Acceptance: 16 concurrent SimpleBox.exec with asyncio.gather, 10 rounds."""
    async def main():
        async with SimpleBox(image=image) as box:
            for _ in range(10):
                results = await asyncio.wait_for(
                    asyncio.gather(*[box.exec("echo", f"hello_{i}", timeout=30.0) for i in range(16)]), 60)
                assert [r.stdout for r in results] == [f"hello_{i}\n" for i in range(16)]
                assert all(r.exit_code == 0 for r in results)
    run(main())


def test_large_output_and_ordering(image):
    async def main():
        async with SimpleBox(image=image) as box:
            r = await box.exec("sh", "-c", "i=0; while [ $i -lt 20000 ]; do echo line$i; i=$((i+1)); done")
            lines = r.stdout.splitlines()
            assert lines == [f"line{i}" for i in range(20000)]
    run(main())
