# seeds/002 line 5279 (FAQ: stronger isolation)
# Python — maximum isolation preset
import asyncio
from boxlite import SimpleBox, SecurityOptions, BoxliteError
from boxlite import AdvancedBoxOptions
async def main() -> None:
    try:
        async with SimpleBox(
            image="busybox:latest",
            advanced=AdvancedBoxOptions(
                security=SecurityOptions.maximum(),
            ),
        ) as box:
            result = await box.exec("id")
            print(result.stdout.strip())
    except (BoxliteError, RuntimeError) as exc:
        print(f"error: {exc}")
asyncio.run(main())
