# seeds/002 line 4176 (concurrent exec deadlock page)
# Purpose: concurrent exec regression smoke test — after the fix all should return reliably, with no hang
import asyncio
from boxlite import SimpleBox
from boxlite.errors import BoxliteError
# The deadlock was originally triggered at concurrency 8; raise the pressure slightly here
CONCURRENCY = 16
async def main() -> None:
    # SimpleBox is an async context manager; the box is created lazily and only starts on entering async with
    try:
        async with SimpleBox(image="busybox:latest") as box:
            async def one(i: int) -> str:
                # SimpleBox.exec timeout parameter is timeout (float, seconds); env takes a dict (not a list)
                result = await box.exec("echo", f"hello_{i}", timeout=30.0)
                # a non-zero exit code does not raise; check exit_code yourself
                if result.exit_code != 0:
                    raise RuntimeError(
                        f"task {i} exit_code={result.exit_code} stderr={result.stderr!r}"
                    )
                return result.stdout.strip()
            # Launch CONCURRENCY execs at once; before the fix this had a ~30-50% chance of hanging forever
            outputs = await asyncio.gather(*(one(i) for i in range(CONCURRENCY)))
            print(f"all {len(outputs)} execs returned, e.g. {outputs[:3]}")
    except BoxliteError as exc:
        # wrapper-layer error (parent of ExecError/TimeoutError/ParseError)
        print(f"BoxLite error: {exc}")
    except RuntimeError as exc:
        # Note: image pull failure / no virtualization raise a standard RuntimeError, not BoxliteError
        print(f"runtime error (image pull / virtualization?): {exc}")
if __name__ == "__main__":
    asyncio.run(main())
