# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the simulated daemons see of the host: driver state, GPUs, NVSwitches.

Everything is derived from ``env`` (paths, profile, state) and ``profiles``
(the effective view of each GPU); this module only adds the questions the
daemons ask and that ``nvidia-smi`` does not.
"""

import os

from nvsim import env
from nvsim import profiles

NOT_LOADED = "not_loaded"
MISMATCH = "mismatch"


def driver_problem():
    """None when the userspace driver can talk to the kernel module.

    NOT_LOADED: no kernel module (or no driver installed at all).
    MISMATCH: the installed userspace differs from the loaded module, as
    after an upgrade without reboot.
    """
    loaded = env.loaded_driver_version()
    installed = env.installed_driver_version()
    if not loaded or not installed:
        return NOT_LOADED
    if loaded != installed:
        return MISMATCH
    return None


def load_gpus():
    """Profile GPUs merged with the settings state (list of profiles.Gpu)."""
    return profiles.gpus(env.load_profile())


def nvswitches():
    """NVSwitches of the profile: dicts with bus_id, device_id, subsystem_id."""
    return list(env.load_profile().get("nvswitches") or [])


def nvswitch_devices():
    """Bus ids the NVSwitch kernel driver exposes (empty without the driver)."""
    directory = env.path(*env.NVSWITCH_DEVICES_DIR)
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def device_id(gpu):
    """PCI device id in the lower-case 4-digit form DCGM prints (``2330``)."""
    return gpu.model["pci_device_id"][2:6].lower()


def resolve(path):
    """Map a path from a command line or config file below the sim root.

    Paths that already lie below the root (as host-side tests pass them) are
    kept; relative paths are relative to the working directory as usual.
    """
    if not path or not os.path.isabs(path):
        return path
    root = env.root()
    if root in ("", "/"):
        return path
    real_root = os.path.abspath(root)
    if path == real_root or path.startswith(real_root.rstrip("/") + "/"):
        return path
    return env.path(path.lstrip("/"))
