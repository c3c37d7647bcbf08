"""The vm engine through Python (QEMU TCG here): a box boots, execs, streams."""
import asyncio
import os
import re

import pytest

import boxlite
import test_seed_examples as seeds


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
    asyncio.run(main())


def test_vm_security_maximum_is_enforced_in_the_vm(image):
    """maximum() on the default engine (issue 35: it was refused there): the agent sets
    its limits on every process it starts (soft and hard) and caps the VM's pids cgroup."""
    def limits(name):
        return f"grep '^{name}  ' /proc/self/limits | awk '{{print $(NF-2), $(NF-1)}}'"

    async def main():
        sec = boxlite.AdvancedBoxOptions(security=boxlite.SecurityOptions.maximum())
        # A main command that reaps the orphans it adopts (busybox sh's `wait` takes them)
        # and forks nothing while it idles (JailEscapeTest.AForkBombIsStoppedByThePidsLimit).
        reaper = ["sh", "-c", "mkfifo /tmp/idle && exec 3<>/tmp/idle && while :; do wait; read -t 0.2 x <&3; done"]
        async with boxlite.SimpleBox(image=image, engine="vm", advanced=sec, cmd=reaper) as box:
            r = await box.exec("sh", "-c", f"{limits('Max open files')}; {limits('Max processes')}; "
                               f"{limits('Max file size')}; cat /proc/self/cgroup /sys/fs/cgroup/boxlite/pids.max")
            assert r.stdout.split("\n")[:5] == ["1024 1024", "100 100", f"{1 << 30} {1 << 30}", "0::/boxlite",
                                                "100"], r.stdout
            # A fork bomb stops at the limit (the agent and the box's processes count), and
            # once its processes are gone the box runs commands again.
            r = await box.exec("sh", "-c", "i=0; while [ $i -lt 150 ]; do sleep 2 & i=$((i+1)); done; echo all")
            assert r.exit_code != 0 and "all" not in r.stdout and "fork" in r.stderr, (r.exit_code, r.stdout, r.stderr)
            await asyncio.sleep(3)
            r = await box.exec("cat", "/sys/fs/cgroup/boxlite/pids.current")
            assert r.exit_code == 0 and int(r.stdout) < 10, r.stdout
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


def test_vm_seed_snapshot_clone_export():
    """The snapshots page's example on the default engine (issue 35): the clone of a
    running box that was snapshotted first boots while its source runs."""
    assert os.environ.get("BOXLITE_ENGINE") == "vm"
    r = seeds.run_example("snapshot_clone_export.py")
    assert r.returncode == 0 and re.fullmatch(seeds.EXPECTED["snapshot_clone_export.py"], r.stdout), \
        r.stdout + r.stderr
