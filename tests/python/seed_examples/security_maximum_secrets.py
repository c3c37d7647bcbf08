# seeds/002 line 9636 (secrets and security: credentials plus isolation). The dump
# lost the example's placeholder credential (value=""): any non-empty one will do.
import asyncio
from boxlite import SimpleBox, Secret, SecurityOptions
from boxlite import AdvancedBoxOptions
async def main() -> None:
    secret = Secret(
        name="demo",
        value="sk-not-a-real-credential",  # TODO: replace with a real credential
        hosts=["api.example.com"],
    )
    advanced = AdvancedBoxOptions(security=SecurityOptions.maximum())
    try:
        async with SimpleBox(
            image="python:slim",
            secrets=[secret],
            advanced=advanced,
        ) as box:
            result = await box.exec("echo", "secrets + hardening ready")
            print(result.stdout if result.exit_code == 0 else result.stderr)
    except RuntimeError as e:
        print("box failed to start:", e)
if __name__ == "__main__":
    asyncio.run(main())
