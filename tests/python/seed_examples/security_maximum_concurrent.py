# seeds/002 line 6308 (at-scale guide: one sandbox, many execs)
# pip install boxlite
import asyncio
import boxlite
from boxlite import BoxOptions, SecurityOptions
from boxlite import AdvancedBoxOptions
async def main() -> None:
    # Boxlite is a synchronous context manager (with), but its data methods (create/remove/...) are async and require await
    try:
        with boxlite.Boxlite.default() as runtime:
            box = await runtime.create(
                BoxOptions(
                    image="python:slim",
                    cpus=2,
                    memory_mib=1024,
                    advanced=AdvancedBoxOptions(
                        security=SecurityOptions.maximum()
                    ),
                )
            )
            try:
                # Launch multiple executions concurrently within the same sandbox
                executions = await asyncio.gather(
                    box.exec("python", ["-c", "print('task A')"]),
                    box.exec("python", ["-c", "print('task B')"]),
                    box.exec("python", ["-c", "print('task C')"]),
                )
                for execution in executions:
                    result = await execution.wait()  # native Execution.wait()
                    # The ExecResult returned by native Execution.wait() has only exit_code / error_message,
                    # not stdout/stderr; use the high-level SimpleBox.exec to capture output.
                    print(f"exit={result.exit_code}")
            finally:
                # Removal happens on the runtime: runtime.remove(id, force=); there is no box.remove().
                # force=True stops the running box before deleting it.
                await runtime.remove(box.id, force=True)
    except RuntimeError as exc:
        print(f"runtime/sandbox error: {exc}")
if __name__ == "__main__":
    asyncio.run(main())
