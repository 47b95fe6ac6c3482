# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-ctk cdi generate`` and ``cdi list`` of the simulated toolkit (test double).

The generated spec has the real shape: ``cdiVersion``, ``kind:
nvidia.com/gpu``, one device per GPU by index and by UUID, one per MIG
device (``<gpu>:<mig>`` and ``MIG-<uuid>``, with the nvidia-caps device
nodes), ``all``, and common container edits (control device nodes, driver
libraries, the nvidia-cdi-hook hooks).  The ``enable-cuda-compat`` hook is
left out when ``features.disable-cuda-compat-lib-hook`` is set in the
toolkit config.  Generation fails like NVML does without a usable driver.
"""

import json
import os
import platform
import sys

from nvsim import env
from nvsim import gpus as gpu_info
from nvsim import profiles
from nvsim import yaml_lite
from nvsim.ctk import common as ctk
from nvsim.ctk import config as ctk_config

CDI_VERSION = "0.5.0"
SPEC_DIRS = env.CDI_SPEC_DIRS
HOOK = "/usr/bin/nvidia-cdi-hook"
MOUNT_OPTIONS = ["ro", "nosuid", "nodev", "rbind", "rprivate"]
BINARIES = ("nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
            "nvidia-cuda-mps-server")
LIBRARIES = ("libcuda.so", "libcudadebugger.so", "libnvidia-cfg.so", "libnvidia-gpucomp.so",
             "libnvidia-ml.so", "libnvidia-nvvm.so", "libnvidia-opencl.so", "libnvidia-ptxjitcompiler.so")

GENERATE_FLAGS = {
    "--output": ("output", "str", ""),
    "--format": ("format", "str", ""),
    "--mode": ("mode", "str", "auto"),
    "--device-name-strategy": ("strategies", "list", []),
    "--driver-root": ("driver_root", "str", "/"),
    "--dev-root": ("dev_root", "str", ""),
    "--library-search-path": ("library_paths", "list", []),
    "--nvidia-cdi-hook-path": ("hook", "str", HOOK),
    "--nvidia-ctk-path": ("hook", "str", HOOK),
    "--ldconfig-path": ("ldconfig", "str", ""),
    "--vendor": ("vendor", "str", "nvidia.com"),
    "--cdi-vendor": ("vendor", "str", "nvidia.com"),
    "--class": ("class", "str", "gpu"),
    "--cdi-class": ("class", "str", "gpu"),
    "--csv.file": ("csv", "list", []),
    "--csv.ignore-pattern": ("csv_ignore", "list", []),
    "--disable-hook": ("disable_hooks", "list", []),
    "--enable-hook": ("enable_hooks", "list", []),
    "--no-all-device": ("no_all", "bool", False),
    "--feature-flag": ("feature_flags", "list", []),
    "--config-search-path": ("config_search", "list", []),
}
MODES = ("auto", "nvml", "management", "wsl", "gds", "mofed", "csv", "imex", "gdrcopy")


def run(args, logger):
    if not args:
        raise ctk.UsageError("No help topic for ''")
    if args[0] == "generate":
        return generate(args[1:], logger)
    if args[0] == "list":
        return list_devices(args[1:], logger)
    raise ctk.UsageError("No help topic for '%s'" % args[0])


def _library_dir():
    machine = platform.machine()
    multiarch = "/usr/lib/%s-linux-gnu" % ("aarch64" if machine in ("aarch64", "arm64") else "x86_64")
    if os.path.isdir(gpu_info.resolve(multiarch)) or os.path.exists("/etc/debian_version"):
        return multiarch
    return "/usr/lib64"


def _mig_minors(gpu_index, gi_id, ci_id=None):
    """nvidia-caps minor numbers as listed in /proc/driver/nvidia-caps/mig-minors.

    Minors 1 and 2 are the MIG config/monitor capabilities; then every GPU
    owns 15 GPU instances of 9 entries (the instance and its 8 compute
    instances).
    """
    base = 3 + gpu_index * 135 + gi_id * 9
    return base if ci_id is None else base + 1 + ci_id


def _device_nodes(paths):
    return [{"path": p} for p in paths]


def build_spec(values, driver_version, devices, disable_compat):
    strategies = values["strategies"] or ["index", "uuid"]
    spec_devices = []
    all_nodes = []
    for gpu in devices:
        node = "/dev/nvidia%d" % gpu.index
        all_nodes.append(node)
        if gpu.mig_current and gpu.gpu_instances:
            for number, mig in enumerate(profiles.mig_devices(gpu)):
                gi_id, ci_id = mig["gi"]["id"], mig["ci"]["id"]
                nodes = [node, "/dev/nvidia-caps/nvidia-cap%d" % _mig_minors(gpu.index, gi_id),
                         "/dev/nvidia-caps/nvidia-cap%d" % _mig_minors(gpu.index, gi_id, ci_id)]
                for extra in nodes[1:]:
                    if extra not in all_nodes:
                        all_nodes.append(extra)
                edits = {"deviceNodes": _device_nodes(nodes)}
                if "index" in strategies:
                    spec_devices.append({"name": "%d:%d" % (gpu.index, number), "containerEdits": edits})
                if "uuid" in strategies:
                    spec_devices.append({"name": mig["uuid"], "containerEdits": edits})
        edits = {"deviceNodes": _device_nodes([node])}
        if "index" in strategies:
            spec_devices.append({"name": str(gpu.index), "containerEdits": edits})
        if "uuid" in strategies:
            spec_devices.append({"name": gpu.uuid, "containerEdits": edits})
        if "type-index" in strategies:
            spec_devices.append({"name": "gpu%d" % gpu.index, "containerEdits": edits})
    if not values["no_all"] and devices:
        spec_devices.append({"name": "all", "containerEdits": {"deviceNodes": _device_nodes(all_nodes)}})

    libdir = _library_dir()
    hook = values["hook"]
    hook_env = ["NVIDIA_CTK_DEBUG=false"]
    hooks = [{"hookName": "createContainer", "path": hook,
              "args": ["nvidia-cdi-hook", "create-symlinks", "--link", "libcuda.so.1::%s/libcuda.so" % libdir],
              "env": hook_env}]
    if not disable_compat:
        hooks.append({"hookName": "createContainer", "path": hook,
                      "args": ["nvidia-cdi-hook", "enable-cuda-compat",
                               "--host-driver-version=%s" % driver_version], "env": hook_env})
    hooks.append({"hookName": "createContainer", "path": hook,
                  "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", libdir], "env": hook_env})
    hooks.append({"hookName": "createContainer", "path": hook,
                  "args": ["nvidia-cdi-hook", "disable-device-node-modification"], "env": hook_env})
    mounts = []
    for library in LIBRARIES:
        path = "%s/%s.%s" % (libdir, library, driver_version)
        mounts.append({"hostPath": path, "containerPath": path, "options": list(MOUNT_OPTIONS)})
    for binary in BINARIES:
        path = "/usr/bin/" + binary
        mounts.append({"hostPath": path, "containerPath": path, "options": list(MOUNT_OPTIONS)})
    if os.path.exists(env.path(*env.PERSISTENCED_SOCKET)):
        mounts.append({"hostPath": "/run/nvidia-persistenced/socket",
                       "containerPath": "/run/nvidia-persistenced/socket",
                       "options": ["ro", "nosuid", "nodev", "rbind", "rprivate", "noexec"]})
    common = {
        "env": ["NVIDIA_VISIBLE_DEVICES=void"],
        "deviceNodes": _device_nodes(["/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                      "/dev/nvidiactl"]),
        "hooks": hooks,
        "mounts": mounts,
    }
    return {"cdiVersion": CDI_VERSION, "kind": "%s/%s" % (values["vendor"], values["class"]),
            "devices": spec_devices, "containerEdits": common}


def generate(args, logger):
    values, positional = ctk.parse_flags(args, GENERATE_FLAGS)
    if positional:
        raise ctk.UsageError("unexpected argument %s" % positional[0])
    output = values["output"] or os.environ.get("NVIDIA_CTK_CDI_OUTPUT_FILE_PATH", "")
    fmt = values["format"] or os.environ.get("NVIDIA_CTK_CDI_OUTPUT_FORMAT", "")
    if not fmt:
        fmt = "json" if output.endswith(".json") else "yaml"
    if fmt not in ("yaml", "json"):
        raise ctk.CommandError('invalid output format: %s' % fmt)
    if values["mode"] not in MODES:
        raise ctk.CommandError('invalid discovery mode: %s' % values["mode"])
    problem = gpu_info.driver_problem()
    if problem == gpu_info.NOT_LOADED:
        raise ctk.CommandError("failed to generate CDI spec: failed to create device CDI specs: failed to "
                               "initialize NVML: ERROR_DRIVER_NOT_LOADED")
    if problem == gpu_info.MISMATCH:
        raise ctk.CommandError("failed to generate CDI spec: failed to create device CDI specs: failed to "
                               "initialize NVML: ERROR_LIB_RM_VERSION_MISMATCH")
    driver_version = env.loaded_driver_version()
    if values["mode"] == "auto":
        logger.info("Auto-detected mode as 'nvml'")
    logger.info("Using driver version %s" % driver_version)
    disable_compat = bool(ctk_config.lookup(ctk_config.load(), "features.disable-cuda-compat-lib-hook", False))
    disable_compat = disable_compat or "enable-cuda-compat" in values["disable_hooks"]
    spec = build_spec(values, driver_version, gpu_info.load_gpus(), disable_compat)
    if fmt == "json":
        text = json.dumps(spec, indent=2) + "\n"
    else:
        text = yaml_lite.dump(spec)
    logger.info("Generated CDI spec with version %s" % CDI_VERSION)
    if not output:
        sys.stdout.write(text)
        return 0
    target = gpu_info.resolve(output)
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    temporary = target + ".tmp"
    with open(temporary, "w") as handle:
        handle.write(text)
    os.chmod(temporary, 0o644)
    os.replace(temporary, target)
    return 0


def _read_spec(path):
    with open(path) as handle:
        text = handle.read()
    if path.endswith(".json"):
        return json.loads(text)
    return yaml_lite.load(text)


def list_devices(args, logger):
    values, positional = ctk.parse_flags(args, {"--spec-dir": ("dirs", "list", [])})
    if positional:
        raise ctk.UsageError("unexpected argument %s" % positional[0])
    names = set()
    for directory in values["dirs"] or SPEC_DIRS:
        real = gpu_info.resolve(directory)
        try:
            entries = sorted(os.listdir(real))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith((".yaml", ".yml", ".json")):
                continue
            try:
                spec = _read_spec(os.path.join(real, entry))
                kind = spec["kind"]
                for device in spec.get("devices") or []:
                    names.add("%s=%s" % (kind, device["name"]))
            except (ValueError, KeyError, TypeError, OSError, yaml_lite.YamlError) as exc:
                logger.warning("Failed to load CDI Spec %s: %s" % (os.path.join(directory, entry), exc))
    logger.info("Found %d CDI devices" % len(names))
    for name in sorted(names):
        sys.stdout.write(name + "\n")
    return 0
