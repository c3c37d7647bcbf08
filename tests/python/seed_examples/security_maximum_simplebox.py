# seeds/002 line 9615 (secrets and security: tighten isolation)
import asyncio
from boxlite import SimpleBox, SecurityOptions
# AdvancedBoxOptions is exported at the top level.
from boxlite import AdvancedBoxOptions
async def main() -> None:
    advanced = AdvancedBoxOptions(security=SecurityOptions.maximum())
    try:
        # advanced= is passed through to the underlying BoxOptions via SimpleBox's **kwargs.
        async with SimpleBox(image="busybox:latest", advanced=advanced) as box:
            result = await box.exec("id")
            if result.exit_code != 0:
                print("command failed:", result.stderr)
            else:
                print(result.stdout)
    except RuntimeError as e:
        print("box failed to start:", e)
if __name__ == "__main__":
    asyncio.run(main())
