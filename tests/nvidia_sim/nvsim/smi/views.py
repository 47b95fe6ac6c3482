# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The default ``nvidia-smi`` summary, ``nvidia-smi topo -m`` and ``nvidia-smi nvlink -s``.

``topo -m`` is laid out as the real tool prints it even into a pipe: the
header underlined (``ESC[4m`` ... ``ESC[0m``), TAB-separated cells, GPU rows
with an empty cell before ``GPU NUMA ID``, NIC rows ending in four empty
cells and, with NICs, a ``NIC Legend`` closed by an empty line.
"""

from nvsim.smi.common import RC_INVALID, RC_NOT_FOUND, RC_OK, UsageError, parse_options, select_gpus

# Sub-command usage errors (a format string of the real binaries).
SUB_USAGE = "ERROR: Option %s is not recognized. Please run 'nvidia-smi -h'.\n\n"

LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""

RULE = "+" + "-" * 89 + "+\n"
GPU_RULE = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+\n"


def _row(*cells):
    return "|" + "|".join(cells) + "|\n"


def summary(ctx, chosen):
    out = [ctx.timestamp() + "       \n", RULE]
    out.append("| NVIDIA-SMI %-23sDriver Version: %-15sCUDA Version: %-9s|\n"
               % (ctx.driver_version, ctx.driver_version, ctx.cuda_version))
    out.append(("+" if ctx.branch >= 580 else "|") + GPU_RULE[1:])
    out.append(_row(" GPU  Name                 Persistence-M ", " Bus-Id          Disp.A ", " Volatile Uncorr. ECC "))
    out.append(_row(" Fan  Temp   Perf          Pwr:Usage/Cap ", "           Memory-Usage ", " GPU-Util  Compute M. "))
    out.append(_row(" " * 41, " " * 24, "               MIG M. "))
    out.append("|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|\n")
    for gpu in chosen:
        name = gpu.product_name if len(gpu.product_name) <= 29 else gpu.product_name[:26] + "..."
        ecc = ("0" if gpu.ecc_current else "Off") if gpu.ecc_supported else "N/A"
        out.append(_row(" %3d  %-29s %3s  " % (gpu.index, name, "On" if gpu.persistence else "Off"),
                        " %18s %3s " % (gpu.bus_id, "Off"), "%21s " % ecc))
        fan = "N/A" if gpu.fan_percent is None else "%d%%" % gpu.fan_percent
        util = "N/A" if gpu.mig_current else "%d%%" % gpu.utilization
        readings = (fan, "%dC" % gpu.temperature, gpu.pstate, "%dW" % round(gpu.power_draw),
                    "%dW" % round(gpu.power_limit))
        out.append(_row(" %3s%6s%6s%16s / %5s " % readings,
                        "%11s / %9s " % ("%dMiB" % gpu.memory_used, "%dMiB" % gpu.memory["total_mib"]),
                        "%8s%13s " % (util, gpu.compute_mode)))
        mig = ("Enabled" if gpu.mig_current else "Disabled") if gpu.mig_capable else "N/A"
        out.append(_row(" " * 41, " " * 24, "%21s " % mig))
        out.append(GPU_RULE)
    out.append(" " * 89 + "\n")
    out.append(RULE)
    out.append("| %-88s|\n" % "Processes:")
    out.append("| %-88s|\n" % " GPU   GI   CI              PID   Type   Process name                        GPU Memory")
    out.append("| %-88s|\n" % "       ID   ID                                                               Usage")
    out.append("|" + "=" * 89 + "|\n")
    processes = [(gpu, proc) for gpu in chosen for proc in gpu.processes]
    if not processes:
        out.append("| %-88s|\n" % " No running processes found")
    for gpu, proc in processes:
        name = proc.get("name", "")
        if len(name) > 35:
            name = "..." + name[-32:]
        out.append("| %4d   %3s  %3s  %15d  %5s   %-35s %9s |\n" % (
            gpu.index, proc.get("gpu_instance_id", "N/A"), proc.get("compute_instance_id", "N/A"), proc["pid"],
            proc.get("type", "C"), name,
            "%dMiB" % int(proc.get("used_memory", 0))))
    out.append(RULE)
    ctx.write("".join(out))
    return RC_OK


def _relation(ctx, first, second):
    """topo -m cell between two devices (GPUs: index, NICs: name)."""
    if first is second:
        return " X "
    if (ctx.profile.get("nvlink_fabric") and getattr(first, "nvlink", None) and getattr(second, "nvlink", None)
            and first.nvlink["active"] and second.nvlink["active"]):
        return "NV%d" % min(first.nvlink["links"], second.nvlink["links"])
    switch = _switch(first)
    if switch is not None and switch == _switch(second):
        return "PIX"
    if _numa(first) == _numa(second):
        return ctx.profile.get("pcie_same_node", "NODE")
    return "SYS"


def _switch(device):
    return device.get("pcie_switch") if isinstance(device, dict) else device.spec.get("pcie_switch")


def _numa(device):
    return device["numa_node"] if isinstance(device, dict) else device.numa_node


def topo(ctx, argv):
    try:
        opts = parse_options(argv, {"matrix": (("-m",), ("--matrix",), False)})
    except UsageError:
        opts = {}
    if not opts.get("matrix"):
        ctx.write(SUB_USAGE % (argv[0] if argv else "topo"))
        return RC_INVALID
    gpus = ctx.gpus
    nics = list(ctx.profile.get("nics") or [])
    devices = list(gpus) + nics
    names = ["GPU%d" % gpu.index for gpu in gpus] + ["NIC%d" % i for i in range(len(nics))]
    header = names + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    out = ["\t\x1b[4m" + "\t".join(header) + "\x1b[0m\n"]
    for name, device in zip(names, devices):
        cells = [name] + [_relation(ctx, device, other) for other in devices]
        if isinstance(device, dict):
            cells += ["", "", "", ""]
        else:
            affinity = ctx.profile["cpu_affinity"].get(str(device.numa_node), "N/A")
            cells += [affinity, str(device.numa_node), "", "N/A"]
        out.append("\t".join(cells) + "\n")
    out.append(LEGEND)
    if nics:
        out.append("\nNIC Legend:\n\n" + "".join("  NIC%d: %s\n" % (i, nic["name"]) for i, nic in enumerate(nics))
                   + "\n")
    ctx.write("".join(out))
    return RC_OK


# nvlink -s messages instead of links: branches < 590 (strings of the real
# 535 and 550 binaries) and from 590 (590-610 captures, corpus nvlink/).
NVLINK_ALL_INACTIVE = "NVML: Unable to retrieve NVLink information as all links are inActive\n"
NVLINK_ALL_INACTIVE_590 = "NVML: Unable to retrieve Nvlink information as all links are inActive\n"
NVLINK_NONE_590 = "Device does not have or support Nvlink\n"
NVLINK_MIG_590 = "Nvlink queries are not supported for Devices in MIG mode\n"


def _nvlink_lines(ctx, gpu):
    links = gpu.nvlink["links"]
    if ctx.branch >= 590:
        if gpu.mig_current:
            return [NVLINK_MIG_590]
        if not links:
            return [NVLINK_NONE_590]
        if not gpu.nvlink["active"]:
            return [NVLINK_ALL_INACTIVE_590]
    elif not links:
        return [NVLINK_ALL_INACTIVE]
    # "%g GB/s" as the real format: 26.562, 25 (never 25.000).
    state = ("%g GB/s" % gpu.nvlink["speed_gbps"]) if gpu.nvlink["active"] else "<inactive>"
    return ["\t Link %d: %s\n" % (link, state) for link in range(links)]


# nvlink -e: per link the three counters of the real R535 output, a blank line
# after each link. Counters come from the GPU's settings ("nvlink_errors":
# {"<link>": {"replay": n, "recovery": n, "crc": n}}), injected by tests.
NVLINK_COUNTERS = (("replay", "Replay Errors"), ("recovery", "Recovery Errors"), ("crc", "CRC Errors"))


def _nvlink_error_lines(ctx, gpu):
    lines = _nvlink_lines(ctx, gpu)
    if not gpu.nvlink["links"] or not gpu.nvlink["active"] or (ctx.branch >= 590 and gpu.mig_current):
        return lines
    errors = gpu.settings.get("nvlink_errors") or {}
    out = []
    for link in range(gpu.nvlink["links"]):
        counts = errors.get(str(link)) or {}
        out += ["\t Link %d: %s: %d\n" % (link, label, counts.get(key, 0)) for key, label in NVLINK_COUNTERS]
        out.append("\n")
    return out


def nvlink(ctx, argv):
    try:
        opts = parse_options(argv, {"status": (("-s",), ("--status",), False),
                                    "errors": (("-e",), ("--errorcounters",), False),
                                    "id": (("-i",), ("--id",), True)})
    except UsageError:
        opts = {}
    if not opts.get("status") and not opts.get("errors"):
        ctx.write(SUB_USAGE % (argv[0] if argv else "nvlink"))
        return RC_INVALID
    chosen = select_gpus(ctx, opts.get("id"))
    if chosen is None:
        return RC_NOT_FOUND
    lines = _nvlink_error_lines if opts.get("errors") else _nvlink_lines
    for gpu in chosen:
        ctx.write("GPU %d: %s (UUID: %s)\n" % (gpu.index, gpu.product_name, gpu.uuid))
        ctx.write("".join(lines(ctx, gpu)))
    return ctx.handle_rc or RC_OK
