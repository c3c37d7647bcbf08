# seeds/002 line 9789 (snapshots and clones page)
import asyncio
import tempfile
import boxlite
async def main() -> None:
    # the Boxlite runtime is a [synchronous] context manager; do not await
    runtime = boxlite.Boxlite.default()
    source = None
    cloned = None
    imported = None
    try:
        # 1) create the source box and write a marker file
        # auto_remove=False: export/clone require the source box to be available during the operation
        source = await runtime.create(
            boxlite.BoxOptions(image="busybox:latest", auto_remove=False),
            name="snapshot-demo-source",
        )
        exec_handle = await source.exec(
            "sh", ["-c", "echo 'hello-from-source' > /root/marker.txt"]
        )
        result = await exec_handle.wait()
        if result.exit_code != 0:
            raise RuntimeError("failed to write marker file")
        # 2) take a snapshot (a save point) within the same sandbox; can be restored at any time later
        info = await source.snapshot.create(name="clean-state")
        print(f"snapshot created: {info.name} (size_bytes={info.size_bytes})")
        # 3) clone a fully independent new sandbox (the source box keeps running, unaffected)
        cloned = await source.clone_box(name="snapshot-demo-clone")
        out = await cloned.exec("cat", ["/root/marker.txt"])
        async for line in out.stdout():
            print(f"clone reads: {line.strip()}")
        await out.wait()
        # 4) export the source box as a portable .boxlite archive, then import it as a new sandbox
        with tempfile.TemporaryDirectory() as export_dir:
            archive_path = await source.export(dest=export_dir)
            print(f"archive exported: {archive_path}")
            imported = await runtime.import_box(archive_path, name="snapshot-demo-imported")
            out = await imported.exec("cat", ["/root/marker.txt"])
            async for line in out.stdout():
                print(f"imported reads: {line.strip()}")
            await out.wait()
    except Exception as exc:
        # virtualization unavailable, image pull failure, etc. are raised as standard exceptions
        print(f"run failed: {type(exc).__name__}: {exc}")
    finally:
        # cleanup: remove is called on the [runtime], not box.remove()
        for box in (imported, cloned, source):
            if box is None:
                continue
            try:
                await box.stop()
            except Exception:
                pass
            try:
                await runtime.remove(box.id, force=True)
            except Exception:
                pass
        runtime.close()
if __name__ == "__main__":
    asyncio.run(main())
