"""SkillBox: the documented constructor and defaults, ValueError on entry without an
OAuth token, and its methods as execs of the image's tools (a stand-in claude here:
the real image is not in the test registry)."""
import asyncio

import pytest

import boxlite


def run(coro):
    return asyncio.run(coro)


FAKE_CLAUDE = r"""#!/bin/sh
case "$1" in
  --version) echo "1.0.0 (stand-in)" ;;
  -p) [ -n "$CLAUDE_CODE_OAUTH_TOKEN" ] || { echo "no token" >&2; exit 2; }; echo "answer to: $2" ;;
  *) exit 64 ;;
esac
"""


def test_skillbox_defaults_and_token_rule(image, monkeypatch):
    with pytest.raises(TypeError, match="image is fixed to ghcr.io/boxlite-ai/boxlite-skillbox:0.1.0"):
        boxlite.SkillBox(image="alpine")
    with pytest.raises(ValueError, match="owner/repo"):
        boxlite.SkillBox(skills=["not a repo"])
    sb = boxlite.SkillBox()
    assert sb._name == "skill-box"
    assert (sb._options.memory_mib, sb._options.disk_size_gb, sb._options.auto_remove) == (4096, 10, True)
    assert sb._options.image == "ghcr.io/boxlite-ai/boxlite-skillbox:0.1.0"
    assert sb.gui_http_port > 0 and sb.gui_https_port > 0 and sb.gui_http_port != sb.gui_https_port
    monkeypatch.delenv("CLAUDE_CODE_OAUTH_TOKEN", raising=False)

    async def no_token():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            with pytest.raises(ValueError, match="CLAUDE_CODE_OAUTH_TOKEN"):
                async with boxlite.SkillBox(runtime=rt):
                    pass
            assert await rt.list_info() == []  # refused before anything was created
    run(no_token())


def test_skillbox_methods_are_execs_of_the_image_tools(image, monkeypatch, tmp_path):
    monkeypatch.setattr(boxlite.SkillBox, "IMAGE", image)  # busybox: no claude, no git
    monkeypatch.setenv("CLAUDE_CODE_OAUTH_TOKEN", "tok-from-env")

    async def main():
        with boxlite.Boxlite(boxlite.Options()) as rt:
            async with boxlite.SkillBox(runtime=rt, name=None) as box:
                with pytest.raises(boxlite.ExecError, match="claude not found in the box.*boxlite-skillbox"):
                    await box.call("hello")
                with pytest.raises(boxlite.ExecError, match="claude not found"):
                    await box.wait_until_ready(timeout=5)
                with pytest.raises(boxlite.ExecError, match="git not found in the box"):
                    await box.install_skill("anthropics/skills")
                src = tmp_path / "claude"
                src.write_text(FAKE_CLAUDE)
                await box.copy_in(str(src), "/bin/claude")
                assert (await box.exec("chmod", "755", "/bin/claude")).exit_code == 0
                await box.wait_until_ready(timeout=5)
                assert await box.call("What skills do you have?") == "answer to: What skills do you have?\n"
                with pytest.raises(ValueError):
                    await box.call("")
    run(main())
