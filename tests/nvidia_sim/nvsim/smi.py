# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated ``nvidia-smi`` (test double): argument parsing and dispatch.

Output formats and exit codes follow the real tool (see the nvidia-smi man
page, RETURN VALUE): 0 ok, 2 invalid argument, 3 not supported on device,
6 not found, 9 driver not loaded, 18 driver/library version mismatch,
255 other error.
"""

import sys
import time

from nvsim import env

RC_OK = 0
RC_INVALID = 2
RC_NOT_SUPPORTED = 3
RC_NOT_FOUND = 6
RC_NO_DRIVER = 9
RC_MISMATCH = 18
RC_OTHER = 255

INVALID_COMBINATION = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n\n")

# key: (short forms, long forms, takes a value)
OPTIONS = {
    "help": (("-h",), ("--help",), False),
    "version": ((), ("--version",), False),
    "list": (("-L",), ("--list-gpus",), False),
    "query": (("-q",), ("--query",), False),
    "xml": (("-x",), ("--xml-format",), False),
    "display": (("-d",), ("--display",), True),
    "id": (("-i",), ("--id",), True),
    "format": ((), ("--format",), True),
    "query_gpu": ((), ("--query-gpu",), True),
    "query_apps": ((), ("--query-compute-apps",), True),
    "query_remapped": ((), ("--query-remapped-rows",), True),
    "query_clocks": ((), ("--query-supported-clocks",), True),
    "pm": (("-pm",), ("--persistence-mode",), True),
    "pl": (("-pl",), ("--power-limit",), True),
    "ac": (("-ac",), ("--applications-clocks",), True),
    "rac": (("-rac",), ("--reset-applications-clocks",), False),
    "compute_mode": (("-c",), ("--compute-mode",), True),
    "ecc": (("-e",), ("--ecc-config",), True),
    "mig": (("-mig",), ("--multi-instance-gpu",), True),
    "reset": (("-r",), ("--gpu-reset",), False),
}


class UsageError(Exception):
    pass


class Context(object):
    """What every sub-command needs: the profile, the driver and the GPUs."""

    def __init__(self, profile, driver_version, gpus):
        self.profile = profile
        self.driver_version = driver_version
        self.branch = int(env.driver_branch(driver_version))
        self.cuda_version = env.cuda_version(driver_version)
        self.gpus = gpus
        self.now = env.now()
        self.out = []

    def write(self, text):
        self.out.append(text)

    def timestamp(self):
        """``Tue Dec 30 09:49:57 2025`` (ctime form, as in -q and the summary)."""
        return time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(self.now))


def parse_options(argv, table):
    """Parse nvidia-smi style options (``-pm 1``, ``--id=0``, ``--id 0``)."""
    lookup = {}
    for key, (shorts, longs, takes_value) in table.items():
        for form in shorts + longs:
            lookup[form] = (key, takes_value)
    parsed = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        name, value = token, None
        if token.startswith("--") and "=" in token:
            name, value = token.split("=", 1)
        if name not in lookup:
            raise UsageError(token)
        key, takes_value = lookup[name]
        if takes_value and value is None:
            i += 1
            if i >= len(argv):
                raise UsageError(token)
            value = argv[i]
        elif not takes_value and value is not None:
            raise UsageError(token)
        parsed[key] = value if takes_value else True
        i += 1
    return parsed


def driver_problem(profile):
    """(rc, text) when nvidia-smi cannot talk to NVML, else None."""
    loaded = env.loaded_driver_version()
    if not profile.get("driver_loadable", True) or not loaded:
        return RC_NO_DRIVER, NO_DRIVER
    installed = env.installed_driver_version()
    if installed and installed != loaded:
        library = ".".join(installed.split(".")[:2])
        return RC_MISMATCH, ("Failed to initialize NVML: Driver/library version mismatch\n"
                             "NVML library version: %s\n" % library)
    return None


def build_context(need_gpus=True):
    from nvsim import profiles
    profile = env.load_profile()
    problem = driver_problem(profile)
    if problem:
        return None, problem
    ctx = Context(profile, env.loaded_driver_version(), profiles.gpus(profile))
    if need_gpus and not ctx.gpus:
        return None, (RC_NOT_FOUND, "No devices were found\n")
    return ctx, None


def select_gpus(ctx, id_option):
    from nvsim import profiles
    chosen = profiles.select(ctx.gpus, id_option)
    if not chosen:
        ctx.write("No devices were found\n")
        return None
    return chosen


def run(argv):
    if argv and argv[0] in ("topo", "nvlink", "mig"):
        command = argv[0]
        ctx, problem = build_context()
        if problem:
            return problem
        if command == "mig":
            from nvsim import smi_mig
            rc = smi_mig.main(ctx, argv[1:])
        else:
            from nvsim import smi_views
            rc = smi_views.topo(ctx, argv[1:]) if command == "topo" else smi_views.nvlink(ctx, argv[1:])
        return rc, "".join(ctx.out)

    try:
        opts = parse_options(argv, OPTIONS)
    except UsageError:
        return RC_INVALID, INVALID_COMBINATION
    if opts.get("help"):
        return RC_OK, USAGE
    ctx, problem = build_context()
    if problem:
        return problem
    rc = dispatch(ctx, opts)
    return rc, "".join(ctx.out)


SETTERS = ("pm", "pl", "ac", "rac", "compute_mode", "ecc", "mig", "reset")
QUERIES = ("query_gpu", "query_apps", "query_remapped", "query_clocks")


def dispatch(ctx, opts):
    if opts.get("version"):
        ctx.write("NVIDIA-SMI version  : %s\nNVML version        : %s\nDRIVER version      : %s\n"
                  "CUDA Version        : %s\n" % (ctx.driver_version, ".".join(ctx.driver_version.split(".")[:2]),
                                                  ctx.driver_version, ctx.cuda_version))
        return RC_OK
    setters = [key for key in SETTERS if key in opts]
    queries = [key for key in QUERIES if key in opts]
    modes = len(setters) + len(queries) + bool(opts.get("list")) + bool(opts.get("query"))
    if modes > 1 or (opts.get("xml") and not opts.get("query")) or ("display" in opts and not opts.get("query")):
        ctx.write(INVALID_COMBINATION)
        return RC_INVALID
    if queries and "format" not in opts:
        ctx.write(INVALID_COMBINATION)
        return RC_INVALID
    chosen = select_gpus(ctx, opts.get("id"))
    if chosen is None:
        return RC_NOT_FOUND
    if opts.get("list"):
        return list_gpus(ctx, chosen)
    if queries:
        from nvsim import smi_query
        return smi_query.run(ctx, chosen, queries[0], opts[queries[0]], opts["format"])
    if opts.get("query"):
        from nvsim import smi_report
        return smi_report.run(ctx, chosen, opts.get("xml"), opts.get("display"), opts.get("id") is not None)
    if setters:
        from nvsim import smi_set
        return smi_set.run(ctx, chosen, setters[0], opts.get(setters[0]))
    from nvsim import smi_views
    return smi_views.summary(ctx, chosen)


def list_gpus(ctx, chosen):
    from nvsim import profiles
    for gpu in chosen:
        ctx.write("GPU %d: %s (UUID: %s)\n" % (gpu.index, gpu.product_name, gpu.uuid))
        for device in profiles.mig_devices(gpu):
            ctx.write("  MIG %-10s Device %2d: (UUID: %s)\n" % (device["name"][4:], device["index"], device["uuid"]))
    return RC_OK


USAGE = """NVIDIA System Management Interface -- v{version} (nvidia-sim test double)

NVSMI provides monitoring information for Tesla and select Quadro devices.
The data is presented in either a plain text or an XML format, via stdout or a file.
NVSMI also provides several management operations for changing the device state.

    nvidia-smi [OPTION1 [ARG1]] [OPTION2 [ARG2]] ...

    -h,   --help                Print usage information and exit.
    -L,   --list-gpus           Display a list of GPUs connected to the system.
    -q,   --query               Display GPU or Unit info.
    -i,   --id=                 Target a specific GPU.
    -x,   --xml-format          Produce XML output.
    -d,   --display=            Display only selected information: MEMORY, UTILIZATION, ECC,
                                TEMPERATURE, POWER, CLOCK, COMPUTE, PIDS, PERFORMANCE,
                                SUPPORTED_CLOCKS, PAGE_RETIREMENT, ACCOUNTING, ROW_REMAPPER.
    --query-gpu=                Information about GPU (with --format=csv[,noheader][,nounits]).
    --query-supported-clocks=   List of supported clocks.
    --query-compute-apps=       List of currently active compute processes.
    --query-remapped-rows=      Information about remapped rows.
    -pm,  --persistence-mode=   Set persistence mode: 0/DISABLED, 1/ENABLED
    -e,   --ecc-config=         Toggle ECC support: 0/DISABLED, 1/ENABLED
    -c,   --compute-mode=       Set MODE for compute applications:
                                0/DEFAULT, 1/EXCLUSIVE_THREAD (DEPRECATED),
                                2/PROHIBITED, 3/EXCLUSIVE_PROCESS
    -r    --gpu-reset           Trigger reset of the GPU.
    -ac   --applications-clocks= Specifies <memory,graphics> clocks as a pair.
    -rac  --reset-applications-clocks Resets the applications clocks to the default values.
    -pl   --power-limit=        Specifies maximum power management limit in watts.
    -mig  --multi-instance-gpu= Enable or disable Multi Instance GPU: 0/DISABLED, 1/ENABLED
    topo                        Displays device/system topology. "nvidia-smi topo -h" for more information.
    nvlink                      Displays device nvlink information. "nvidia-smi nvlink -h" for more information.
    mig                         Provides controls for MIG management. "nvidia-smi mig -h" for more information.
""".replace("{version}", "sim")


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
