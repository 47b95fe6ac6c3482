"""Faults of a simulated GPU, for the scenarios that inject them (the fleet
scenario and the fault suite): what the driver logs when a GPU falls off the
bus, and NVML failing to open a GPU. The GPU and NVML are simulated; what the
collection reads and decides from them is not.
"""


def _bus(bus_id):
    """nvidia-smi's "00000000:5D:00.0" as the driver logs it: "0000:5d:00"."""
    return bus_id.strip()[-12:-2].lower()


def xid(bus_id, code, text, uptime="812.345678"):
    """The kernel log line of Xid code on the GPU nvidia-smi lists at bus_id."""
    return "[%12s] NVRM: Xid (PCI:%s): %d, pid=0, name=, %s\n" % (uptime, _bus(bus_id), code, text)


def xid79(bus_id, uptime="812.345678"):
    """The kernel log lines of an Xid 79 on the GPU nvidia-smi lists at bus_id
    ("00000000:5D:00.0"), as the driver logs it ("PCI:0000:5d:00")."""
    return (xid(bus_id, 79, "GPU has fallen off the bus.", uptime)
            + "[%12s] NVRM: GPU %s: GPU has fallen off the bus.\n" % (uptime, _bus(bus_id)))


def nvml_device_error_script(index, error):
    """A Python script that makes NVML fail to open simulated GPU index with
    error ("GPU is lost"; None opens it again), through the simulator's own
    locked update of its state (nvsim.env.update_state): run it on the host
    with python3."""
    change = ("    gpu['nvml_device_error'] = %r\n" % error) if error is not None else ""
    return ("import sys\n"
            "sys.path.insert(0, '/usr/lib/nvidia-sim')\n"
            "from nvsim import env\n"
            "def change(state):\n"
            "    gpu = state.setdefault('gpus', {}).setdefault(%r, {})\n"
            "    gpu.pop('nvml_device_error', None)\n"
            "%s"
            "env.update_state(change)\n" % (str(index), change))
