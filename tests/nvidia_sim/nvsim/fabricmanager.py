# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated nv-fabricmanager (test double).

Reads ``fabricmanager.cfg`` (``-c``), then refuses to start exactly where the
real one does: its own version (baked into the simulated package at build
time, ``usr/share/nvidia-sim/fabricmanager-version``) must equal the loaded
kernel module's version, and the NVSwitch driver must expose switches
(``run/nvidia-sim/proc/driver/nvidia-nvswitch/devices``).  Otherwise it
daemonizes (``DAEMONIZE=1``) and keeps ``/var/run/nvidia-fabricmanager/
nv-fabricmanager.pid`` until SIGTERM.
"""

import sys

from nvsim import daemon
from nvsim import env
from nvsim import gpus as gpu_info

PROG = "nv-fabricmanager"
DEFAULT_CONFIG = env.FABRICMANAGER_CONFIG


def fabricmanager_version():
    """Version of the simulated FM package; the installed driver's when not baked."""
    value = env.component_version("fabricmanager", "")
    return value or env.installed_driver_version() or ""


def read_config(path):
    values = {}
    with open(gpu_info.resolve(path)) as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, _unused, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


class FabricManager(object):
    def __init__(self, settings):
        self.settings = settings
        log_file = settings.get("LOG_FILE_NAME") or env.FABRICMANAGER_LOG
        self.log = daemon.Logger(PROG, gpu_info.resolve(log_file), id_label="tid")
        self.pidfile = daemon.PidFile(env.path(*env.FABRICMANAGER_PID))

    def fail(self, message):
        self.log.error(message)
        raise daemon.InitError(message)

    def init(self):
        self.log.open()
        version = fabricmanager_version()
        self.log.info("Fabric Manager version %s is running with the following configuration options"
                      % version)
        for key in sorted(self.settings):
            self.log.info("%s : %s" % (key, self.settings[key]))
        loaded = env.loaded_driver_version()
        if not loaded:
            self.fail("failed to open handle to NVIDIA GPU driver, please make sure that the NVIDIA "
                      "GPU driver is loaded")
        if loaded != version:
            self.fail("fabric manager NVIDIA GPU driver interface version %s don't match with driver "
                      "version %s. Please update with matching NVIDIA driver package." % (version, loaded))
        switches = gpu_info.nvswitch_devices()
        if not switches:
            self.fail("request to query NVSwitch device information from NVSwitch driver failed with "
                      "error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]")
        self.pidfile.acquire()
        self.log.info("Detected %d NVSwitch devices: %s" % (len(switches), ", ".join(switches)))
        self.log.info("Successfully configured all the available NVSwitches to route GPU NVLink "
                      "traffic. NVLink Peer-to-Peer support will be enabled once the GPUs are "
                      "successfully registered with the NVLink fabric.")

    def run(self):
        daemon.wait_for_termination()
        self.log.info("Fabric Manager received a termination signal, exiting")
        self.pidfile.release()


def main(argv=None):
    argv = sys.argv if argv is None else argv
    env.log_call(PROG, argv[1:])
    config = DEFAULT_CONFIG
    args = list(argv[1:])
    while args:
        arg = args.pop(0)
        name, sep, inline = arg.partition("=")
        if name in ("-v", "--version"):
            sys.stdout.write("Fabric Manager version is : %s\n" % fabricmanager_version())
            return 0
        if name in ("-h", "--help"):
            sys.stdout.write("NVIDIA Fabric Manager\nUsage: nv-fabricmanager [-c <config file>] "
                             "[-r] [-v] [-h]\n")
            return 0
        if name in ("-c", "--config"):
            if not sep and not args:
                sys.stderr.write("Missing argument for option %s\n" % name)
                return 1
            config = inline if sep else args.pop(0)
        elif name in ("-r", "--restart"):
            pass
        else:
            sys.stderr.write("Invalid option %s\n" % arg)
            return 1
    try:
        settings = read_config(config)
    except (IOError, OSError):
        sys.stderr.write("failed to open fabric manager config file %s\n" % config)
        return 1
    manager = FabricManager(settings)
    daemon.block_termination_signals()
    foreground = settings.get("DAEMONIZE", "1") == "0"
    return daemon.detach(manager.init, manager.run, foreground=foreground)
