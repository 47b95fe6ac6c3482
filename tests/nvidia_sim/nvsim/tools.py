# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helper tools of the simulator: nvidia-sim-hw, nvidia-sim-modload, nvidia-sim-workload."""

import argparse
import json
import os
import shutil
import signal
import sys
import time

from nvsim import env


# --- nvidia-sim-hw ----------------------------------------------------------

def _pci_tree(profile):
    """sysfs-like PCI files for each GPU and NVSwitch of a profile."""
    devices = []
    for gpu in profile.get("gpus", []):
        model = profile["models"][gpu["model"]]
        devices.append((gpu["bus_id"], model["pci_device_id"], model["pci_subsystem_id"], model["pci_class"]))
    for switch in profile.get("nvswitches", []):
        devices.append((switch["bus_id"], switch["device_id"], switch["subsystem_id"], "0x068000"))
    return devices


def hw_main(argv=None):
    parser = argparse.ArgumentParser(prog="nvidia-sim-hw",
                                     description="Install the simulated GPU hardware of a profile.")
    parser.add_argument("--profile", help="profile name (default: the one in etc/nvidia-sim/profile)")
    parser.add_argument("--list", action="store_true", help="list the available profiles")
    args = parser.parse_args(argv)
    env.log_call("nvidia-sim-hw", sys.argv[1:] if argv is None else argv)
    if args.list:
        sys.stdout.write("\n".join(env.available_profiles()) + "\n")
        return 0
    name = args.profile or env.profile_name()
    try:
        profile = env.load_profile(name)
    except env.SimError as exc:
        sys.stderr.write("%s\n" % exc)
        return 1
    env.write_file(env.PROFILE_FILE, name + "\n")
    target = env.path(*env.PROFILES_DIR)
    os.makedirs(target, exist_ok=True)
    source = env.profile_path(name)
    if os.path.abspath(source) != os.path.abspath(os.path.join(target, name + ".json")):
        shutil.copyfile(source, os.path.join(target, name + ".json"))
    devices_dir = env.path(*(env.HW_DIR + ("sys", "bus", "pci", "devices")))
    shutil.rmtree(devices_dir, ignore_errors=True)
    for bus_id, device_id, subsystem_id, pci_class in _pci_tree(profile):
        short = bus_id[4:].lower()
        files = {"vendor": "0x10de", "device": "0x" + device_id[2:6].lower(), "class": pci_class,
                 "subsystem_vendor": "0x" + subsystem_id[6:10].lower(),
                 "subsystem_device": "0x" + subsystem_id[2:6].lower()}
        for filename, content in files.items():
            env.write_file(env.HW_DIR + ("sys", "bus", "pci", "devices", short, filename), content + "\n")
    sys.stdout.write("nvidia-sim: hardware profile %s installed (%d GPU(s), %d NVSwitch(es))\n"
                     % (name, len(profile.get("gpus", [])), len(profile.get("nvswitches", []))))
    return 0


# --- nvidia-sim-modload -----------------------------------------------------

def _proc_version(version, flavour):
    build = "Release Build  (dvs-builder@U22-I3-AE18-23-3)  Thu Jan 30 11:15:02 UTC 2025"
    if flavour == "open":
        head = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  %s" % (version, build)
    else:
        head = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Thu Jan 30 11:15:02 UTC 2025" % version
    return head + "\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) \n"


def _unload():
    for parts in (env.LOADED_DRIVER_FILE, env.PROC_VERSION_FILE):
        try:
            os.remove(env.path(*parts))
        except OSError:
            pass
    shutil.rmtree(env.path(*env.NVSWITCH_DEVICES_DIR), ignore_errors=True)


def _in_use():
    return bool(env.alive_processes()) or env.persistenced_running()


def modload_main(argv=None):
    parser = argparse.ArgumentParser(prog="nvidia-sim-modload",
                                     description="Load (or unload) the simulated NVIDIA kernel module.")
    parser.add_argument("--if-not-loaded", action="store_true",
                        help="do nothing when a module (of any version) is already loaded, as modprobe does")
    parser.add_argument("--unload", action="store_true", help="unload the module (rmmod nvidia)")
    args = parser.parse_args(argv)
    env.log_call("nvidia-sim-modload", sys.argv[1:] if argv is None else argv)
    loaded = env.loaded_driver_version()
    if args.unload:
        if loaded and _in_use():
            sys.stderr.write("rmmod: ERROR: Module nvidia is in use\n")
            return 1
        _unload()
        return 0
    if loaded and args.if_not_loaded:
        return 0
    installed = env.installed_driver_version()
    if not installed:
        sys.stderr.write("modprobe: FATAL: Module nvidia not found in directory /lib/modules/%s\n" % os.uname()[2])
        return 1
    profile = env.load_profile()
    if not profile.get("driver_loadable", True):
        sys.stderr.write("modprobe: ERROR: could not insert 'nvidia': No such device\n")
        return 0 if args.if_not_loaded else 1
    if loaded == installed:
        return 0
    if loaded and _in_use():
        sys.stderr.write("modprobe: FATAL: Module nvidia is in use.\n")
        return 1
    # A (re)loaded driver re-initialises the GPUs like a reboot does.
    env.update_state(env.apply_reboot_effects)
    _unload()
    env.write_file(env.PROC_VERSION_FILE, _proc_version(installed, env.module_flavour() or "open"))
    for switch in profile.get("nvswitches", []):
        env.write_file(env.NVSWITCH_DEVICES_DIR + (switch["bus_id"][4:].lower(), "information"),
                       "Fabric Manager Status: N/A\nBus Location: %s\n" % switch["bus_id"][4:].lower())
    env.write_file(env.LOADED_DRIVER_FILE, installed + "\n")
    return 0


# --- nvidia-sim-workload ----------------------------------------------------

class WorkloadError(Exception):
    pass


def _check_can_run(gpu_index, memory, mig_device=0):
    """The GPU (and MIG device, or None) a real process would run on; WorkloadError
    with the CUDA error it would hit otherwise."""
    from nvsim import profiles
    from nvsim.smi import common as smi
    profile = env.load_profile()
    problem = smi.driver_problem(profile)
    if problem:
        raise WorkloadError("CUDA error: CUDA driver version is insufficient for CUDA runtime version"
                            if problem[0] == smi.RC_MISMATCH else "CUDA error: no CUDA-capable device is detected")
    gpus = profiles.gpus(profile)
    if gpu_index >= len(gpus):
        raise WorkloadError("CUDA error: invalid device ordinal")
    gpu = gpus[gpu_index]
    if gpu.handle_error:
        raise WorkloadError("CUDA error: unknown error")
    device = None
    if gpu.mig_current:
        devices = profiles.mig_devices(gpu)
        if mig_device >= len(devices):
            raise WorkloadError("CUDA error: no CUDA-capable device is detected")
        device = devices[mig_device]
    if gpu.compute_mode == "Prohibited" or (gpu.compute_mode == "Exclusive_Process" and gpu.processes):
        raise WorkloadError("CUDA error: all CUDA-capable devices are busy or unavailable")
    free = gpu.memory_free if device is None else profiles.mig_device_free(gpu, device["gi"])
    if memory > free:
        raise WorkloadError("CUDA error: out of memory")
    return gpu, device


def _register(gpu, device, args):
    record = {"pid": os.getpid(), "gpu": gpu.index, "gpu_uuid": gpu.uuid, "used_memory": args.memory,
              "name": args.name, "type": "C", "started": env.now()}
    if device is not None:
        record.update(gpu_instance_id=device["gi"]["id"], compute_instance_id=device["ci"]["id"])
    env.write_file(env.PROCESSES_DIR + ("%d.json" % os.getpid(),), json.dumps(record) + "\n")


def _deregister(*_args):
    try:
        os.remove(env.path(*(env.PROCESSES_DIR + ("%d.json" % os.getpid(),))))
    except OSError:
        pass
    os._exit(0)


def _serve(gpu, device, args, ready_fd=None):
    signal.signal(signal.SIGTERM, _deregister)
    signal.signal(signal.SIGINT, _deregister)
    signal.signal(signal.SIGHUP, _deregister)
    _register(gpu, device, args)
    if ready_fd is not None:
        os.write(ready_fd, b"ok\n")
        os.close(ready_fd)
    deadline = None if args.duration is None else time.time() + args.duration
    while deadline is None or time.time() < deadline:
        time.sleep(0.5 if deadline is None else max(0.0, min(0.5, deadline - time.time())))
    _deregister()


def workload_main(argv=None):
    parser = argparse.ArgumentParser(prog="nvidia-sim-workload",
                                     description="Run a simulated CUDA process that holds GPU memory.")
    parser.add_argument("--gpu", type=int, default=0, help="GPU index")
    parser.add_argument("--memory", type=int, default=1024, help="GPU memory to hold, MiB")
    parser.add_argument("--mig-device", type=int, default=0,
                        help="on a GPU in MIG mode: the MIG device (index as in nvidia-smi -L) to run on")
    parser.add_argument("--name", default="nvidia-sim-workload", help="process name nvidia-smi reports")
    parser.add_argument("--duration", type=float, help="exit after this many seconds (default: until SIGTERM)")
    parser.add_argument("--daemon", action="store_true", help="fork into the background and print the PID")
    args = parser.parse_args(argv)
    env.log_call("nvidia-sim-workload", sys.argv[1:] if argv is None else argv)
    try:
        gpu, device = _check_can_run(args.gpu, args.memory, args.mig_device)
    except WorkloadError as exc:
        sys.stderr.write("%s\n" % exc)
        return 1
    if not args.daemon:
        _serve(gpu, device, args)
        return 0
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        try:
            _serve(gpu, device, args, write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as ready:
        if not ready.read():
            sys.stderr.write("nvidia-sim-workload: the background process failed to start\n")
            return 1
    sys.stdout.write("%d\n" % pid)
    return 0
