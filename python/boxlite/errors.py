"""Errors of the boxlite package: the hierarchy of the upstream BoxLite Python SDK.

Every class derives from BoxliteError, which is a RuntimeError (as upstream's is):
the documented `except RuntimeError` around an image pull, a box start or a
missing command keeps working, and `except NotFoundError` catches one failure
without reading its message. A runtime error comes from the C API's code, one
class per code (`from_code`; the table is the python_class column of
src/common/error.cpp); the convenience errors (ExecError, TimeoutError,
ParseError) are raised by the Python wrappers.

Errors made from a C API error carry `code` (the C API's BoxliteErrorCode) and
`kind` (its name, "NotFound"); errors the wrappers raise have None for both.
"""

__all__ = [
    "AlreadyExistsError",
    "BoxliteError",
    "ConfigError",
    "DatabaseError",
    "EngineError",
    "ExecError",
    "ExecutionError",
    "ImageError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidStateError",
    "MetadataError",
    "NetworkError",
    "NotFoundError",
    "ParseError",
    "PortalError",
    "ResourceExhaustedError",
    "RpcError",
    "RpcTransportError",
    "SessionReapedError",
    "StoppedError",
    "StorageError",
    "TimeoutError",
    "UnsupportedEngineError",
    "UnsupportedError",
]


class BoxliteError(RuntimeError):
    """Base of every boxlite error; a RuntimeError, as the runtime's errors were
    documented to be."""

    code = None  # the C API's error code, for an error the runtime reported
    kind = None  # its name ("NotFound")

    @property
    def message(self):
        return str(self)


# ---- Raised for the runtime's errors: one per C API error code

class EngineError(BoxliteError):
    """The engine (the VM or the jail, its shim) reported an error."""


class UnsupportedEngineError(BoxliteError):
    """The engine cannot run on this host (e.g. no virtualization)."""


class ConfigError(BoxliteError):
    """Invalid or incompatible configuration (a registry entry, the home's config)."""


class StorageError(BoxliteError):
    """A filesystem or disk operation failed."""


class ImageError(BoxliteError):
    """Pulling, resolving or unpacking an image failed."""


class PortalError(BoxliteError):
    """Host-to-guest communication failed."""


class NetworkError(BoxliteError):
    """A networking operation failed."""


class RpcError(BoxliteError):
    """A call to the box's agent failed (a protocol violation)."""


class RpcTransportError(BoxliteError):
    """The channel to the box's agent failed."""


class InternalError(BoxliteError):
    """An unexpected internal error."""


class ExecutionError(BoxliteError):
    """The runtime could not run a command. Distinct from ExecError, a command that
    ran (or could not start) and has an exit code.

    `spawn_failure` says why a command could not start ("NotFound",
    "NotExecutable", "BadWorkingDir", "UnknownUser", "Setup"; None otherwise) and
    `exit_code` the code a shell gives that (127, 126, 125; None otherwise).
    SimpleBox.exec raises those with exit code 127 or 126 as ExecError."""

    spawn_failure = None
    exit_code = None


class UnsupportedError(BoxliteError):
    """The operation or option is not supported."""


class NotFoundError(BoxliteError):
    """The box or resource does not exist."""


class AlreadyExistsError(BoxliteError):
    """The box or resource already exists (e.g. a name that is taken)."""


class InvalidStateError(BoxliteError):
    """The box is in the wrong state for the operation."""


class DatabaseError(BoxliteError):
    """A runtime database operation failed."""


class MetadataError(BoxliteError):
    """Stored metadata is corrupt or unreadable."""


class InvalidArgumentError(BoxliteError, ValueError):
    """An argument was invalid. Also a ValueError, as this package's bad arguments
    were before typed errors."""


class StoppedError(BoxliteError):
    """The box or runtime has been stopped or shut down."""


class ResourceExhaustedError(BoxliteError):
    """A system resource limit was reached (disk full, out of memory)."""


class SessionReapedError(BoxliteError):
    """The exec session was reaped after a disconnect; start a new exec."""


# ---- Raised by the Python wrappers

class ExecError(BoxliteError):
    """A command failed: it exited non-zero where the wrapper needed it to succeed
    (ComputerBox's actions), or it could not start (SimpleBox.exec of a missing
    command: exit code 127; one that cannot be run: 126).

    Attributes: command, exit_code, stderr."""

    def __init__(self, command: str, exit_code: int, stderr: str):
        self.command = command
        self.exit_code = exit_code
        self.stderr = stderr
        super().__init__(f"Command '{command}' failed with exit code {exit_code}: {stderr}")


class TimeoutError(BoxliteError):  # noqa: A001 - upstream's name
    """An operation ran out of time (e.g. ComputerBox.wait_until_ready). A
    BoxliteError, not the builtin TimeoutError. An exec's own timeout is a result
    (ExecResult.timed_out), not this error."""


class ParseError(BoxliteError):
    """Output of a command could not be parsed (e.g. ComputerBox.cursor_position:
    "Failed to parse cursor position ...")."""


# ---- The C API's codes (include/boxlite.h) and their classes

# code -> (name, class): the python_class column of src/common/error.cpp's table
# (tests/python/test_errors.py compares the two).
_BY_CODE = {
    1: ("Internal", InternalError),
    2: ("NotFound", NotFoundError),
    3: ("AlreadyExists", AlreadyExistsError),
    4: ("InvalidState", InvalidStateError),
    5: ("InvalidArgument", InvalidArgumentError),
    6: ("Config", ConfigError),
    7: ("Storage", StorageError),
    8: ("Image", ImageError),
    9: ("Network", NetworkError),
    10: ("Execution", ExecutionError),
    11: ("Stopped", StoppedError),
    12: ("Engine", EngineError),
    13: ("Unsupported", UnsupportedError),
    14: ("Database", DatabaseError),
    15: ("Portal", PortalError),
    16: ("Rpc", RpcError),
    17: ("RpcTransport", RpcTransportError),
    18: ("Metadata", MetadataError),
    19: ("UnsupportedEngine", UnsupportedEngineError),
    20: ("ResourceExhausted", ResourceExhaustedError),
    21: ("SessionReaped", SessionReapedError),
}
CODES = {0: "Ok", **{code: name for code, (name, _) in _BY_CODE.items()}}
CODE_OF = {name: code for code, name in CODES.items()}

# include/boxlite.h's BoxliteSpawnFailure, by number.
SPAWN_FAILURES = {0: None, 1: "NotFound", 2: "NotExecutable", 3: "BadWorkingDir", 4: "UnknownUser", 5: "Setup"}

# The documented forms "stopped: <message>" (e.g. "stopped: Handle invalidated
# after stop(). ...") and "invalid state: <message>" (e.g. "invalid state: Cannot
# restore snapshot while box is running. Stop the box first.").
_PREFIX = {"Stopped": "stopped: ", "InvalidState": "invalid state: "}


def from_code(code, message):
    """The exception for a C API error: the class of its code (InternalError for a
    code this package does not know), with `code` and `kind` set."""
    name, cls = _BY_CODE.get(code, (str(code), InternalError))
    prefix = _PREFIX.get(name)
    if prefix and not message.startswith(prefix):
        message = prefix + message
    exc = cls(message)
    exc.code = code
    exc.kind = name
    return exc


def from_kind(kind, message):
    """The exception the runtime would raise for the C API code named `kind`, for
    errors the package reports itself in the runtime's terms (e.g. "Unsupported")."""
    return from_code(CODE_OF[kind], message)
