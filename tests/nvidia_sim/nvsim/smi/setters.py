# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Setters of the simulated nvidia-smi: -pm, -pl, -ac, -rac, -c, -e, -mig, -r.

Every setter writes state.json only when the value changes, so repeating a
call is a no-op state-wise (the printed text is what the real tool prints).
Arguments are validated for all selected GPUs before anything changes,
followed by "Terminating early due to previous errors." on failure.
"""

from nvsim import env
from nvsim.smi.common import ERR_INVALID_INPUT, RC_INVALID, RC_NOT_SUPPORTED, RC_OK, RC_OTHER

# Refused values (formats of the real binaries): a number out of range names
# itself, anything else is "Invalid input arguments".
INVALID_VALUE = {
    "pm": "Invalid persistence mode: %s\n", "compute_mode": "Invalid compute mode: %s\n",
    "ecc": "Invalid ECC configuration code: %s\n", "mig": "Invalid MIG Mode: %s\n",
}
BAD_CLOCKS = ('Specified clocks "%s" are not valid. Please format input as memClk,smClk '
              'e.g. --applications-clocks=2000,300\n')


def _refuse(ctx, key, value):
    value = (value or "").strip()
    if key in INVALID_VALUE and value.isdigit():
        ctx.write(INVALID_VALUE[key] % int(value))
    else:
        ctx.write(ERR_INVALID_INPUT)
    return RC_INVALID


TERMINATE = "Terminating early due to previous errors.\n"
ALL_DONE = "All done.\n"
WARNING_ONLY = "Treating as warning and moving on.\n"

COMPUTE_MODE_NAMES = {
    "0": "DEFAULT", "DEFAULT": "DEFAULT",
    "1": "EXCLUSIVE_THREAD", "EXCLUSIVE_THREAD": "EXCLUSIVE_THREAD",
    "2": "PROHIBITED", "PROHIBITED": "PROHIBITED",
    "3": "EXCLUSIVE_PROCESS", "EXCLUSIVE_PROCESS": "EXCLUSIVE_PROCESS",
}
COMPUTE_MODE_STATE = {"DEFAULT": "Default", "EXCLUSIVE_THREAD": "Exclusive_Thread",
                      "PROHIBITED": "Prohibited", "EXCLUSIVE_PROCESS": "Exclusive_Process"}


def _flag(value):
    value = (value or "").strip().upper()
    if value in ("1", "ENABLED"):
        return True
    if value in ("0", "DISABLED"):
        return False
    return None


def _store(changes):
    """changes: {index: {key: value or None (= delete)}}; writes only real changes."""
    def apply(state):
        for index, values in changes.items():
            gpu = state["gpus"].setdefault(str(index), {})
            for key, value in values.items():
                if value is None:
                    gpu.pop(key, None)
                else:
                    gpu[key] = value
    if changes:
        env.update_state(apply)


def set_persistence(ctx, chosen, value):
    wanted = _flag(value)
    if wanted is None:
        return _refuse(ctx, "pm", value)
    changes = {}
    word = "Legacy persistence mode" if ctx.branch >= 580 else "persistence mode"
    for gpu in chosen:
        if gpu.persistence == wanted:
            state = "Enabled" if wanted else "Disabled"
            ctx.write("Persistence mode is already %s for GPU %s.\n" % (state, gpu.bus_id))
            continue
        changes[gpu.index] = {"persistence_mode": wanted}
        ctx.write("%s %s for GPU %s.\n" % ("Enabled" if wanted else "Disabled", word, gpu.bus_id))
    _store(changes)
    ctx.write(ALL_DONE)
    return RC_OK


def set_power_limit(ctx, chosen, value):
    try:
        watts = float(value)
    except (TypeError, ValueError):
        return _refuse(ctx, "pl", value)
    for gpu in chosen:
        power = gpu.power
        if not power["min_w"] <= watts <= power["max_w"]:
            ctx.write("Provided power limit %.2f W is not a valid power limit which should be between "
                      "%.2f W and %.2f W for GPU %s\n" % (watts, power["min_w"], power["max_w"], gpu.bus_id))
            ctx.write(TERMINATE)
            return RC_INVALID
    changes = {}
    for gpu in chosen:
        previous = gpu.power_limit
        ctx.write("Power limit for GPU %s was set to %.2f W from %.2f W.\n" % (gpu.bus_id, watts, previous))
        if watts != previous:
            changes[gpu.index] = {"power_limit": None if watts == gpu.power["default_w"] else watts}
    _store(changes)
    ctx.write(ALL_DONE)
    return RC_OK


def set_app_clocks(ctx, chosen, value):
    try:
        memory, graphics = [int(part) for part in value.split(",")]
    except (AttributeError, ValueError):
        ctx.write(BAD_CLOCKS % value)
        return RC_INVALID
    for gpu in chosen:
        if (memory, graphics) not in gpu.supported_clock_pairs():
            ctx.write('Specified clock combination "(MEM %d, SM %d)" is not supported for GPU %s. '
                      "Run 'nvidia-smi -q -d SUPPORTED_CLOCKS' to see list of supported clock combinations\n"
                      % (memory, graphics, gpu.bus_id))
            ctx.write(TERMINATE)
            return RC_INVALID
    changes = {}
    for gpu in chosen:
        ctx.write('Applications clocks set to "(MEM %d, SM %d)" for GPU %s\n' % (memory, graphics, gpu.bus_id))
        default = (gpu.clocks["default_app_memory"], gpu.clocks["default_app_graphics"])
        stored = None if (memory, graphics) == default else [memory, graphics]
        if gpu.settings.get("app_clocks") != stored:
            changes[gpu.index] = {"app_clocks": stored}
    _store(changes)
    ctx.write(ALL_DONE)
    return RC_OK


def reset_app_clocks(ctx, chosen, _value):
    _store({gpu.index: {"app_clocks": None} for gpu in chosen if gpu.settings.get("app_clocks")})
    ctx.write(ALL_DONE)
    return RC_OK


def set_compute_mode(ctx, chosen, value):
    name = COMPUTE_MODE_NAMES.get((value or "").strip().upper())
    if name is None:
        return _refuse(ctx, "compute_mode", value)
    if name == "EXCLUSIVE_THREAD":
        for gpu in chosen:
            ctx.write("Unable to set the compute mode for GPU %s: Not Supported\n" % gpu.bus_id)
        ctx.write(WARNING_ONLY + ALL_DONE)
        return RC_NOT_SUPPORTED
    changes = {}
    for gpu in chosen:
        ctx.write("Set compute mode to %s for GPU %s.\n" % (name, gpu.bus_id))
        wanted = COMPUTE_MODE_STATE[name]
        if gpu.compute_mode != wanted:
            changes[gpu.index] = {"compute_mode": None if wanted == "Default" else wanted}
    _store(changes)
    ctx.write(ALL_DONE)
    return RC_OK


def set_ecc(ctx, chosen, value):
    wanted = _flag(value)
    if wanted is None:
        return _refuse(ctx, "ecc", value)
    rc = RC_OK
    changes = {}
    reboot = False
    word = "Enabled" if wanted else "Disabled"
    for gpu in chosen:
        if not gpu.ecc_supported:
            ctx.write("Unable to set the ECC mode for GPU %s: Not Supported\n%s" % (gpu.bus_id, WARNING_ONLY))
            rc = RC_NOT_SUPPORTED
            continue
        if gpu.ecc_current == wanted and gpu.ecc_pending == wanted:
            ctx.write("ECC support is already %s for GPU %s.\n" % (word, gpu.bus_id))
            continue
        ctx.write("%s ECC support for GPU %s.\n" % (word, gpu.bus_id))
        reboot = reboot or gpu.ecc_current != wanted
        if gpu.ecc_pending != wanted:
            # Pending equal to current is no pending change at all.
            changes[gpu.index] = {"ecc_pending": None if gpu.ecc_current == wanted else wanted}
    _store(changes)
    ctx.write(ALL_DONE)
    if reboot:
        ctx.write("Reboot required.\n")
    return rc


def set_mig(ctx, chosen, value):
    wanted = _flag(value)
    if wanted is None:
        return _refuse(ctx, "mig", value)
    rc = RC_OK
    changes = {}
    verb = "enable" if wanted else "disable"
    for gpu in chosen:
        if not gpu.mig_capable:
            ctx.write("Unable to %s MIG Mode for GPU %s: Not Supported\n%s" % (verb, gpu.bus_id, WARNING_ONLY))
            rc = RC_NOT_SUPPORTED
            continue
        if not wanted and gpu.gpu_instances:
            ctx.write("Unable to disable MIG Mode for GPU %s: In use by another client\n%s"
                      % (gpu.bus_id, WARNING_ONLY))
            rc = RC_OTHER
            continue
        if gpu.processes and gpu.mig_current != wanted:
            # The mode only takes effect at the next GPU reset; busy GPUs cannot be reset now.
            ctx.write("Warning: MIG mode is in pending %s state for GPU %s:In use by another client\n"
                      "%s is currently being used by one or more other processes (e.g. CUDA application or "
                      "a monitoring application such as another instance of nvidia-smi). Please first kill all "
                      "processes using the device and retry the command or reboot the system to make MIG mode "
                      "effective.\n" % (verb, gpu.bus_id, gpu.bus_id))
            if gpu.mig_pending != wanted:
                changes[gpu.index] = {"mig_pending": wanted}
            continue
        ctx.write("%s MIG Mode for GPU %s\n" % ("Enabled" if wanted else "Disabled", gpu.bus_id))
        if gpu.mig_current != wanted or gpu.mig_pending != wanted:
            changes[gpu.index] = {"mig_current": wanted, "mig_pending": None, "gpu_instances": None}
        if wanted and not gpu.persistence:
            ctx.write("\nWarning: persistence mode is disabled on device %s. See the Known Issues section of "
                      "the nvidia-smi(1) man page for more information. Run with [--help | -h] switch to get "
                      "more information on how to enable persistence mode.\n" % gpu.bus_id)
    _store(changes)
    ctx.write(ALL_DONE)
    return rc


def reset(ctx, chosen, _value):
    busy = [gpu for gpu in chosen if gpu.processes]
    if busy:
        ctx.write("Unable to reset this GPU because it's being used by some other process (e.g. CUDA "
                  "application, graphics application like X server, monitoring application like other "
                  "instance of nvidia-smi). Please first kill all processes using this GPU and all compute "
                  "applications running in the system (even when they are running on other GPUs) and then "
                  "try to reset the GPU again.\n")
        ctx.write(TERMINATE)
        return RC_OTHER

    indexes = [str(gpu.index) for gpu in chosen]

    def apply(state):
        for index in indexes:
            env.apply_pending_modes(state["gpus"].setdefault(index, {}))
    env.update_state(apply)
    for gpu in chosen:
        ctx.write("GPU %s was successfully reset.\n" % gpu.bus_id)
    ctx.write(ALL_DONE)
    return RC_OK


HANDLERS = {
    "pm": set_persistence, "pl": set_power_limit, "ac": set_app_clocks, "rac": reset_app_clocks,
    "compute_mode": set_compute_mode, "ecc": set_ecc, "mig": set_mig, "reset": reset,
}


def run(ctx, chosen, key, value):
    return HANDLERS[key](ctx, chosen, value)
