# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The default ``nvidia-smi`` summary, ``nvidia-smi topo -m`` and ``nvidia-smi nvlink -s``."""

from nvsim.smi import INVALID_COMBINATION, RC_INVALID, RC_OK, UsageError, parse_options, select_gpus

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
            gpu.index, "N/A", "N/A", proc["pid"], proc.get("type", "C"), name,
            "%dMiB" % int(proc.get("used_memory", 0))))
    out.append(RULE)
    ctx.write("".join(out))
    return RC_OK


def _relation(ctx, first, second):
    if first.index == second.index:
        return " X "
    if ctx.profile.get("nvlink_fabric") and first.nvlink["active"] and second.nvlink["active"]:
        return "NV%d" % min(first.nvlink["links"], second.nvlink["links"])
    if first.numa_node == second.numa_node:
        return ctx.profile.get("pcie_same_node", "NODE")
    return "SYS"


def topo(ctx, argv):
    try:
        opts = parse_options(argv, {"matrix": (("-m",), ("--matrix",), False)})
    except UsageError:
        opts = {}
    if not opts.get("matrix"):
        ctx.write(INVALID_COMBINATION)
        return RC_INVALID
    gpus = ctx.gpus
    out = ["\t" + "".join("GPU%d\t" % gpu.index for gpu in gpus) + "CPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"]
    for gpu in gpus:
        cells = [_relation(ctx, gpu, other) for other in gpus]
        affinity = ctx.profile["cpu_affinity"].get(str(gpu.numa_node), "N/A")
        out.append("GPU%d\t%s\t%s\t%d\t\tN/A\n" % (gpu.index, "\t".join(cells), affinity, gpu.numa_node))
    out.append(LEGEND)
    ctx.write("".join(out))
    return RC_OK


def nvlink(ctx, argv):
    try:
        opts = parse_options(argv, {"status": (("-s",), ("--status",), False), "id": (("-i",), ("--id",), True)})
    except UsageError:
        opts = {}
    if not opts.get("status"):
        ctx.write(INVALID_COMBINATION)
        return RC_INVALID
    chosen = select_gpus(ctx, opts.get("id"))
    if chosen is None:
        from nvsim.smi import RC_NOT_FOUND
        return RC_NOT_FOUND
    for gpu in chosen:
        ctx.write("GPU %d: %s (UUID: %s)\n" % (gpu.index, gpu.product_name, gpu.uuid))
        links = gpu.nvlink["links"]
        if not links:
            ctx.write("\t NVML: Unable to retrieve NVLink information as all links are inActive\n")
            continue
        for link in range(links):
            state = "%.3f GB/s" % gpu.nvlink["speed_gbps"] if gpu.nvlink["active"] else "<inactive>"
            ctx.write("\t Link %d: %s\n" % (link, state))
    return RC_OK
