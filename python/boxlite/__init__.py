"""boxlite: sandboxed boxes for AI agents (pure Python over libboxlite's C API)."""
from ._ffi import lib as _lib
from .errors import BoxliteError, ExecError, NativeError, ParseError, TimeoutError
from .executor import BoxliteExecutor, SandboxInitError
from .options import (AdvancedBoxOptions, BoxOptions, ImageRegistry, NetworkSpec, Options, Secret,
                      SecurityOptions)
from .runtime import (Box, BoxInfo, BoxMetrics, Boxlite, Execution, ExecutionResult, ImageInfo, ImagePullResult,
                      RuntimeMetrics)
from .simplebox import CodeBox, ExecResult, InteractiveBox, SimpleBox

__version__ = _lib.boxlite_version().decode()

__all__ = ["AdvancedBoxOptions", "Box", "BoxInfo", "BoxMetrics", "BoxOptions", "Boxlite", "BoxliteError",
           "BoxliteExecutor", "CodeBox", "ExecError", "ExecResult", "Execution", "ExecutionResult", "ImageInfo",
           "ImagePullResult", "ImageRegistry", "InteractiveBox", "NativeError", "NetworkSpec", "Options",
           "ParseError", "RuntimeMetrics", "SandboxInitError", "Secret", "SecurityOptions", "SimpleBox",
           "TimeoutError", "__version__"]
