"""The vm engine through Python (QEMU TCG here): a box boots, execs, streams."""
import asyncio
import os

import pytest

import boxlite


def test_vm_simplebox(image):
    async def main():
        async with boxlite.SimpleBox(image=image, engine="vm") as box:
            r = await box.exec("echo", "hello from the box")
            assert (r.exit_code, r.stdout) == (0, "hello from the box\n")
            results = await asyncio.gather(*[box.exec("echo", f"hello_{i}") for i in range(16)])
            assert [x.stdout for x in results] == [f"hello_{i}\n" for i in range(16)]
            assert (await box.exec("sh", "-c", "exit 3")).exit_code == 3
            # its own kernel: not the host's (a jail would show the host's release)
            assert (await box.exec("uname", "-r")).stdout.strip() != os.uname().release
            # every stage of a vm box's creation and start is timed (CBoxMetricsEx)
            m = await box.metrics()
            for name in ("stage_filesystem_setup_ms", "stage_image_prepare_ms", "stage_guest_rootfs_ms",
                         "stage_box_spawn_ms", "stage_container_init_ms"):
                assert isinstance(getattr(m, name), int), name
            assert m.guest_boot_duration_ms > 0
            # standard() is usable on vm (maximum()'s limits are refused there: test_sdk_gaps.py)
            sec = boxlite.AdvancedBoxOptions(security=boxlite.SecurityOptions.standard())
            async with boxlite.SimpleBox(image=image, engine="vm", advanced=sec) as b2:
                assert (await b2.exec("true")).exit_code == 0
    asyncio.run(main())


def test_vm_snapshot_clone_export(image):
    """Spec/4 section 10 on a booted vm box: a snapshot and a clone of the running box
    (quiesced and resumed), restore after stop, the dependency errors, export/import."""
    async def main():
        with boxlite.Boxlite.default() as rt:
            box = await rt.create(boxlite.BoxOptions(image=image, engine="vm", auto_remove=False), name="vmsnap")

            async def sh(b, script):
                ex = await b.exec("sh", ["-c", script])
                out = "".join([line async for line in ex.stdout()])
                assert (await ex.wait()).exit_code == 0, script
                return out
            await sh(box, "echo v1 > /root/x.txt; sync")
            info = await box.snapshot.create(name="v1")
            assert info.box_id == box.id and info.container_disk_bytes > 1 << 30
            await sh(box, "echo v2 > /root/x.txt; sync")
            clone = await box.clone_box(name="vmclone")
            with pytest.raises(RuntimeError, match="while box is running"):
                await box.snapshot.restore("v1")
            await box.stop()
            assert await box.snapshot.restore("v1") == ()
            with pytest.raises(RuntimeError, match="current disk depends on this snapshot"):
                await box.snapshot.remove("v1")
            box = await rt.get(box.id)
            assert await sh(box, "cat /root/x.txt") == "v1\n"
            assert await sh(clone, "cat /root/x.txt; echo c > /root/x.txt") == "v2\n"
            await box.stop()
            with pytest.raises(RuntimeError, match="have clone dependencies"):
                await rt.remove(box.id)
            out_dir = os.path.join(os.environ["BOXLITE_HOME"], "vmexp")
            os.makedirs(out_dir)
            path = await clone.export(dest=out_dir)
            assert path == os.path.join(out_dir, "vmclone.boxlite")
            await clone.stop()
            imported = await rt.import_box(path, name="vmimp")
            assert await sh(imported, "cat /root/x.txt") == "c\n"
            await imported.stop()
            for name, force in (("vmimp", False), ("vmsnap", True), ("vmclone", False)):
                await rt.remove(name, force=force)
    asyncio.run(main())
