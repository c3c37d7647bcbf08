"""The vm engine through Python (QEMU TCG here): a box boots, execs, streams."""
import asyncio
import os

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
