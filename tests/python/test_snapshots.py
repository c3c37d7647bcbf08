"""box.snapshot, clone_box, export and import_box (spec 4-manage-sandbox section 10,
checks 27-31) on jail boxes; the copy-on-write dependency errors on vm boxes that are
never started (their snapshots and clones are layers the disk grows over)."""
import asyncio
import inspect
import json
import os
import shutil

import pytest

import boxlite
from boxlite import BoxOptions


def run(coro):
    return asyncio.run(coro)


async def sh(box, script):
    ex = await box.exec("sh", ["-c", script])
    out = "".join([line async for line in ex.stdout()])
    res = await ex.wait()
    assert res.exit_code == 0, (script, out)
    return out


def test_types_are_exported():
    for name in ("SnapshotHandle", "SnapshotInfo", "SnapshotOptions", "CloneOptions", "ExportOptions"):
        assert hasattr(boxlite, name) and name in boxlite.__all__, name
    for cls in (boxlite.SnapshotOptions, boxlite.CloneOptions, boxlite.ExportOptions):
        assert cls.__dataclass_fields__ == {}
        cls()
    assert list(boxlite.SnapshotInfo.__dataclass_fields__) == [
        "id", "box_id", "name", "created_at", "container_disk_bytes", "size_bytes"]
    assert isinstance(inspect.getattr_static(boxlite.Box, "snapshot"), property)


def test_check27_create_list_get(image):
    async def main():
        with boxlite.Boxlite.default() as rt:
            box = await rt.create(BoxOptions(image=image, auto_remove=False), name="snap27")
            await sh(box, "echo v1 > /root/v.txt")
            handle = box.snapshot
            assert isinstance(handle, boxlite.SnapshotHandle)
            with pytest.raises(TypeError, match=r"takes 0 positional arguments but 1 was given"):
                await box.snapshot.create("v1")
            with pytest.raises(TypeError, match="name"):
                await box.snapshot.create()
            with pytest.raises(TypeError, match="options"):
                await box.snapshot.create(name="v1", options=object())
            info = await box.snapshot.create(name="v1", options=boxlite.SnapshotOptions())
            assert isinstance(info, boxlite.SnapshotInfo)
            assert (info.name, info.box_id) == ("v1", box.id)
            assert info.id and info.created_at > 1700000000
            assert isinstance(info.size_bytes, int) and info.size_bytes > 0
            assert isinstance(info.container_disk_bytes, int)
            assert [s.name for s in await box.snapshot.list()] == ["v1"]
            assert (await box.snapshot.get("v1")).id == info.id
            assert await box.snapshot.get("missing") is None
            with pytest.raises(RuntimeError, match="already exists"):
                await box.snapshot.create(name="v1")
            with pytest.raises(ValueError, match="invalid snapshot name"):
                await box.snapshot.create(name="bad name")
            with pytest.raises(RuntimeError, match="not found"):
                await box.snapshot.remove("missing")
            await box.snapshot.create(name="v2")
            assert [s.name for s in await box.snapshot.list()] == ["v1", "v2"]
            assert await box.snapshot.remove("v2") is None  # a jail snapshot is a full copy
            assert [s.name for s in await box.snapshot.list()] == ["v1"]
            await box.stop()
            await rt.remove(box.id)
    run(main())


def test_check28_restore_needs_a_stopped_box(image):
    async def main():
        with boxlite.Boxlite.default() as rt:
            box = await rt.create(BoxOptions(image=image, auto_remove=False), name="snap28")
            await sh(box, "echo v1 > /root/x.txt")
            await box.snapshot.create(name="v1")
            await sh(box, "echo v2 > /root/x.txt; echo new > /root/extra")
            with pytest.raises(RuntimeError, match="Cannot restore snapshot while box is running. Stop the box first.") as ei:
                await box.snapshot.restore("v1")
            assert str(ei.value) == ("invalid state: Cannot restore snapshot while box is running. "
                                     "Stop the box first.")
            await box.stop()
            with pytest.raises(RuntimeError, match="Handle invalidated"):
                await box.exec("true")
            # The documented sequence: stop, restore on the same handle, get a new one.
            assert await box.snapshot.restore("v1") == ()
            with pytest.raises(RuntimeError, match="not found"):
                await box.snapshot.restore("missing")
            box = await rt.get(box.id)
            assert await sh(box, "cat /root/x.txt; ls /root/extra 2>/dev/null || echo gone") == "v1\ngone\n"
            await box.stop()
            await rt.remove(box.id)
    run(main())


def test_check29_remove_of_the_snapshot_the_disk_depends_on(image):
    async def main():
        with boxlite.Boxlite.default() as rt:
            box = await rt.create(BoxOptions(image=image, auto_remove=False, engine="vm"), name="snap29")
            info = await box.snapshot.create(name="s1")
            assert info.container_disk_bytes > 1 << 30
            with pytest.raises(RuntimeError, match="current disk depends on this snapshot") as ei:
                await box.snapshot.remove("s1")
            assert str(ei.value).startswith("invalid state: Cannot remove snapshot: current disk depends on this snapshot")
            assert [s.name for s in await box.snapshot.list()] == ["s1"]
            await rt.remove(box.id)
    run(main())


def test_check30_clone(image):
    async def main():
        with boxlite.Boxlite.default() as rt:
            src = await rt.create(BoxOptions(image=image, auto_remove=False), name="src30")
            await sh(src, "echo shared > /root/f; dd if=/dev/urandom of=/root/r bs=64k count=8 2>/dev/null;"
                          "md5sum /root/r > /root/r.md5")
            with pytest.raises(TypeError, match="0 positional arguments"):
                await src.clone_box("c30")
            clone = await src.clone_box(name="c30", options=boxlite.CloneOptions())  # of the running source
            assert isinstance(clone, boxlite.Box) and clone.id != src.id
            assert clone.info().status == "configured" and clone.info().name == "c30"
            assert await sh(clone, "cat /root/f; md5sum -c /root/r.md5 >/dev/null && echo same;"
                                   "echo clone > /root/f; echo only > /root/mine") == "shared\nsame\n"
            assert clone.info().status == "running"  # its first exec started it
            assert await sh(src, "cat /root/f; ls /root/mine 2>/dev/null || echo absent") == "shared\nabsent\n"
            assert await sh(clone, "cat /root/f /root/mine") == "clone\nonly\n"
            anon = await src.clone_box()
            assert anon.id not in (src.id, clone.id)  # no name: known by its id, as an unnamed create
            await rt.remove(anon.id)
            for b in (src, clone):
                await b.stop()
                await rt.remove(b.id)
            # A vm source (never started) cannot go while its clone grows over it.
            vsrc = await rt.create(BoxOptions(image=image, auto_remove=False, engine="vm"), name="vsrc30")
            vclone = await vsrc.clone_box(name="vc30")
            with pytest.raises(RuntimeError, match="have clone dependencies") as ei:
                await rt.remove(vsrc.id)
            assert vclone.id in str(ei.value)
            await rt.remove(vclone.id)
            await rt.remove(vsrc.id)
    run(main())


def test_check31_export_and_import_into_a_new_home(image):
    async def main():
        home2 = os.path.join(os.environ["BOXLITE_HOME"], "h2")
        os.makedirs(home2)
        shutil.copy(os.path.join(os.environ["BOXLITE_HOME"], "config.json"), home2)  # the test registry
        out_dir = os.path.join(os.environ["BOXLITE_HOME"], "exports")
        os.makedirs(out_dir)
        with boxlite.Boxlite.default() as rt:
            box = await rt.create(BoxOptions(image=image, auto_remove=False), name="exp31")
            sums = await sh(box, "mkdir -p /proj && echo hello > /proj/a && "
                                 "dd if=/dev/urandom of=/proj/bin bs=64k count=16 2>/dev/null && md5sum /proj/a /proj/bin")
            with pytest.raises(TypeError, match="dest"):
                await box.export()
            path = await box.export(dest=out_dir, options=boxlite.ExportOptions())  # running
            assert isinstance(path, str) and path.endswith(".boxlite")
            assert path == os.path.join(out_dir, "exp31.boxlite") and os.path.getsize(path) > 0
            with pytest.raises(ValueError):
                await box.export(dest=os.path.join(out_dir, "missing"))
            await box.stop()
            await rt.remove(box.id)
        with boxlite.Boxlite(boxlite.Options(home_dir=home2)) as rt2:
            imported = await rt2.import_box(path, name="imp31")
            assert isinstance(imported, boxlite.Box)
            assert imported.info().status == "configured" and imported.info().name == "imp31"
            assert await sh(imported, "md5sum /proj/a /proj/bin") == sums
            unnamed = await rt2.import_box(path)
            assert unnamed.id != imported.id
            junk = os.path.join(out_dir, "junk.boxlite")
            with open(junk, "w") as f:
                f.write("not a tar")
            with pytest.raises((RuntimeError, ValueError)):
                await rt2.import_box(junk)
            with pytest.raises(TypeError):
                rt2.import_box(42)
            await imported.stop()
            for b in (imported, unnamed):
                await rt2.remove(b.id)
            assert await rt2.list_info() == []
    run(main())


def test_simplebox_exposes_them(image):
    async def main():
        async with boxlite.SimpleBox(image=image, auto_remove=False) as box:
            await box.exec("sh", "-c", "echo s > /root/s")
            assert (await box.snapshot.create(name="v1")).name == "v1"
            clone = await box.clone_box(name="sbclone")
            assert (await clone.exec("cat", ["/root/s"])) is not None
            out_dir = os.path.join(os.environ["BOXLITE_HOME"], "sbexp")
            os.makedirs(out_dir)
            assert (await box.export(dest=out_dir)).endswith(".boxlite")
            rt = box._box._runtime
            await clone.stop()
            await rt.remove(clone.id)
            box_id = box.id
        await rt.remove(box_id)
    run(main())
