"""Option types with the documented fields, defaults and validation errors."""
import os
from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class ImageRegistry:
    host: str
    transport: str = "https"
    skip_verify: bool = False
    search: bool = False
    username: Optional[str] = None
    password: Optional[str] = None
    bearer_token: Optional[str] = None

    # The documented errors are RuntimeError (seeds/002, "Troubleshooting" of image registries).
    def __post_init__(self):
        if not isinstance(self.host, str) or not self.host:
            raise RuntimeError("image registry host is required")
        if "://" in self.host or "/" in self.host:
            raise RuntimeError(f"image registry host must be host[:port], not a URL: {self.host}")
        if self.transport not in ("https", "http"):
            raise RuntimeError(f"unsupported registry transport: {self.transport}")
        if bool(self.username) != bool(self.password):
            raise RuntimeError("registry username and password must be provided together")


@dataclass
class Options:
    """Runtime options: home_dir (None = $BOXLITE_HOME or ~/.boxlite) and image registries."""
    home_dir: Optional[str] = None
    image_registries: List[ImageRegistry] = field(default_factory=list)

    def __post_init__(self):
        regs = self.image_registries
        if regs is not None and (isinstance(regs, (str, bytes, ImageRegistry))
                                 or not all(isinstance(r, ImageRegistry) for r in regs)):
            raise TypeError("Options image_registries must be a list of ImageRegistry")


@dataclass
class NetworkSpec:
    """mode "enabled" or "disabled"; allow_net = egress allowlist ([] = allow all)."""
    mode: str
    allow_net: List[str] = field(default_factory=list)

    def __post_init__(self):
        if self.mode not in ("enabled", "disabled"):
            raise ValueError(f"NetworkSpec mode must be 'enabled' or 'disabled', not {self.mode!r}")
        if isinstance(self.allow_net, str) or not all(isinstance(h, str) and h for h in self.allow_net):
            raise TypeError("NetworkSpec allow_net must be a list of non-empty host names")
        if self.mode == "disabled" and self.allow_net:
            raise ValueError("NetworkSpec allow_net needs mode='enabled'")


@dataclass
class Secret:
    """The box sees BOXLITE_SECRET_<NAME> holding the placeholder; the host puts value
    in place of it in HTTPS requests to `hosts`."""
    name: str
    value: str
    hosts: List[str] = field(default_factory=list)
    placeholder: Optional[str] = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("Secret name must be a non-empty string")
        if not isinstance(self.value, str):
            raise TypeError("Secret value must be a str")
        if isinstance(self.hosts, (str, bytes)) or not all(isinstance(h, str) for h in self.hosts or []):
            raise TypeError(f"Secret hosts must be a list of str, not {type(self.hosts).__name__}"
                            if isinstance(self.hosts, (str, bytes)) else "Secret hosts must be a list of str")
        self.hosts = list(self.hosts or [])
        if self.placeholder is None:
            self.placeholder = f"<BOXLITE_SECRET:{self.name}>"


@dataclass
class SecurityOptions:
    """The jailer's switches, with the documented fields, defaults and presets: an
    explicit SecurityOptions() has every switch off; use a preset.

    What the core enforces (docs/python.md): seccomp_enabled (with jailer_enabled,
    its master switch) turns the jail engine's seccomp filter, or a vm box's QEMU
    seccomp sandbox, on or off; each max_*
    limit is an rlimit of the box's processes on either engine (max_processes also
    caps its pids cgroup: the host's for a jail, the guest kernel's for a VM).
    What boxlite keeps on whatever is asked (the jail's namespaces when
    jailer_enabled is False; closing inherited fds when close_fds is False) is
    reported with a RuntimeWarning naming the field, never silently. network_enabled
    is macOS-only (documented) and accepted."""
    jailer_enabled: bool = False
    seccomp_enabled: bool = False
    max_open_files: Optional[int] = None
    max_file_size: Optional[int] = None
    max_processes: Optional[int] = None
    max_memory: Optional[int] = None
    max_cpu_time: Optional[int] = None
    network_enabled: bool = True
    close_fds: bool = True

    LIMITS = ("max_open_files", "max_file_size", "max_processes", "max_memory", "max_cpu_time")

    def __post_init__(self):
        for name in self.LIMITS:
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
                raise ValueError(f"SecurityOptions {name} must be a positive int or None, not {v!r}")

    @classmethod
    def development(cls):
        return cls(jailer_enabled=False, seccomp_enabled=False, close_fds=False)

    @classmethod
    def standard(cls):
        return cls(jailer_enabled=True, seccomp_enabled=True, close_fds=True)

    @classmethod
    def maximum(cls):
        return cls(jailer_enabled=True, seccomp_enabled=True, close_fds=True, max_open_files=1024,
                   max_file_size=1 << 30, max_processes=100)

    def _kept_on(self):
        """The switches asked off that boxlite keeps on, by name (for the warning)."""
        out = []
        if not self.jailer_enabled:
            out.append("jailer_enabled=False (a jail box keeps its namespaces, capabilities and no_new_privs; "
                       "only its seccomp filter is off)")
        if not self.close_fds:
            out.append("close_fds=False (boxlite always closes inherited file descriptors)")
        return out


@dataclass
class AdvancedBoxOptions:
    security: Optional[SecurityOptions] = None


_SYSTEM_DIRS = ("/proc", "/sys", "/dev", "/etc", "/bin", "/sbin", "/usr", "/lib", "/lib64", "/boot", "/")

_KNOWN = {"image", "rootfs_path", "cpus", "memory_mib", "disk_size_gb", "auto_remove", "network", "secrets",
          "volumes", "ports", "env", "working_dir", "advanced", "user", "entrypoint", "cmd", "engine", "detach",
          "auto_stop", "auto_delete", "auto_resume"}


class BoxOptions:
    """The documented box options. `name` is an argument of Boxlite.create(), not a field."""

    def __init__(self, image=None, rootfs_path=None, cpus=None, memory_mib=None, disk_size_gb=None,
                 auto_remove=True, network=None, secrets=None, volumes=None, ports=None, env=None,
                 working_dir=None, advanced=None, user=None, entrypoint=None, cmd=None, engine=None,
                 detach=False, **unknown):
        if unknown:
            bad = ", ".join(sorted(unknown))
            raise TypeError(f"BoxOptions got unknown field(s): {bad}")
        if not image and not rootfs_path:
            raise ValueError("Either 'image' or 'rootfs_path' must be provided")
        for name, v in (("cpus", cpus), ("memory_mib", memory_mib), ("disk_size_gb", disk_size_gb)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
                raise ValueError(f"BoxOptions {name} must be a positive int, not {v!r}")
        # The documented OverflowError of a count past the core's range (cpus is a u8:
        # cpus=300 raises at construction, seeds/002 "CPU count exceeds 255").
        for name, v, top in (("cpus", cpus, 255), ("memory_mib", memory_mib, 2**31 - 1),
                             ("disk_size_gb", disk_size_gb, 2**64 - 1)):
            if v is not None and v > top:
                raise OverflowError(f"out of range integral type conversion attempted (BoxOptions {name}={v}, "
                                    f"at most {top})")
        entrypoint, cmd = _str_list(entrypoint, "entrypoint"), _str_list(cmd, "cmd")
        if rootfs_path is not None and not isinstance(rootfs_path, str):
            try:
                rootfs_path = os.fspath(rootfs_path)
            except TypeError:
                pass  # named below
        for name, v in (("image", image), ("rootfs_path", rootfs_path), ("working_dir", working_dir),
                        ("user", user)):
            if v is not None and not isinstance(v, str):
                raise TypeError(f"BoxOptions {name} must be a str, not {type(v).__name__}")
        if env is not None and not isinstance(env, (list, tuple)):
            raise TypeError(f"BoxOptions env must be a list of (key, value) tuples, not {type(env).__name__}")
        env = [tuple(e) for e in (env or [])]
        if not all(len(e) == 2 and all(isinstance(x, str) for x in e) for e in env):
            raise TypeError("BoxOptions env entries must be (str, str) tuples")
        if network is not None and not isinstance(network, NetworkSpec):
            raise TypeError("BoxOptions network must be a NetworkSpec")
        if isinstance(secrets, (str, bytes, Secret)):
            raise TypeError(f"BoxOptions secrets must be a list of Secret, not {type(secrets).__name__}")
        secrets = list(secrets or [])
        if not all(isinstance(s, Secret) for s in secrets):
            raise TypeError("BoxOptions secrets must be a list of Secret")
        self.volumes = _check_volumes(volumes)
        self.ports = _check_ports(ports)
        if advanced is not None and not isinstance(advanced, AdvancedBoxOptions):
            raise TypeError("BoxOptions advanced must be an AdvancedBoxOptions")
        if engine not in (None, "vm", "jail"):
            raise ValueError(f"BoxOptions engine must be 'vm' or 'jail', not {engine!r}")
        self.image, self.rootfs_path = image, rootfs_path
        self.cpus, self.memory_mib, self.disk_size_gb = cpus, memory_mib, disk_size_gb
        self.auto_remove, self.detach = bool(auto_remove), bool(detach)
        self.network = network or NetworkSpec(mode="enabled")
        self.secrets, self.env, self.working_dir, self.user = secrets, env, working_dir, user
        self.advanced, self.entrypoint, self.cmd, self.engine = advanced, entrypoint, cmd, engine

    def unsupported(self):
        """The documented options the core does not support yet, by name (none today:
        SecurityOptions limits the core cannot honour are refused by the core)."""
        return []


def _str_list(v, name):
    """A list of str option (entrypoint, cmd): a plain str is TypeError, never its
    characters (the reference documents list[str] only)."""
    if v is None:
        return None
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
        raise TypeError(f"BoxOptions {name} must be a list of str, not {type(v).__name__}")
    if not all(isinstance(x, str) for x in v):
        raise TypeError(f"BoxOptions {name} must be a list of str")
    return list(v)


def _first_key(d, keys):
    for k in keys:
        if d.get(k) is not None:
            return d[k]
    return None


def _read_only(v):
    # As the reference's binding does: only a bool is a bool ("ro"/"rw" are the CLI's).
    if not isinstance(v, bool):
        raise TypeError(f"argument 'volumes': '{type(v).__name__}' object cannot be cast as 'bool'")
    return v


def _check_volumes(volumes):
    """The documented forms: (host, guest[, read_only]) tuples and dicts with
    host/host_path (or source) and guest/guest_path (or target), read_only a bool."""
    if isinstance(volumes, (str, bytes, dict)):
        raise TypeError(f"BoxOptions volumes must be a list of tuples or dicts, not {type(volumes).__name__}")
    out = []
    for v in volumes or []:
        if isinstance(v, dict):
            host = _first_key(v, ("host", "host_path", "source"))
            guest = _first_key(v, ("guest", "guest_path", "target"))
            if host is None:
                raise RuntimeError("volume dict missing host/host_path")
            if guest is None:
                raise RuntimeError("volume dict missing guest/guest_path")
            ro = _read_only(v.get("read_only", False))
        elif isinstance(v, tuple):
            if len(v) not in (2, 3):
                raise RuntimeError("volumes tuples must be (host, guest[, read_only])")
            host, guest, ro = v[0], v[1], _read_only(v[2]) if len(v) == 3 else False
        else:
            raise TypeError("volumes entries must be tuple or dict")
        try:
            host = os.fspath(host)
        except TypeError:
            raise TypeError(f"volume host path must be str or os.PathLike, not {type(host).__name__}") from None
        if not isinstance(host, str):
            raise TypeError(f"volume host path must be str, not {type(host).__name__}")
        if not isinstance(guest, str) or not guest.startswith("/"):
            raise ValueError(f"Invalid mount path {guest!r} (must be absolute)")
        if guest.rstrip("/") in _SYSTEM_DIRS or guest == "/":
            raise ValueError(f"Invalid mount path {guest!r} (cannot mount to system directory)")
        out.append((host, guest, ro))
    return out


def _check_ports(ports):
    if isinstance(ports, (str, bytes, dict)):
        raise TypeError(f"BoxOptions ports must be a list of tuples or dicts, not {type(ports).__name__}")
    out = []
    for p in ports or []:
        if isinstance(p, dict):
            host, guest = p.get("host_port", 0), p.get("guest_port")
            proto, ip = p.get("protocol", "tcp"), p.get("host_ip")
        elif isinstance(p, tuple) and len(p) in (2, 3):
            host, guest, proto, ip = p[0], p[1], p[2] if len(p) == 3 else "tcp", None
        else:
            raise TypeError("ports entries must be (host_port, guest_port) tuples or dicts")
        for name, v in (("host_port", host or 0), ("guest_port", guest)):
            if not isinstance(v, int) or not 0 <= v <= 65535 or (name == "guest_port" and v == 0):
                raise ValueError(f"port {name} must be 1..65535, not {v!r}")
        if proto not in ("tcp", "udp"):
            raise ValueError(f"port protocol must be 'tcp' or 'udp', not {proto!r}")
        out.append((host or 0, guest, proto, ip))
    return out


@dataclass
class ApiKeyCredential:
    """The documented API-key credential of a REST runtime (kept so documented
    imports work; Boxlite.rest() is not available yet: it raises, naming it)."""
    api_key: str

    def __repr__(self):
        return "ApiKeyCredential(api_key=***)"


@dataclass
class BoxliteRestOptions:
    """The documented options of Boxlite.rest(). boxlite has no REST runtime yet:
    Boxlite.rest() raises RuntimeError naming it, whatever these hold."""
    url: str
    credential: Optional[ApiKeyCredential] = None
    path_prefix: Optional[str] = None

    @classmethod
    def from_env(cls):
        """BOXLITE_REST_URL (required: ValueError when unset), BOXLITE_API_KEY and
        BOXLITE_REST_PATH_PREFIX."""
        import os
        url = os.environ.get("BOXLITE_REST_URL")
        if not url:
            raise ValueError("BOXLITE_REST_URL is not set")
        key = os.environ.get("BOXLITE_API_KEY")
        return cls(url=url, credential=ApiKeyCredential(key) if key else None,
                   path_prefix=os.environ.get("BOXLITE_REST_PATH_PREFIX") or None)


@dataclass
class SnapshotOptions:
    """Options of box.snapshot.create: none yet (a placeholder, as documented)."""


@dataclass
class CloneOptions:
    """Options of box.clone_box: none yet (a placeholder, as documented)."""


@dataclass
class ExportOptions:
    """Options of box.export: none yet (a placeholder, as documented)."""
