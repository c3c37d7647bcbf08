# seeds/002 line 5385 (FAQ)
# Python — SimpleBox.exec timeout (seconds, float); env is a dict
import asyncio
from boxlite import SimpleBox, BoxliteError
async def main() -> None:
    try:
        async with SimpleBox(image="busybox:latest") as box:
            result = await box.exec(
                "sh", "-c", "echo $GREETING",
                env={"GREETING": "hi"}, # dict, NOT a list
                timeout=30.0, # seconds
            )
            print(result.stdout.strip())
    except (BoxliteError, RuntimeError) as exc:
        print(f"error: {exc}")
asyncio.run(main())
