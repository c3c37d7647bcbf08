"""Native Boxlite/Box/Execution, metrics, images, network, secrets, registries."""
import asyncio
import os

import pytest

import boxlite
from boxlite import BoxOptions, NetworkSpec, Secret


def run(coro):
    return asyncio.run(coro)


def test_native_box_streaming(image):
    async def main():
        with boxlite.Boxlite.default() as rt:
            box = await rt.create(BoxOptions(image=image), name="native")
            async with box:
                with pytest.raises(TypeError, match="'dict' object cannot be cast as 'Sequence'"):
                    await box.exec("env", env={"A": "b"})
                ex = await box.exec("sh", args=["-c", "echo $A; echo e >&2"], env=[("A", "b")])
                out = [line async for line in ex.stdout()]
                err = [line async for line in ex.stderr()]
                assert (out, err) == (["b\n"], ["e\n"])
                assert (await ex.wait()).exit_code == 0
                ex = await box.exec("echo", args=["hi"])
                lines = [line async for line in ex.stdout()]
                assert "hi" in lines[0] and (await ex.wait()).exit_code == 0
                ex = await box.exec("sleep", args=["30"])
                await ex.kill()
                assert (await ex.wait()).exit_code == -9
                ex = await box.exec("sleep", args=["30"], timeout_secs=0.5)
                res = await ex.wait()
                assert res.exit_code < 0 and res.timed_out
                m = await box.metrics()
                assert m.commands_executed_total >= 4 and m.total_create_duration_ms > 0
                assert m.stage_box_spawn_ms is not None  # boxlite_box_metrics_ex (docs/python.md)
            got = await rt.get("native")
            assert got is not None and got.id == box.id
            assert await rt.get("no-such-box") is None
            assert await rt.get_info("no-such-box") is None
    run(main())


def test_pty_and_resize(image):
    async def main():
        async with boxlite.SimpleBox(image=image) as sb:
            box = sb._box
            ex = await box.exec("sh", args=["-c", "test -t 0 && echo tty; sleep 0.5; stty size"], tty=True)
            await ex.resize_tty(40, 100)
            text = "".join([line async for line in ex.stdout()])
            assert "tty" in text and "40 100" in text, text
            assert (await ex.wait()).exit_code == 0
    run(main())


def test_get_or_create(image):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            b1, created1 = await rt.get_or_create(BoxOptions(image=image, auto_remove=False), name="goc")
            b2, created2 = await rt.get_or_create(BoxOptions(image=image, auto_remove=False), name="goc")
            assert created1 and not created2 and b1.id == b2.id
            await rt.remove("goc", force=True)
    run(main())


def test_images_pull_and_list():
    reg = os.environ["BOXLITE_TEST_REGISTRY"]

    async def main():
        opts = boxlite.Options(image_registries=[boxlite.ImageRegistry(host=reg, transport="http", search=True)])
        with boxlite.Boxlite(opts) as rt:
            r = await rt.images.pull("test/busybox:latest")
            assert r.reference == f"{reg}/test/busybox:latest" and r.config_digest.startswith("sha256:")
            refs = [i.reference for i in await rt.images.list()]
            assert r.reference in refs
            with pytest.raises(RuntimeError):
                await rt.images.pull(f"{reg}/test/does-not-exist:latest")
    run(main())


def test_seed_registry_example():
    """The seed's ImageRegistry example, unchanged but for the registry and image."""
    reg = os.environ["BOXLITE_TEST_REGISTRY"]
    out = []

    async def main() -> None:
        options = boxlite.Options(
            image_registries=[
                boxlite.ImageRegistry(host=reg, transport="http", search=True),
            ]
        )
        with boxlite.Boxlite(options) as runtime:
            try:
                async with boxlite.SimpleBox(image="busybox:latest", runtime=runtime) as box:
                    result = await box.exec("cat", "/etc/hostname")
                    out.append(result.exit_code)
            except RuntimeError as exc:
                out.append(f"box failed: {exc}")
            try:
                async with boxlite.SimpleBox(image="no-such-image:latest", runtime=runtime) as box:
                    pass
            except RuntimeError as exc:
                out.append("pull failed")
    run(main())
    assert out == [0, "pull failed"]


def test_network_disabled_and_secret(image):
    async def main():
        async with boxlite.SimpleBox(
            image=image,
            network=NetworkSpec(mode="disabled"),
            secrets=[Secret(name="github_token", value="ghp-real-value", hosts=["api.github.com"])],
        ) as box:
            r = await box.exec("sh", "-c", "echo $BOXLITE_SECRET_GITHUB_TOKEN")
            assert r.stdout == "<BOXLITE_SECRET:github_token>\n"
            r = await box.exec("sh", "-c", "env | grep -c ghp-real-value; ls /sys/class/net")
            assert r.stdout.startswith("0\n") and "eth" not in r.stdout
        async with boxlite.SimpleBox(image=image, network=NetworkSpec(mode="enabled", allow_net=["example.com"])) as box:
            assert "eth0" in (await box.exec("ls", "/sys/class/net")).stdout
    run(main())


def test_security_presets_and_types():
    assert boxlite.SecurityOptions.standard().jailer_enabled
    assert boxlite.SecurityOptions.maximum().max_processes == 100
    assert not boxlite.SecurityOptions().jailer_enabled and not boxlite.SecurityOptions().seccomp_enabled
    assert not hasattr(boxlite.SecurityOptions, "minimum")
    assert isinstance(boxlite.__version__, str)
    fields = set(boxlite.RuntimeMetrics.__dataclass_fields__)
    assert fields == {"num_running_boxes", "boxes_created_total", "boxes_failed_total", "total_commands_executed",
                      "total_exec_errors"}
    bm = set(boxlite.BoxMetrics.__dataclass_fields__)
    assert {"memory_bytes", "cpu_percent", "commands_executed_total", "exec_errors_total", "network_bytes_sent",
            "bytes_sent_total", "total_create_duration_ms", "guest_boot_duration_ms",
            "stage_container_init_ms"} <= bm
    assert issubclass(boxlite.ExecError, boxlite.BoxliteError)
    assert issubclass(boxlite.TimeoutError, boxlite.BoxliteError)
    assert issubclass(boxlite.ParseError, boxlite.BoxliteError)


def test_shutdown(image):
    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            box = await rt.create(BoxOptions(image=image))
            await box.start()
            assert (await rt.metrics()).num_running_boxes == 1
            await rt.shutdown(timeout=10)
            assert box.info() is None or box.info().status != "running"
            with pytest.raises(RuntimeError):
                await rt.create(BoxOptions(image=image))
        with pytest.raises(RuntimeError, match="closed"):
            await rt.list_info()
    run(main())


def test_handle_invalidated_after_stop(image):
    """The documented old handle after stop(): RuntimeError, kind Stopped; runtime.get() gives a working one."""
    async def main():
        with boxlite.Boxlite.default() as rt:
            box = await rt.create(BoxOptions(image=image, auto_remove=False), name="invalidated")
            assert (await (await box.exec("sh", args=["-c", "echo kept > /root/f"])).wait()).exit_code == 0
            await box.stop()
            with pytest.raises(RuntimeError, match=r"^stopped: Handle invalidated after stop\(\)\. Use runtime\.get\(\) to get a new handle\.$") as ei:
                await box.exec("true")
            assert ei.value.kind == "Stopped"
            fresh = await rt.get(box.id)
            ex = await fresh.exec("cat", args=["/root/f"])
            assert [line async for line in ex.stdout()] == ["kept\n"]
            assert (await ex.wait()).exit_code == 0
            await fresh.stop()
            await rt.remove(box.id)
    run(main())
