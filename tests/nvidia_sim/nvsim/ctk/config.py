# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-ctk config`` of the simulated toolkit (test double).

Keys are checked against the toolkit's configuration schema (an unknown key
is refused like the real ``--set`` refuses it); a set edits
``/etc/nvidia-container-runtime/config.toml`` in place keeping comments and
every other line, and a missing file starts from the default configuration
``nvidia-ctk config default`` prints.
"""

import os
import sys

from nvsim import env
from nvsim import gpus as gpu_info
from nvsim import toml_lite
from nvsim.ctk import common as ctk

DEFAULT_CONFIG_FILE = env.CTK_CONFIG_FILE

# Every key of the toolkit's config.toml with the Go type behind it.
SCHEMA = {
    "accept-nvidia-visible-devices-as-volume-mounts": "bool",
    "accept-nvidia-visible-devices-envvar-when-unprivileged": "bool",
    "disable-require": "bool",
    "supported-driver-capabilities": "str",
    "swarm-resource": "str",
    "nvidia-container-cli.root": "str",
    "nvidia-container-cli.path": "str",
    "nvidia-container-cli.environment": "list",
    "nvidia-container-cli.debug": "str",
    "nvidia-container-cli.ldcache": "str",
    "nvidia-container-cli.load-kmods": "bool",
    "nvidia-container-cli.no-cgroups": "bool",
    "nvidia-container-cli.user": "str",
    "nvidia-container-cli.ldconfig": "str",
    "nvidia-container-runtime.debug": "str",
    "nvidia-container-runtime.log-level": "str",
    "nvidia-container-runtime.runtimes": "list",
    "nvidia-container-runtime.mode": "str",
    "nvidia-container-runtime.modes.csv.mount-spec-path": "str",
    "nvidia-container-runtime.modes.cdi.default-kind": "str",
    "nvidia-container-runtime.modes.cdi.annotation-prefixes": "list",
    "nvidia-container-runtime.modes.cdi.spec-dirs": "list",
    "nvidia-container-runtime.modes.legacy.cuda-compat-mode": "str",
    "nvidia-container-runtime-hook.path": "str",
    "nvidia-container-runtime-hook.skip-mode-detection": "bool",
    "nvidia-ctk.path": "str",
    "features.allow-additional-gids": "bool",
    "features.allow-cuda-compat-libs-from-container": "bool",
    "features.disable-cuda-compat-lib-hook": "bool",
    "features.disable-imex-channel-creation": "bool",
    "features.enable-cdi-spec-generation": "bool",
    "features.ignore-imex-channel-requests": "bool",
}


def _ldconfig():
    # Debian and Ubuntu ship the real binary as ldconfig.real behind a wrapper.
    if os.path.exists(gpu_info.resolve("/sbin/ldconfig.real")) or os.path.exists("/etc/debian_version"):
        return "@/sbin/ldconfig.real"
    return "@/sbin/ldconfig"


def default_config():
    return """#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"
#swarm-resource = "DOCKER_RESOURCE_GPU"

[nvidia-container-cli]
#debug = "/var/log/nvidia-container-toolkit.log"
environment = []
#ldcache = "/etc/ld.so.cache"
ldconfig = "%s"
load-kmods = true
#no-cgroups = false
#path = "/usr/bin/nvidia-container-cli"
#root = "/run/nvidia/driver"
#user = "root:video"

[nvidia-container-runtime]
#debug = "/var/log/nvidia-container-runtime.log"
log-level = "info"
mode = "auto"
runtimes = ["runc", "crun"]

[nvidia-container-runtime.modes]

[nvidia-container-runtime.modes.cdi]
annotation-prefixes = ["cdi.k8s.io/"]
default-kind = "nvidia.com/gpu"
spec-dirs = ["/etc/cdi", "/var/run/cdi"]

[nvidia-container-runtime.modes.csv]
mount-spec-path = "/etc/nvidia-container-runtime/host-files-for-container.d"

[nvidia-container-runtime.modes.legacy]
cuda-compat-mode = "ldconfig"

[nvidia-container-runtime-hook]
path = "nvidia-container-runtime-hook"
skip-mode-detection = false

[nvidia-ctk]
path = "nvidia-ctk"
""" % _ldconfig()


def load_text(path=DEFAULT_CONFIG_FILE):
    try:
        with open(gpu_info.resolve(path)) as handle:
            return handle.read()
    except (IOError, OSError):
        return default_config()


def load(path=DEFAULT_CONFIG_FILE):
    """The effective configuration as a dict (defaults when the file is missing)."""
    try:
        return toml_lite.loads(load_text(path))
    except toml_lite.TomlError as exc:
        raise ctk.CommandError("unable to create config: failed to load config: %s" % exc)


def lookup(config, dotted, default=None):
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def parse_set(item):
    key, sep, raw = item.partition("=")
    if key not in SCHEMA:
        top = key.split(".")[0]
        known_prefixes = {k.split(".")[0] for k in SCHEMA}
        missing = key.split(".")[-1] if top in known_prefixes else top
        raise ctk.CommandError('invalid --set option %s: invalid config option: undefined field: "%s"'
                               % (item, missing))
    kind = SCHEMA[key]
    if not sep:
        if kind == "bool":
            return key, True
        raise ctk.CommandError("invalid --set option %s: invalid format: expected key=value; got %s"
                               % (item, item))
    if kind == "bool":
        lowered = raw.lower()
        if lowered in ("1", "t", "true"):
            return key, True
        if lowered in ("0", "f", "false"):
            return key, False
        raise ctk.CommandError('invalid --set option %s: invalid format: strconv.ParseBool: parsing "%s": '
                               "invalid syntax" % (item, raw))
    if kind == "list":
        return key, raw.split(",")
    return key, raw


CONFIG_FLAGS = {
    "--config-file": ("config", "str", DEFAULT_CONFIG_FILE), "--config": ("config", "str", DEFAULT_CONFIG_FILE),
    "-c": ("config", "str", DEFAULT_CONFIG_FILE), "--set": ("sets", "list", []),
    "--in-place": ("in_place", "bool", False), "-i": ("in_place", "bool", False),
    "--output": ("output", "str", ""), "-o": ("output", "str", ""),
}


def _write(path, text):
    target = gpu_info.resolve(path)
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    with open(target, "w") as handle:
        handle.write(text)


def run(args, logger):
    if args and args[0] in ("default", "generate-default", "create-default"):
        values, _unused = ctk.parse_flags(args[1:], {"--output": ("output", "str", ""), "-o": ("output", "str", "")})
        if values["output"]:
            _write(values["output"], default_config())
        else:
            sys.stdout.write(default_config())
        return 0
    values, positional = ctk.parse_flags(args, CONFIG_FLAGS)
    if positional:
        raise ctk.UsageError("unexpected argument %s" % positional[0])
    text = load_text(values["config"])
    try:
        toml_lite.loads(text)
    except toml_lite.TomlError as exc:
        raise ctk.CommandError("unable to create config: failed to load config: %s" % exc)
    for item in values["sets"]:
        key, value = parse_set(item)
        text = toml_lite.set_value(text, key.split("."), value)
    if values["in_place"]:
        _write(values["config"], text)
    elif values["output"]:
        _write(values["output"], text)
    else:
        sys.stdout.write(text)
    return 0
