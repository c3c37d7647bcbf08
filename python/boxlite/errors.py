"""Errors of the boxlite package.

BoxliteError is the base of the wrapper layer's own errors (ExecError, TimeoutError,
ParseError). Failures of the runtime itself (image pull, no virtualization,
spawn_failed, box not started) are the standard RuntimeError, as documented; the
subclass NativeError keeps the C API's error code for callers that want it.
"""


class BoxliteError(Exception):
    """Base of the wrapper layer's errors (`message` as documented)."""

    @property
    def message(self):
        return str(self)


class ExecError(BoxliteError):
    """A command the wrapper needed to succeed exited non-zero."""

    def __init__(self, command, exit_code, stderr):
        self.command = command
        self.exit_code = exit_code
        self.stderr = stderr
        super().__init__(f"command {command!r} failed with exit code {exit_code}: {stderr.strip()}")


class TimeoutError(BoxliteError):  # noqa: A001 - documented name
    """A wrapper-level wait ran out of time (e.g. ComputerBox.wait_until_ready). As
    documented, a BoxliteError and not the builtin TimeoutError."""


class ParseError(BoxliteError):
    """Output of a command could not be parsed (e.g. ComputerBox.cursor_position:
    "Failed to parse cursor position ...")."""


# The C API's error codes (include/boxlite.h).
CODES = {0: "Ok", 1: "Internal", 2: "NotFound", 3: "AlreadyExists", 4: "InvalidState", 5: "InvalidArgument",
         6: "Config", 7: "Storage", 8: "Image", 9: "Network", 10: "Execution", 11: "Stopped", 12: "Engine",
         13: "Unsupported", 14: "Database", 15: "Portal", 16: "Rpc", 17: "RpcTransport", 18: "Metadata",
         19: "UnsupportedEngine", 20: "ResourceExhausted", 21: "SessionReaped"}


class NativeError(RuntimeError):
    """An error reported by the runtime (a RuntimeError, not a BoxliteError)."""

    def __init__(self, code, message):
        self.code = code
        self.kind = CODES.get(code, str(code))
        # The documented form of a Stopped error: "stopped: <message>" (e.g.
        # "stopped: Handle invalidated after stop(). ...").
        if self.kind == "Stopped" and not message.startswith("stopped: "):
            message = "stopped: " + message
        # Likewise "invalid state: <message>" (e.g. "invalid state: Cannot restore
        # snapshot while box is running. Stop the box first.").
        if self.kind == "InvalidState" and not message.startswith("invalid state: "):
            message = "invalid state: " + message
        super().__init__(message)


class InvalidArgumentError(NativeError, ValueError):
    """A C API InvalidArgument error (e.g. an invalid image reference or snapshot
    name): a ValueError as before, and a RuntimeError as documented (a failed
    image reference is caught with `except RuntimeError`)."""


def native_error(code, message):
    """The exception for a C API error: bad arguments are InvalidArgumentError (both
    ValueError and RuntimeError), the rest NativeError (a RuntimeError)."""
    if CODES.get(code) == "InvalidArgument":
        return InvalidArgumentError(code, message)
    return NativeError(code, message)
