# seeds/002 line 6550 (at-scale guide: security, strong isolation)
# pip install boxlite
import asyncio
import boxlite
from boxlite import BoxOptions, SecurityOptions
from boxlite import AdvancedBoxOptions
async def main() -> None:
    try:
        with boxlite.Boxlite.default() as runtime:
            box = await runtime.create(
                BoxOptions(
                    image="python:slim",
                    cpus=1,
                    memory_mib=512,
                    # Correct form: security is passed via advanced
                    advanced=AdvancedBoxOptions(
                        security=SecurityOptions.maximum()
                    ),
                )
            )
            try:
                result = await (await box.exec("id", [])).wait()
                print(f"exit={result.exit_code}")
            finally:
                # Remove directly (force=True stops the running box before deleting it)
                await runtime.remove(box.id, force=True)
    except RuntimeError as exc:
        print(f"sandbox error: {exc}")
if __name__ == "__main__":
    asyncio.run(main())
