# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every part of the simulated ``nvidia-smi`` shares (test double).

Exit codes follow the real tool (man page, RETURN VALUE): 0 ok, 2 invalid
argument, 3 not supported on device, 6 not found, 9 driver not loaded, 12
NVML shared library not found, 15 GPU is lost, 18 driver/library version
mismatch, 255 other error.

Every message below is one the real binaries print: the failure texts were
captured from the real 535 and 550 ``nvidia-smi`` without a GPU
(tests/unit/simulator/test_oracle_real_nvidia_smi.py), the usage errors are
format strings of those binaries (the same test checks that each one the
simulator prints is there).
"""

import time

from nvsim import env

RC_OK = 0
RC_INVALID = 2
RC_NOT_SUPPORTED = 3
RC_NOT_FOUND = 6
RC_NO_DRIVER = 9
RC_NO_NVML = 12
RC_GPU_LOST = 15
RC_MISMATCH = 18
RC_OTHER = 255

NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n\n")
NO_NVML = ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA "
           "Display Driver is properly installed and present in your system.\n"
           "Please also try adding directory that contains libnvidia-ml.so to your system PATH.\n")
SMI_NVML_MISMATCH = ("Mismatch in versions between nvidia-smi and NVML.\n"
                     "Are you sure you are using nvidia-smi provided with the driver?\n")
NO_DEVICES = "No devices were found\n"

# Usage errors (printf formats of the real binary; "\n\n" as the -h check prints them).
ERR_NOT_VALID = "ERROR: Option %s is not valid for this command. Please run 'nvidia-smi -h' for help.\n\n"
ERR_NOT_RECOGNIZED = "ERROR: Option %s is not recognized. Please run 'nvidia-smi -h' for help.\n\n"
ERR_MISSING_VALUE = "ERROR: Option %s is missing its value. Please run 'nvidia-smi -h' for help.\n\n"
ERR_ONE_COMMAND = "ERROR: Only one command can be run at a time. Please run 'nvidia-smi -h' for help.\n\n"
ERR_ONE_MODIFICATION = "Invalid combination of input arguments. Only one device modification may be done at a time.\n"
ERR_XML_NEEDS_QUERY = ("Invalid combination of input arguments. Specify -q/--query and -x/--xml-format to run an "
                       "XML query.  Please run 'nvidia-smi -h' for help.\n")
ERR_DISPLAY_NEEDS_QUERY = ("Invalid combination of input arguments. Specify -q/--query and -d/--display to run a "
                           "filtered query.  Please run 'nvidia-smi -h' for help.\n")
ERR_DISPLAY_WITH_XML = ("Invalid combination of input arguments: --display/-d flags can not be combined with "
                        "-x/--xml-format flags.\n")
ERR_FORMAT_MISSING = "\"--format=\" switch is missing. Please run 'nvidia-smi -h' for help.\n"
ERR_FORMAT_CSV = "Format modifier --format=csv is mandatory.\n"
ERR_FORMAT_MODIFIER = "Format modifier is not recognized.\n"
ERR_INVALID_INPUT = "Invalid input arguments. Please run 'nvidia-smi -h' for help.\n"
ERR_BAD_FIELD = 'Field "%s" is not a valid field to query.\n\n'
# "Unable to determine the device handle for GPU0000:07:00.0: Unknown Error"
ERR_DEVICE_HANDLE = "Unable to determine the device handle for GPU%s: %s\n"

# NVML errors a GPU can be stuck in (profiles.Gpu.handle_error) -> exit code.
DEVICE_HANDLE_ERRORS = {"Unknown Error": RC_OTHER, "GPU is lost": RC_GPU_LOST}


class UsageError(Exception):
    """A command line the real tool refuses; the message is what it prints."""

    def __init__(self, message, rc=RC_INVALID):
        Exception.__init__(self, message)
        self.message = message
        self.rc = rc


class Context(object):
    """What every sub-command needs: the profile, the driver and the GPUs.

    ``gpus`` are the GPUs NVML can open; ``unreadable`` those it lists but
    cannot get a device handle for (their errors are printed first).
    """

    def __init__(self, profile, driver_version, gpus):
        self.profile = profile
        self.driver_version = driver_version
        self.branch = int(env.driver_branch(driver_version))
        self.cuda_version = env.cuda_version(driver_version)
        self.all_gpus = gpus
        self.gpus = [gpu for gpu in gpus if not gpu.handle_error]
        self.now = env.now()
        self.out = []
        self.handle_rc = None

    def write(self, text):
        self.out.append(text)

    def timestamp(self):
        """``Tue Dec 30 09:49:57 2025`` (ctime form, as in -q and the summary)."""
        return time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(self.now))


def parse_options(argv, table):
    """Parse nvidia-smi style options (``-pm 1``, ``--id=0``, ``--id 0``).

    table: key -> (short forms, long forms, takes a value).  Unknown options
    and missing values raise UsageError with the real tool's message.
    """
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
            raise UsageError(ERR_NOT_RECOGNIZED % token)
        key, takes_value = lookup[name]
        if takes_value and value is None:
            i += 1
            if i >= len(argv):
                raise UsageError(ERR_MISSING_VALUE % token, RC_OTHER)
            value = argv[i]
        elif not takes_value and value is not None:
            raise UsageError(ERR_NOT_RECOGNIZED % token)
        parsed[key] = value if takes_value else True
        i += 1
    return parsed


def driver_problem(profile):
    """(rc, text) when nvidia-smi cannot use NVML, else None.

    In the real tool's order: the library must load (libnvidia-ml1), NVML must
    initialise (a loaded kernel module of the library's version), and
    nvidia-smi must come from the same driver as the library.
    """
    nvml = env.nvml_library_version()
    if not nvml:
        return RC_NO_NVML, NO_NVML
    failure = env.nvml_init_error()
    if failure:
        return RC_OTHER, "Failed to initialize NVML: %s\n" % failure
    loaded = env.loaded_driver_version()
    if not profile.get("driver_loadable", True) or not loaded:
        return RC_NO_DRIVER, NO_DRIVER
    if nvml != loaded:
        library = ".".join(nvml.split(".")[:2])
        return RC_MISMATCH, ("Failed to initialize NVML: Driver/library version mismatch\n"
                             "NVML library version: %s\n" % library)
    installed = env.installed_driver_version()
    if installed and installed != nvml:
        return RC_OTHER, SMI_NVML_MISMATCH
    return None


def build_context(need_gpus=True):
    """(Context, None), or (None, (rc, text)) when NVML fails or finds no GPU."""
    from nvsim import profiles
    profile = env.load_profile()
    problem = driver_problem(profile)
    if problem:
        return None, problem
    ctx = Context(profile, env.loaded_driver_version(), profiles.gpus(profile))
    if need_gpus and not ctx.all_gpus:
        return None, (RC_NOT_FOUND, NO_DEVICES)
    return ctx, None


def select_gpus(ctx, id_option):
    """GPUs named by ``-i`` (all by default), or None after "No devices were found".

    GPUs without a device handle are reported (the real tool's message) and
    left out; ``ctx.handle_rc`` then carries their exit code.
    """
    from nvsim import profiles
    chosen = profiles.select(ctx.all_gpus, id_option)
    if not chosen:
        ctx.write(NO_DEVICES)
        return None
    usable = []
    for gpu in chosen:
        if gpu.handle_error:
            ctx.write(ERR_DEVICE_HANDLE % (gpu.short_bus_id, gpu.handle_error))
            ctx.handle_rc = DEVICE_HANDLE_ERRORS.get(gpu.handle_error, RC_OTHER)
        else:
            usable.append(gpu)
    return usable
