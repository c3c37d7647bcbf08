# seeds/002 line 3825
# verify_build.py -- verify that a locally source-built boxlite can start a box and run a command
import asyncio
from boxlite import SimpleBox
from boxlite import BoxliteError
async def main() -> None:
    # SimpleBox is an async context manager; it actually creates + starts only on entry
    try:
        async with SimpleBox(image="busybox:latest") as box:
            result = await box.exec("echo", "hello from source build")
            # A non-zero exit code does not raise; check exit_code yourself
            if result.exit_code != 0:
                print("command failed:", result.stderr)
                return
            print("stdout:", result.stdout.strip())
    except BoxliteError as exc:
        # Wrapper-layer error (parse/exec/timeout, etc.)
        print("boxlite error:", exc)
    except RuntimeError as exc:
        # Image pull failure, no virtualization, etc. raise a standard RuntimeError (not BoxliteError)
        print("runtime error (no virtualization or image pull failed?):", exc)
if __name__ == "__main__":
    asyncio.run(main())
