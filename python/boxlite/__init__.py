"""boxlite: sandboxed boxes for AI agents (pure Python over libboxlite's C API)."""
from ._ffi import lib as _lib
from . import errors
from .errors import BoxliteError, ExecError, InvalidArgumentError, ParseError, TimeoutError
from .executor import BoxliteExecutor, SandboxInitError
from .options import (AdvancedBoxOptions, ApiKeyCredential, BoxliteRestOptions, BoxOptions, CloneOptions, ExportOptions,
                      ImageRegistry, NetworkSpec, Options, Secret, SecurityOptions, SnapshotOptions)
from .runtime import (Box, BoxInfo, BoxMetrics, BoxStateInfo, Boxlite, Execution, ExecutionResult, ImageInfo, ImagePullResult,
                      RuntimeMetrics, SnapshotHandle, SnapshotInfo)
from .simplebox import CodeBox, ExecResult, InteractiveBox, SimpleBox
from .computerbox import ComputerBox
from .browserbox import BrowserBox, BrowserBoxOptions
from .skillbox import SkillBox
from .runtime import VolumeManager

__version__ = _lib.boxlite_version().decode()

__all__ = ["AdvancedBoxOptions", "ApiKeyCredential", "BoxliteRestOptions", "Box", "BoxInfo", "BoxMetrics", "BoxStateInfo", "BoxOptions", "Boxlite", "BoxliteError",
           "BrowserBox", "BrowserBoxOptions", "ComputerBox", "SkillBox", "VolumeManager",
           "BoxliteExecutor", "CodeBox", "ExecError", "ExecResult", "Execution", "ExecutionResult", "ImageInfo",
           "ImagePullResult", "ImageRegistry", "InteractiveBox", "InvalidArgumentError", "NetworkSpec", "Options",
           "ParseError", "RuntimeMetrics", "SandboxInitError", "Secret", "SecurityOptions", "SimpleBox",
           "TimeoutError", "SnapshotHandle", "SnapshotInfo", "SnapshotOptions", "CloneOptions", "ExportOptions",
           "__version__"]
