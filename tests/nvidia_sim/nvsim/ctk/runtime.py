# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-ctk runtime configure`` of the simulated toolkit (test double).

docker: ``runtimes.nvidia`` (and ``default-runtime`` with ``--set-as-default``,
``features.cdi`` with ``--cdi.enabled``) merged into daemon.json, every
other key kept, written as Go's indented JSON.
containerd: from toolkit 1.18 the runtime goes to the drop-in
``/etc/containerd/conf.d/99-nvidia.toml`` and ``config.toml`` only gains the
import of ``/etc/containerd/conf.d/*.toml`` (the file is otherwise left as
it is); before 1.18, and for version-1 configs, config.toml is rewritten
with the runtime added.
crio: from 1.18 the drop-in ``/etc/crio/conf.d/99-nvidia.toml``, before that
``/etc/crio/crio.conf`` rewritten.
Runtime options are copied from the existing default/runc/crun runtime, as
the real tool does, so cgroup settings carry over.
"""

import copy
import json
import os
import subprocess
import sys

from nvsim import env
from nvsim import gpus as gpu_info
from nvsim import toml_lite
from nvsim.ctk import common as ctk

DEFAULTS = env.CTK_RUNTIME_CONFIGS
RUNTIME_SPECIFIC_DEFAULT = "RUNTIME_SPECIFIC_DEFAULT"
CRI_PLUGIN = {1: "cri", 2: "io.containerd.grpc.v1.cri"}
CRI_PLUGIN_V3 = "io.containerd.cri.v1.runtime"

FLAGS = {
    "--dry-run": ("dry_run", "bool", False),
    "--runtime": ("runtime", "str", "docker"),
    "--config": ("config", "str", ""),
    "--drop-in-config": ("drop_in", "str", RUNTIME_SPECIFIC_DEFAULT),
    "--executable-path": ("executable", "str", ""),
    "--config-mode": ("mode", "str", ""),
    "--config-source": ("source", "str", "file"),
    "--oci-hook-path": ("hook_file", "str", ""),
    "--nvidia-runtime-name": ("name", "str", "nvidia"),
    "--nvidia-runtime-path": ("path", "str", "nvidia-container-runtime"),
    "--runtime-path": ("path", "str", "nvidia-container-runtime"),
    "--nvidia-runtime-hook-path": ("hook_path", "str", "/usr/bin/nvidia-container-runtime-hook"),
    "--nvidia-set-as-default": ("set_default", "bool", False),
    "--set-as-default": ("set_default", "bool", False),
    "--cdi.enabled": ("cdi", "bool", False),
    "--cdi.enable": ("cdi", "bool", False),
    "--enable-cdi": ("cdi", "bool", False),
}


def run(args, logger):
    if not args or args[0] != "configure":
        raise ctk.UsageError("No help topic for '%s'" % (args[0] if args else ""))
    values, positional = ctk.parse_flags(args[1:], FLAGS)
    if positional:
        raise ctk.UsageError("unexpected argument %s" % positional[0])
    return configure(values, logger)


def _validate(values, logger):
    runtime = values["runtime"]
    if runtime not in DEFAULTS:
        raise ctk.CommandError("unrecognized runtime '%s'" % runtime)
    if values["mode"] not in ("", "config-file", "config"):
        logger.warning('Ignoring unsupported config mode for %s: "%s"' % (runtime, values["mode"]))
    if runtime in ("containerd", "crio"):
        if values["path"] == "nvidia-container-runtime":
            values["path"] = "/usr/bin/nvidia-container-runtime"
        if not os.path.isabs(values["path"]):
            raise ctk.CommandError('the NVIDIA runtime path "%s" is not an absolute path' % values["path"])
    if runtime == "crio" and values["cdi"]:
        logger.warning("Ignoring cdi.enabled flag for %s" % runtime)
        values["cdi"] = False
    if values["source"] not in ("file", "command"):
        raise ctk.CommandError("unrecognized Config Source: %s" % values["source"])
    if values["source"] == "command" and runtime == "docker":
        logger.warning("A command Config Source is not supported for docker; using file")
        values["source"] = "file"
    if not values["config"]:
        values["config"] = DEFAULTS[runtime][0]
    if values["drop_in"] == RUNTIME_SPECIFIC_DEFAULT:
        # Drop-in files arrived with toolkit 1.18; older releases edit the main file.
        values["drop_in"] = DEFAULTS[runtime][1] if ctk.version_tuple() >= (1, 18, 0) else ""
    if values["drop_in"] and runtime == "docker":
        raise ctk.CommandError("runtime docker does not support drop-in configs")
    if values["drop_in"] and not os.path.isabs(values["drop_in"]):
        raise ctk.CommandError('the drop-in-config path "%s" is not an absolute path' % values["drop_in"])


def configure(values, logger):
    _validate(values, logger)
    runtime = values["runtime"]
    if runtime == "docker":
        output_path, written = _docker(values, logger)
    elif runtime == "containerd":
        output_path, written = _containerd(values, logger)
    else:
        output_path, written = _crio(values, logger)
    if output_path:
        if written == 0:
            logger.info("Removed empty config from %s" % output_path)
        else:
            logger.info("Wrote updated config to %s" % output_path)
        logger.info("It is recommended that %s daemon be restarted." % runtime)
    return 0


def _write(path, text, dry_run):
    """Write a file below the sim root; with dry_run print it instead. Returns bytes written."""
    if dry_run:
        sys.stdout.write(text + ("" if text.endswith("\n") else "\n"))
        return 0
    target = gpu_info.resolve(path)
    if not text:
        try:
            os.unlink(target)
        except OSError:
            pass
        return 0
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    with open(target, "w") as handle:
        handle.write(text)
    return len(text.encode("utf-8"))


# --- docker ---------------------------------------------------------------------

def _go_json(data):
    # Go's json.MarshalIndent: sorted keys, 4 spaces, HTML characters escaped.
    text = json.dumps(data, indent=4, sort_keys=True, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _docker(values, logger):
    path = values["config"]
    target = gpu_info.resolve(path)
    config = {}
    logger.info("Loading docker config from %s" % path)
    if os.path.isdir(target):
        raise ctk.CommandError("unable to load config for runtime docker: config file is a directory")
    if os.path.exists(target):
        with open(target) as handle:
            text = handle.read()
        try:
            config = json.loads(text) if text.strip() else None
        except ValueError as exc:
            raise ctk.CommandError("unable to load config for runtime docker: %s" % exc)
        if config is None:
            # Go's JSON decoder reports an empty file as a bare EOF.
            raise ctk.CommandError("unable to load config for runtime docker: EOF")
        if not isinstance(config, dict):
            raise ctk.CommandError("unable to load config for runtime docker: json: cannot unmarshal %s "
                                   "into Go value of type docker.Config" % type(config).__name__)
        logger.info("Successfully loaded config")
    else:
        logger.info("Config file does not exist, creating new one")
    runtimes = config.get("runtimes") if isinstance(config.get("runtimes"), dict) else {}
    runtimes[values["name"]] = {"args": [], "path": values["path"]}
    config["runtimes"] = runtimes
    if values["set_default"]:
        config["default-runtime"] = values["name"]
    if values["cdi"]:
        features = config.get("features") if isinstance(config.get("features"), dict) else {}
        features["cdi"] = True
        config["features"] = features
    written = _write(path, _go_json(config), values["dry_run"])
    return ("" if values["dry_run"] else path), written


# --- containerd --------------------------------------------------------------------

def _load_toml(values, runtime, logger):
    if values["source"] == "command":
        executable = values["executable"] or runtime
        command = [executable, "config", "dump"] if runtime == "containerd" else [executable, "status", "config"]
        try:
            text = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True,
                                  universal_newlines=True).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            raise ctk.CommandError("unable to load config for runtime %s: failed to load config: failed to "
                                   "run command %s: %s" % (runtime, " ".join(command), exc))
        try:
            return toml_lite.loads(text), None
        except toml_lite.TomlError as exc:
            raise ctk.CommandError("unable to load config for runtime %s: %s" % (runtime, exc))
    path = values["config"]
    target = gpu_info.resolve(path)
    if os.path.isdir(target):
        raise ctk.CommandError("unable to load config for runtime %s: failed to load config: config file %s "
                               "is a directory" % (runtime, path))
    if not os.path.exists(target):
        return {}, ""
    with open(target) as handle:
        text = handle.read()
    try:
        return toml_lite.loads(text), text
    except toml_lite.TomlError as exc:
        raise ctk.CommandError("unable to load config for runtime %s: failed to load config: %s"
                               % (runtime, exc))


def _get(tree, path):
    node = tree
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set(tree, path, value):
    node = tree
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def _low_level_runtimes(default_runtime, name):
    runtimes = []
    if default_runtime and default_runtime != name:
        runtimes.append(default_runtime)
    for candidate in ("docker-runc", "runc", "crun"):
        if candidate not in runtimes:
            runtimes.append(candidate)
    return runtimes


def _add_containerd_runtime(base, target, version, values, logger):
    plugin = CRI_PLUGIN.get(version, CRI_PLUGIN_V3)
    runtimes_path = ["plugins", plugin, "containerd", "runtimes"]
    default_runtime = _get(base, ["plugins", plugin, "containerd", "default_runtime_name"])
    candidates = _low_level_runtimes(default_runtime, values["name"])
    _set(target, ["version"], version)
    for candidate in candidates:
        options = _get(base, runtimes_path + [candidate])
        if isinstance(options, dict):
            logger.debug("using options from runtime %s" % candidate)
            _set(target, runtimes_path + [values["name"]], copy.deepcopy(options))
            break
    else:
        logger.warning("could not infer options from runtimes [%s]; using defaults" % " ".join(candidates))
        _set(target, runtimes_path + [values["name"]], {
            "runtime_type": "io.containerd.runc.v2", "runtime_root": "", "runtime_engine": "",
            "privileged_without_host_devices": False})
    _set(target, runtimes_path + [values["name"], "options", "BinaryName"], values["path"])
    if values["set_default"]:
        _set(target, ["plugins", plugin, "containerd", "default_runtime_name"], values["name"])
    if values["cdi"]:
        _set(target, ["plugins", plugin, "enable_cdi"], True)


def _containerd(values, logger):
    base, _text = _load_toml(values, "containerd", logger)
    if not base:
        version = 2
    else:
        version = base.get("version", 1)
        if not isinstance(version, int):
            raise ctk.CommandError("unable to load config for runtime containerd: failed to parse config "
                                   "version: unsupported type for version field: %s" % version)
    logger.info("Using config version %d" % version)
    logger.info('Using CRI runtime plugin name "%s"' % CRI_PLUGIN.get(version, CRI_PLUGIN_V3))
    drop_in = values["drop_in"] if version != 1 else ""
    if drop_in:
        nv_config = {}
        _add_containerd_runtime(base, nv_config, version, values, logger)
        written = _write(drop_in, toml_lite.dumps(nv_config), values["dry_run"])
        if not values["dry_run"] and written:
            _ensure_import(values["config"], version, drop_in)
        return ("" if values["dry_run"] else drop_in), written
    config = copy.deepcopy(base)
    _add_containerd_runtime(base, config, version, values, logger)
    written = _write(values["config"], toml_lite.dumps(config), values["dry_run"])
    return ("" if values["dry_run"] else values["config"]), written


def _ensure_import(config_path, version, drop_in):
    """Make config.toml import the drop-in directory, changing nothing else in it."""
    pattern = os.path.dirname(drop_in) + "/*.toml"
    target = gpu_info.resolve(config_path)
    try:
        with open(target) as handle:
            text = handle.read()
    except (IOError, OSError):
        text = ""
    current = toml_lite.loads(text) if text.strip() else {}
    imports = current.get("imports") or []
    if pattern in imports:
        return
    if not current:
        new_text = toml_lite.dumps({"imports": [pattern], "version": version})
    else:
        new_text = toml_lite.set_top_level(text, "imports", list(imports) + [pattern], after="version")
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    with open(target, "w") as handle:
        handle.write(new_text)


# --- cri-o --------------------------------------------------------------------------

def _crio(values, logger):
    base, _text = _load_toml(values, "crio", logger)
    runtimes_path = ["crio", "runtime", "runtimes"]
    default_runtime = _get(base, ["crio", "runtime", "default_runtime"])
    target = {} if values["drop_in"] else copy.deepcopy(base)
    for candidate in _low_level_runtimes(default_runtime, values["name"]):
        options = _get(base, runtimes_path + [candidate])
        if isinstance(options, dict):
            logger.debug("using options from runtime %s" % candidate)
            _set(target, runtimes_path + [values["name"]], copy.deepcopy(options))
            break
    _set(target, runtimes_path + [values["name"], "runtime_path"], values["path"])
    _set(target, runtimes_path + [values["name"], "runtime_type"], "oci")
    if values["set_default"]:
        _set(target, ["crio", "runtime", "default_runtime"], values["name"])
    output = values["drop_in"] or values["config"]
    written = _write(output, toml_lite.dumps(target), values["dry_run"])
    return ("" if values["dry_run"] else output), written
