# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Paths and shared state of the simulated NVIDIA stack (test double).

This is the only module that knows where things live.  Everything is below
``$NVIDIA_SIM_ROOT`` (default ``/``) so that host-side tests can point the
whole stack at a temporary directory.  See ``tests/nvidia_sim/README.md``.
"""

import errno
import fcntl
import json
import os
import time

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# In the source tree the profiles sit next to the package; in containers they
# are installed under usr/share/nvidia-sim/profiles and found through root().
_BUNDLED_PROFILES = os.path.join(os.path.dirname(_PACKAGE_DIR), "profiles")

PROFILE_FILE = ("etc", "nvidia-sim", "profile")
PROFILES_DIR = ("usr", "share", "nvidia-sim", "profiles")
# Version markers, one per simulated package that ships a tool or a library
# (catalog_tools.version_marker in the repository builder writes them).
MARKER_DIR = ("usr", "share", "nvidia-sim")
DRIVER_VERSION_FILE = MARKER_DIR + ("driver-version",)
# Shipped by the NVML library package (libnvidia-ml1, libnvidia-compute-<branch>):
# absent = nvidia-smi cannot load libnvidia-ml.so.1 (exit 12).
NVML_VERSION_FILE = MARKER_DIR + ("nvml-version",)
FLAVOUR_FILE = MARKER_DIR + ("kernel-module-flavour",)
# Prebuilt modules (Canonical's linux-restricted-modules) mark their flavour
# per kernel: a DKMS package may be installed beside them (two packages
# cannot ship one file), and every kernel has its own module package.
PREBUILT_FLAVOUR_DIR = MARKER_DIR + ("prebuilt-kernel-module-flavour",)
COMPONENT_VERSION_FILES = {
    "container-toolkit": MARKER_DIR + ("container-toolkit-version",),
    "dcgm": MARKER_DIR + ("dcgm-version",),
    "dcgm-exporter": MARKER_DIR + ("dcgm-exporter-version",),
    "fabricmanager": MARKER_DIR + ("fabricmanager-version",),
}
LOADED_DRIVER_FILE = ("run", "nvidia-sim", "loaded-driver")
PROC_VERSION_FILE = ("run", "nvidia-sim", "proc", "driver", "nvidia", "version")
NVSWITCH_DEVICES_DIR = ("run", "nvidia-sim", "proc", "driver", "nvidia-nvswitch", "devices")
BOOTED_MARKER = ("run", "nvidia-sim", "booted")
# Fault injection: NVML initialisation fails with the error in this file
# ("Unknown Error": a container without the /dev/nvidia* nodes).
NVML_INIT_ERROR_FILE = ("run", "nvidia-sim", "nvml-init-error")
PROCESSES_DIR = ("run", "nvidia-sim", "processes")
STATE_FILE = ("var", "lib", "nvidia-sim", "state.json")
STATE_LOCK = ("var", "lib", "nvidia-sim", "state.lock")
HW_DIR = ("var", "lib", "nvidia-sim", "hw")
LOG_DIR = ("var", "log", "nvidia-sim")
CALL_LOG = LOG_DIR + ("calls.log",)
PERSISTENCED_RUN_DIR = ("run", "nvidia-persistenced")
PERSISTENCED_PID = PERSISTENCED_RUN_DIR + ("nvidia-persistenced.pid",)
PERSISTENCED_SOCKET = PERSISTENCED_RUN_DIR + ("socket",)
# Published by the simulated daemon next to its pid file (not a file the real daemon writes).
PERSISTENCED_MODE_FILE = PERSISTENCED_RUN_DIR + ("nvsim-persistence-mode.json",)
FABRICMANAGER_PID = ("run", "nvidia-fabricmanager", "nv-fabricmanager.pid")

# Default locations of the real tools (their built-in defaults, given here as
# absolute paths; the tools map them below the root with gpus.resolve).
CTK_CONFIG_FILE = "/etc/nvidia-container-runtime/config.toml"
CTK_RUNTIME_CONFIGS = {
    # runtime: (config file, drop-in file of toolkit >= 1.18)
    "docker": ("/etc/docker/daemon.json", ""),
    "containerd": ("/etc/containerd/config.toml", "/etc/containerd/conf.d/99-nvidia.toml"),
    "crio": ("/etc/crio/crio.conf", "/etc/crio/conf.d/99-nvidia.toml"),
}
CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
DCGM_EXPORTER_COLLECTORS = "/etc/dcgm-exporter/default-counters.csv"
FABRICMANAGER_CONFIG = "/usr/share/nvidia/nvswitch/fabricmanager.cfg"
FABRICMANAGER_LOG = "/var/log/fabricmanager.log"
HOSTENGINE_PID_FILE = "/var/run/nvhostengine.pid"
HOSTENGINE_LOG_FILE = "/var/log/nv-hostengine.log"
HOSTENGINE_SOCKET = "/tmp/nv-hostengine"

# CUDA version reported by the driver of each branch (the "CUDA Version" of
# nvidia-smi is the driver API version, fixed per branch).
CUDA_BY_BRANCH = {
    "525": "12.0", "530": "12.1", "535": "12.2", "545": "12.3", "550": "12.4",
    "555": "12.5", "560": "12.6", "565": "12.7", "570": "12.8", "575": "12.9",
    "580": "13.0", "590": "13.1", "595": "13.2",
}


class SimError(RuntimeError):
    """Misconfiguration of the simulator itself (not a simulated GPU error)."""


def root():
    return os.environ.get("NVIDIA_SIM_ROOT") or "/"


def path(*parts):
    return os.path.join(root(), *parts)


def _read_line(parts):
    try:
        with open(path(*parts)) as handle:
            value = handle.read().strip()
    except (IOError, OSError):
        return None
    return value or None


def _write_file(parts, content):
    target = path(*parts)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = "%s.tmp.%d" % (target, os.getpid())
    with open(tmp, "w") as handle:
        handle.write(content)
    os.replace(tmp, target)


def write_file(parts, content):
    """Atomically write a file below root(); parts is a tuple of path parts."""
    _write_file(parts, content)


def profile_name():
    return _read_line(PROFILE_FILE)


def profile_path(name):
    """Return the JSON file of a profile: installed copy first, then bundled."""
    for directory in (path(*PROFILES_DIR), _BUNDLED_PROFILES):
        candidate = os.path.join(directory, name + ".json")
        if os.path.isfile(candidate):
            return candidate
    return None


def available_profiles():
    names = set()
    for directory in (path(*PROFILES_DIR), _BUNDLED_PROFILES):
        if os.path.isdir(directory):
            names.update(f[:-5] for f in os.listdir(directory) if f.endswith(".json"))
    return sorted(names)


def load_profile(name=None):
    name = name or profile_name()
    if not name:
        raise SimError(
            "nvidia-sim: no GPU profile configured: write a profile name to %s "
            "(run 'nvidia-sim-hw --profile NAME'; available: %s)"
            % (path(*PROFILE_FILE), ", ".join(available_profiles())))
    source = profile_path(name)
    if source is None:
        raise SimError(
            "nvidia-sim: unknown GPU profile %r (available: %s)"
            % (name, ", ".join(available_profiles())))
    with open(source) as handle:
        profile = json.load(handle)
    profile.setdefault("name", name)
    return profile


def installed_driver_version():
    return _read_line(DRIVER_VERSION_FILE)


def nvml_library_version():
    """Driver version of the installed NVML library package, None without it."""
    return _read_line(NVML_VERSION_FILE)


def nvml_init_error():
    """The NVML error every initialisation fails with (fault injection), else None."""
    return _read_line(NVML_INIT_ERROR_FILE)


def component_version(component, default):
    """Version of a simulated component package (COMPONENT_VERSION_FILES), else default."""
    return _read_line(COMPONENT_VERSION_FILES[component]) or default


def daemon_log_path(prog):
    """Log file of a simulated daemon when it does not log to syslog."""
    return path(*(LOG_DIR + (prog + ".log",)))


def loaded_driver_version():
    return _read_line(LOADED_DRIVER_FILE)


def module_flavour():
    """'open' or 'proprietary' from the kernel-module package, None if absent.

    A DKMS-built module wins over a prebuilt one, as depmod ranks
    updates/dkms before the kernel's own tree; among prebuilt ones (one per
    kernel; the simulation has no booted kernel) the first kernel by name.
    """
    flavour = _read_line(FLAVOUR_FILE)
    if flavour:
        return flavour
    try:
        kernels = sorted(os.listdir(path(*PREBUILT_FLAVOUR_DIR)))
    except OSError:
        return None
    for kernel in kernels:
        flavour = _read_line(PREBUILT_FLAVOUR_DIR + (kernel,))
        if flavour:
            return flavour
    return None


def driver_branch(version):
    return version.split(".", 1)[0] if version else None


def cuda_version(driver_version):
    """CUDA driver API version shown by nvidia-smi for a driver version."""
    branch = driver_branch(driver_version)
    if branch in CUDA_BY_BRANCH:
        return CUDA_BY_BRANCH[branch]
    # Unknown branches: the newest known CUDA not newer than the branch.
    known = [b for b in CUDA_BY_BRANCH if branch and branch.isdigit() and int(b) <= int(branch)]
    return CUDA_BY_BRANCH[max(known, key=int)] if known else "12.0"


def pid_alive(pid):
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (ValueError, OverflowError, OSError):
        return False
    # A zombie still answers signal 0 but is gone for any practical purpose.
    try:
        with open("/proc/%d/stat" % int(pid)) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (IOError, OSError, IndexError):
        return True


def now():
    """Current time; NVIDIA_SIM_TIME (epoch seconds) freezes it for golden tests."""
    frozen = os.environ.get("NVIDIA_SIM_TIME")
    return float(frozen) if frozen else time.time()


def _pid_from_file(parts):
    value = _read_line(parts)
    if value and value.isdigit() and pid_alive(int(value)):
        return int(value)
    return None


def fabricmanager_running():
    return _pid_from_file(FABRICMANAGER_PID) is not None


def persistenced_pid():
    return _pid_from_file(PERSISTENCED_PID)


def persistenced_running():
    return persistenced_pid() is not None


def alive_processes():
    """Simulated GPU compute processes whose PID is alive, sorted by PID.

    Each is the dict written by nvidia-sim-workload: pid, gpu (index),
    used_memory (MiB), name, type ("C").
    """
    directory = path(*PROCESSES_DIR)
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    result = []
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name)) as handle:
                record = json.load(handle)
        except (IOError, OSError, ValueError):
            continue
        if pid_alive(record.get("pid", -1)):
            result.append(record)
    return sorted(result, key=lambda r: r["pid"])


def log_call(prog, argv):
    target = path(*CALL_LOG)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        line = json.dumps({"ts": time.time(), "prog": prog, "argv": list(argv),
                           "pid": os.getpid()}) + "\n"
        # One write on an O_APPEND descriptor keeps concurrent lines whole.
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES):
            raise


def read_call_log(prog=None):
    try:
        with open(path(*CALL_LOG)) as handle:
            entries = [json.loads(line) for line in handle if line.strip()]
    except (IOError, OSError):
        return []
    return [e for e in entries if prog is None or e.get("prog") == prog]


# --- settings state -------------------------------------------------------
#
# state.json layout:
# {"gpus": {"<index>": {<setting>: value, ...}}}
# Settings per GPU (absent = profile default):
#   persistence_mode   bool  set by `nvidia-smi -pm`; absent = follows nvidia-persistenced
#   power_limit        float watts (enforced limit set by -pl)
#   app_clocks         [mem_mhz, graphics_mhz] (set by -ac, removed by -rac)
#   compute_mode       "Default" | "Exclusive_Thread" | "Prohibited" | "Exclusive_Process"
#   ecc_current / ecc_pending   bool
#   mig_current / mig_pending   bool
#   gpu_instances      [{"id", "profile_id", "placement_start", "placement_size",
#                        "compute_instances": [{"id", "profile_id", "placement_start",
#                                               "placement_size"}]}]
# Volatile settings (persistence mode, power limit, application clocks, compute
# mode, MIG instances) are lost at reboot as on real hardware; ECC and MIG
# modes live in the InfoROM, so a reboot turns their pending value current.

VOLATILE_KEYS = ("persistence_mode", "power_limit", "app_clocks", "compute_mode",
                 "gpu_instances")


def apply_reboot_effects(state):
    for gpu in state.get("gpus", {}).values():
        for key in VOLATILE_KEYS:
            gpu.pop(key, None)
        apply_pending_modes(gpu)
    return state


def apply_pending_modes(gpu):
    """Make pending ECC/MIG modes current and drop MIG instances.

    This is what a reboot or a GPU reset does; pending equals current after.
    """
    for mode in ("ecc", "mig"):
        pending = gpu.pop(mode + "_pending", None)
        if pending is not None:
            gpu[mode + "_current"] = pending
    gpu.pop("gpu_instances", None)


def _read_state_file():
    try:
        with open(path(*STATE_FILE)) as handle:
            state = json.load(handle)
    except (IOError, OSError):
        return {"gpus": {}}
    except ValueError:
        raise SimError("nvidia-sim: corrupt state file %s" % path(*STATE_FILE))
    state.setdefault("gpus", {})
    return state


class _StateLock(object):
    def __init__(self, exclusive):
        self.exclusive = exclusive
        self.handle = None

    def __enter__(self):
        lock = path(*STATE_LOCK)
        os.makedirs(os.path.dirname(lock), exist_ok=True)
        self.handle = open(lock, "a")
        fcntl.flock(self.handle, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def _booted():
    return os.path.exists(path(*BOOTED_MARKER))


def _boot_if_needed():
    """Apply reboot effects once per boot (the marker lives on tmpfs /run)."""
    if _booted():
        return
    with _StateLock(True):
        if _booted():
            return
        state = apply_reboot_effects(_read_state_file())
        _write_file(STATE_FILE, json.dumps(state, indent=1, sort_keys=True) + "\n")
        _write_file(BOOTED_MARKER, "%f\n" % time.time())


def load_state():
    _boot_if_needed()
    with _StateLock(False):
        return _read_state_file()


def update_state(fn):
    """Locked read-modify-write; fn mutates the state dict (or returns a new one)."""
    _boot_if_needed()
    with _StateLock(True):
        state = _read_state_file()
        result = fn(state)
        if isinstance(result, dict):
            state = result
        _write_file(STATE_FILE, json.dumps(state, indent=1, sort_keys=True) + "\n")
    return state


def gpu_state(state, index):
    return state.get("gpus", {}).get(str(index), {})


def persistence_enabled(state, index):
    """Effective persistence mode: an explicit -pm wins, else the daemon."""
    value = gpu_state(state, index).get("persistence_mode")
    if value is None:
        return daemon_holds_persistence()
    return bool(value)


def daemon_persistence_mode():
    """None when no nvidia-persistenced runs, else whether it holds persistence mode on."""
    pid = persistenced_pid()
    if pid is None:
        return None
    try:
        with open(path(*PERSISTENCED_MODE_FILE)) as handle:
            record = json.load(handle)
    except (IOError, OSError, ValueError):
        # A daemon without the mode file (still starting) uses the default.
        return True
    if record.get("pid") != pid:
        return True
    return bool(record.get("persistence_mode", True))


def daemon_holds_persistence():
    """Whether a running nvidia-persistenced keeps persistence mode on: the
    packaged unit passes --no-persistence-mode, which must leave it off."""
    return bool(daemon_persistence_mode())
