# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated ``nvidia-smi`` (test double): argument parsing and dispatch.

Order of checks, as the real 535 and 550 binaries show without a GPU
(tests/unit/simulator/test_oracle_real_nvidia_smi.py):

1. ``-h``/``--help`` (not after a sub-command) is answered without NVML;
   any other argument next to it is "not valid for this command" (exit 2).
2. Everything else needs NVML first: a missing library (exit 12), a driver
   that is not loaded (exit 9) or of another version (exit 18) wins over any
   argument error, even over an unknown option.
3. Then the arguments: every option of the real tool's ``-h`` list is known
   (per branch: ``--version`` exists from 550 on, the ``pci`` sub-command
   too); options the simulator does not implement stop it with a simulator
   error (exit 255, on stderr) instead of pretending to be unknown.
"""

import sys

from nvsim import env
from nvsim.smi.common import (
    ERR_DISPLAY_NEEDS_QUERY, ERR_DISPLAY_WITH_XML, ERR_FORMAT_MISSING, ERR_NOT_VALID, ERR_ONE_COMMAND,
    ERR_ONE_MODIFICATION, ERR_XML_NEEDS_QUERY, RC_INVALID, RC_NOT_FOUND, RC_OK, RC_OTHER, UsageError,
    build_context, parse_options, select_gpus,
)

HELP = ("-h", "--help")

# The real tool's options (its -h list): key -> (short forms, long forms,
# takes a value, first branch, simulated).  Branch 0: in every branch known.
OPTIONS = {
    "help": (("-h",), ("--help",), False, 0, True),
    "version": ((), ("--version",), False, 550, True),
    "list": (("-L",), ("--list-gpus",), False, 0, True),
    "list_excluded": (("-B",), ("--list-excluded-gpus",), False, 0, False),
    "query": (("-q",), ("--query",), False, 0, True),
    "unit": (("-u",), ("--unit",), False, 0, False),
    "id": (("-i",), ("--id",), True, 0, True),
    "filename": (("-f",), ("--filename",), True, 0, False),
    "loop": (("-l",), ("--loop",), True, 0, False),
    "loop_ms": (("-lms",), ("--loop-ms",), True, 0, False),
    "xml": (("-x",), ("--xml-format",), False, 0, True),
    "dtd": ((), ("--dtd",), False, 0, False),
    "display": (("-d",), ("--display",), True, 0, True),
    "debug": ((), ("--debug",), True, 0, False),
    "query_gpu": ((), ("--query-gpu",), True, 0, True),
    "query_clocks": ((), ("--query-supported-clocks",), True, 0, True),
    "query_apps": ((), ("--query-compute-apps",), True, 0, True),
    "query_accounted": ((), ("--query-accounted-apps",), True, 0, False),
    "query_retired": ((), ("--query-retired-pages",), True, 0, False),
    "query_remapped": ((), ("--query-remapped-rows",), True, 0, True),
    "help_query_gpu": ((), ("--help-query-gpu",), False, 0, False),
    "help_query_clocks": ((), ("--help-query-supported-clocks",), False, 0, False),
    "help_query_apps": ((), ("--help-query-compute-apps",), False, 0, False),
    "help_query_accounted": ((), ("--help-query-accounted-apps",), False, 0, False),
    "help_query_retired": ((), ("--help-query-retired-pages",), False, 0, False),
    "help_query_remapped": ((), ("--help-query-remapped-rows",), False, 0, False),
    "format": ((), ("--format",), True, 0, True),
    "pm": (("-pm",), ("--persistence-mode",), True, 0, True),
    "ecc": (("-e",), ("--ecc-config",), True, 0, True),
    "reset_ecc": (("-p",), ("--reset-ecc-errors",), True, 0, False),
    "compute_mode": (("-c",), ("--compute-mode",), True, 0, True),
    "gom": ((), ("--gom",), True, 0, False),
    "reset": (("-r",), ("--gpu-reset",), False, 0, True),
    "virt_mode": (("-vm",), ("--virt-mode",), True, 0, False),
    "lgc": (("-lgc",), ("--lock-gpu-clocks",), True, 0, False),
    "mode": (("-m",), ("--mode",), True, 0, False),
    "rgc": (("-rgc",), ("--reset-gpu-clocks",), False, 0, False),
    "lmc": (("-lmc",), ("--lock-memory-clocks",), True, 0, False),
    "rmc": (("-rmc",), ("--reset-memory-clocks",), False, 0, False),
    "lmcd": (("-lmcd",), ("--lock-memory-clocks-deferred",), True, 0, False),
    "rmcd": (("-rmcd",), ("--reset-memory-clocks-deferred",), False, 0, False),
    "ac": (("-ac",), ("--applications-clocks",), True, 0, True),
    "rac": (("-rac",), ("--reset-applications-clocks",), False, 0, True),
    "pl": (("-pl",), ("--power-limit",), True, 0, True),
    "scope": (("-sc",), ("--scope",), True, 0, False),
    "cuda_clocks": (("-cc",), ("--cuda-clocks",), True, 0, False),
    "accounting": (("-am",), ("--accounting-mode",), True, 0, False),
    "clear_accounted": (("-caa",), ("--clear-accounted-apps",), False, 0, False),
    "auto_boost_default": ((), ("--auto-boost-default",), True, 0, False),
    "auto_boost_permission": ((), ("--auto-boost-permission",), True, 0, False),
    "mig": (("-mig",), ("--multi-instance-gpu",), True, 0, True),
    "target_temp": (("-gtt",), ("--gpu-target-temp",), True, 0, False),
    "error_on_warning": (("-eow",), ("--error-on-warning",), False, 0, False),
    "toggle_led": (("-t",), ("--toggle-led",), True, 0, False),
}

# Sub-commands of the -h list: name -> (first branch, simulated).
SUBCOMMANDS = {
    "topo": (0, True), "nvlink": (0, True), "mig": (0, True),
    "base-clocks": (0, False), "boost-slider": (0, False), "c2c": (0, False), "clocks": (0, False),
    "compute-policy": (0, False), "conf-compute": (0, False), "daemon": (0, False), "dmon": (0, False),
    "drain": (0, False), "encodersessions": (0, False), "fbcsessions": (0, False), "gpm": (0, False),
    "pmon": (0, False), "power-hint": (0, False), "replay": (0, False), "vgpu": (0, False),
    "pci": (550, False),
}

SETTERS = ("pm", "pl", "ac", "rac", "compute_mode", "ecc", "mig", "reset")
QUERIES = ("query_gpu", "query_apps", "query_remapped", "query_clocks")
COMMANDS = ("list", "query", "version") + QUERIES


def options_for(branch):
    """The option table of a driver branch, in parse_options' form."""
    return {key: (shorts, longs, takes) for key, (shorts, longs, takes, since, _sim) in OPTIONS.items()
            if branch >= since}


def subcommand_of(argv, branch=None):
    """The sub-command argv starts with (any branch when branch is None), else None."""
    if not argv or argv[0] not in SUBCOMMANDS:
        return None
    return argv[0] if branch is None or branch >= SUBCOMMANDS[argv[0]][0] else None


def help_request(argv):
    """(rc, text) for a top-level -h/--help, answered without NVML; else None."""
    if subcommand_of(argv) or not any(arg in HELP for arg in argv):
        return None
    others = [arg for arg in argv if arg not in HELP]
    if others:
        return RC_INVALID, ERR_NOT_VALID % others[0]
    return RC_OK, usage()


def _not_simulated(what):
    raise env.SimError("nvidia-sim: %s exists in the real nvidia-smi but is not simulated" % what)


def run(argv):
    answer = help_request(argv)
    if answer:
        return answer
    ctx, problem = build_context()
    if problem:
        return problem
    command = subcommand_of(argv, ctx.branch)
    if command:
        if not SUBCOMMANDS[command][1]:
            _not_simulated("the sub-command '%s'" % command)
        rc = _subcommand(ctx, command, argv[1:])
        return rc, "".join(ctx.out)
    try:
        opts = parse_options(argv, options_for(ctx.branch))
        for key in opts:
            if not OPTIONS[key][4]:
                _not_simulated("the option %s" % (OPTIONS[key][1] or OPTIONS[key][0])[0])
        _check_combination(opts)
    except UsageError as exc:
        return exc.rc, exc.message
    rc = dispatch(ctx, opts)
    if ctx.handle_rc is not None and rc == RC_OK:
        rc = ctx.handle_rc
    return rc, "".join(ctx.out)


def _subcommand(ctx, command, argv):
    if command == "mig":
        from nvsim.smi import mig
        return mig.main(ctx, argv)
    from nvsim.smi import views
    return views.topo(ctx, argv) if command == "topo" else views.nvlink(ctx, argv)


def _check_combination(opts):
    """The real tool's refusals of option combinations (raises UsageError)."""
    setters = [key for key in SETTERS if key in opts]
    commands = [key for key in COMMANDS if key in opts]
    if len(setters) > 1:
        raise UsageError(ERR_ONE_MODIFICATION)
    if len(commands) + bool(setters) > 1:
        raise UsageError(ERR_ONE_COMMAND)
    if opts.get("xml") and not opts.get("query"):
        raise UsageError(ERR_XML_NEEDS_QUERY)
    if "display" in opts and not opts.get("query"):
        raise UsageError(ERR_DISPLAY_NEEDS_QUERY)
    if "display" in opts and opts.get("xml"):
        raise UsageError(ERR_DISPLAY_WITH_XML)
    if any(key in opts for key in QUERIES) and "format" not in opts:
        raise UsageError(ERR_FORMAT_MISSING)


def dispatch(ctx, opts):
    if opts.get("version"):
        ctx.write("NVIDIA-SMI version  : %s\nNVML version        : %s\nDRIVER version      : %s\n"
                  "CUDA Version        : %s\n" % (ctx.driver_version, ".".join(ctx.driver_version.split(".")[:2]),
                                                  ctx.driver_version, ctx.cuda_version))
        return RC_OK
    chosen = select_gpus(ctx, opts.get("id"))
    if chosen is None:
        return RC_NOT_FOUND
    if opts.get("list"):
        return list_gpus(ctx, chosen)
    queries = [key for key in QUERIES if key in opts]
    if queries:
        from nvsim.smi import query
        return query.run(ctx, chosen, queries[0], opts[queries[0]], opts["format"])
    if opts.get("query"):
        from nvsim.smi import report
        return report.run(ctx, chosen, opts.get("xml"), opts.get("display"), opts.get("id") is not None)
    setters = [key for key in SETTERS if key in opts]
    if setters:
        from nvsim.smi import setters as setter
        return setter.run(ctx, chosen, setters[0], opts.get(setters[0]))
    from nvsim.smi import views
    return views.summary(ctx, chosen)


def list_gpus(ctx, chosen):
    from nvsim import profiles
    for gpu in chosen:
        ctx.write("GPU %d: %s (UUID: %s)\n" % (gpu.index, gpu.product_name, gpu.uuid))
        for device in profiles.mig_devices(gpu):
            # The profile name is padded to 16 columns ("MIG 1g.10gb     Device  0:").
            ctx.write("  %-16sDevice %2d: (UUID: %s)\n" % (device["name"], device["index"], device["uuid"]))
    return RC_OK


def usage():
    """The simulator's -h: the real tool's layout, reduced to what is simulated."""
    version = env.installed_driver_version()
    branch = int(env.driver_branch(version)) if version and version.split(".")[0].isdigit() else 0
    lines = ["NVIDIA System Management Interface -- v%s (nvidia-sim test double)" % (version or "sim"), "",
             "Options the simulator implements (every other option of the real tool is known and refused",
             "with a simulator error):", ""]
    for shorts, longs, takes, since, simulated in OPTIONS.values():
        if simulated and (branch == 0 or branch >= since):
            forms = ", ".join(shorts + tuple(form + ("=" if takes else "") for form in longs))
            lines.append("    " + forms)
    lines += ["", "Sub-commands: %s" % ", ".join(sorted(name for name, (_s, sim) in SUBCOMMANDS.items() if sim)), ""]
    return "\n".join(lines)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    env.log_call("nvidia-smi", argv)
    try:
        rc, text = run(argv)
    except env.SimError as exc:
        sys.stderr.write("%s\n" % exc)
        return RC_OTHER
    sys.stdout.write(text)
    sys.stdout.flush()
    return rc
