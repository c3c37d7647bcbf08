"""CodeBox, InteractiveBox and the consumer executor adapter."""
import asyncio
import os
import subprocess
import sys
import termios

import pytest

import boxlite
from boxlite import BoxliteExecutor, CodeBox, InteractiveBox
from boxlite.executor import ExecResult


def run(coro):
    return asyncio.run(coro)


def test_codebox(python_image, tmp_path):
    async def main():
        async with CodeBox(image=python_image) as cb:
            assert await cb.run("print(6 * 7)") == "42\n"
            assert await cb.run("import sys; print('x'); sys.exit(2)") == "x\n"  # no raise, stdout only
            assert await cb.run("import sys; print(sys.version_info[0])", timeout=1) == "3\n"
            script = tmp_path / "s.py"
            script.write_text("print('from script')\n")
            assert await cb.run_script(str(script)) == "from script\n"
            out = await cb.install_package("no-such-package-offline")
            # stdout + stderr together; this image has no pip and there is no PyPI here
            assert "No module named pip" in out or "ERROR" in out
            out = await cb.install_packages("a", "b")
            assert "pip" in out or "ERROR" in out
    run(main())


def test_interactive_tty_true_without_tty_raises(image):
    async def main():
        with pytest.raises(termios.error):
            async with InteractiveBox(image, tty=True):
                pass
    # stdin of the test is not a terminal (pytest captures it)
    r = subprocess.run([sys.executable, "-c", "import sys; print(sys.stdin.isatty())"], stdin=subprocess.PIPE,
                       capture_output=True, text=True)
    assert r.stdout.strip() == "False"
    proc_stdin = sys.stdin
    try:
        sys.stdin = open("/dev/null")
        run(main())
    finally:
        sys.stdin.close()
        sys.stdin = proc_stdin


def test_interactive_bad_shell_and_no_forwarding(image):
    async def main():
        with pytest.raises(RuntimeError, match="spawn_failed"):
            async with InteractiveBox(image, shell="/bin/bash", tty=False):
                pass
        async with InteractiveBox(image, tty=False, env=[("X", "y")]) as ib:
            await ib.execution.write_stdin("echo $X; exit 7\n")
            text = "".join([t async for t in ib.execution.stdout()])
            assert "y" in text
            assert await ib.wait() is None  # documented: returns None
            assert (await ib.execution.wait()).exit_code == 7  # the shell's code, from its execution
    run(main())


def test_executor_adapter(image, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "sub").mkdir()
    (ws / "hello.txt").write_text("from host\n")

    async def main():
        async with BoxliteExecutor(image=image, workspace=ws, default_timeout=120) as ex:
            r = await ex.exec("echo hello from the VM")
            assert r.as_text() == "hello from the VM\n\nExit code: 0"
            r = await ex.exec("pwd", cwd=str(ws / "sub"))
            assert r.stdout == "/workspace/sub\n"
            r = await ex.exec("pwd", cwd="sub")  # relative: to the workspace
            assert r.stdout == "/workspace/sub\n"
            assert (await ex.exec("cat hello.txt")).stdout == "from host\n"
            r = await ex.exec("echo $MY_VAR", env={"MY_VAR": "hello"})
            assert r.stdout == "hello\n"
            r = await ex.exec("sleep 10", timeout=1)
            assert r.exit_code == -1 and r.stderr == "Command timed out after 1s"
            await ex.exec("echo made > new.txt")
            assert (ws / "new.txt").read_text() == "made\n"  # live: /workspace is the host directory
            (ws / "later.txt").write_text("host edit\n")
            assert (await ex.exec("cat later.txt")).stdout == "host edit\n"

    run(main())


def test_as_text():
    assert ExecResult("", "", 0).as_text() == "Exit code: 0"
    assert ExecResult("out", "err\n", 2).as_text() == "out\nSTDERR:\nerr\n\nExit code: 2"
    long = ExecResult("a" * 50, "", 0).as_text(max_chars=10)
    assert long == "aaaaa\n... (40 chars truncated) ...\naaaaa\n\nExit code: 0"


INTERACTIVE_PROGRAM = r"""
import asyncio, sys
import boxlite

async def main():
    async with boxlite.InteractiveBox(sys.argv[1]) as ib:   # tty=None: stdin is a TTY here
        assert await ib.wait() is None
        result = await ib.execution.wait()
    print("\nshell exited", result.exit_code)

asyncio.run(main())
"""


def test_interactive_forwards_a_terminal(image):
    """tty=None on a real terminal (pty.fork): keystrokes reach the box's shell and
    its PTY output comes back; the window size is passed on."""
    import pty
    import select
    import time
    import fcntl
    import struct
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", INTERACTIVE_PROGRAM, image])
    # long before the child has imported boxlite
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 90, 0, 0))
    out = b""
    sent = answered = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                data = os.read(fd, 4096)
            except OSError:
                break
            if not data:
                break
            out += data
        if b"\x1b[6n" in out and not answered:
            os.write(fd, b"\x1b[1;5R")  # answer the shell's cursor query, as a terminal does
            answered = time.monotonic()
        # the shell reads the answer on its own first: type only once it has
        if not sent and answered and time.monotonic() - answered > 1.5:
            os.write(fd, b"echo for$((40+2))real; stty size; exit 4\n")
            sent = True
    if not sent or b"shell exited" not in out:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert "for42real" in text, text
    assert "shell exited 4" in text, text
    assert "30 90" in text, text
    assert os.waitstatus_to_exitcode(status) == 0, text
