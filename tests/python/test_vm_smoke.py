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
    asyncio.run(main())
