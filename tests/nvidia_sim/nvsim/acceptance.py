# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated acceptance programs: NVIDIA's nvbandwidth and nccl-tests' all_reduce_perf.

Test doubles for the health role's acceptance tests on the host-side
simulator (tests/unit/integration); not packaged into the simulated
repositories, so simulated nodes in containers have neither program, as most
real nodes.

The text follows the real programs' layouts (nvbandwidth v0.8 output.cpp and
inline_common.h; nccl-tests src/util.cu), so the collection's parsers read it
as they read the real ones. The numbers are a model, not a measurement: the
host bandwidth is 83 % of the GPU's PCIe link (generation x width), the peer
bandwidth 83 % of its active NVLinks x link speed (no NVLink: no peer access,
N/A), and the all-reduce bus bandwidth 1.2 x the slowest GPU's peer bandwidth.
Tests slow a GPU down or make it return wrong data with the GPU's settings in
the state file: ``"acceptance": {"h2d_gbps": n, "d2h_gbps": n, "peer_gbps": n,
"wrong_results": n}``.
"""

import sys

from nvsim import env
from nvsim import gpus as gpu_view

EFFICIENCY = 0.83
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
NVBANDWIDTH_TESTS = {
    "host_to_device_memcpy_ce": ("memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", "h2d_gbps"),
    "device_to_host_memcpy_ce": ("memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)", "d2h_gbps"),
    "device_to_device_memcpy_read_ce": ("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)", "peer_gbps"),
}
SIZES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _injected(gpu):
    return gpu.settings.get("acceptance") or {}


def host_gbps(gpu, key):
    if key in _injected(gpu):
        return float(_injected(gpu)[key])
    pcie = gpu.model["pcie"]
    return PCIE_LANE_GBPS[pcie["current_gen"]] * pcie["current_width"] * EFFICIENCY


def peer_gbps(gpu):
    """None without NVLink (no peer access)."""
    if "peer_gbps" in _injected(gpu):
        return float(_injected(gpu)["peer_gbps"])
    nvlink = gpu.model.get("nvlink") or {}
    if not nvlink.get("links") or not nvlink.get("active"):
        return None
    return nvlink["links"] * nvlink["speed_gbps"] * EFFICIENCY


def _driver_error():
    """The CUDA error a program gets when no GPU can be used, or None."""
    if gpu_view.driver_problem() or env.nvml_init_error():
        return "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
    if not gpu_view.load_gpus():
        return "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
    return None


def _matrix(rows, columns, value):
    lines = ["  " + "".join("%10s" % column for column in range(columns))]
    total = 0.0
    for row in range(rows):
        cells = []
        for column in range(columns):
            number = value(row, column)
            if number is None:
                cells.append("%10s" % "N/A")
            else:
                cells.append("%10.2f" % number)
                total += number
        lines.append("%2d" % row + "".join(cells))
    return lines, total


def nvbandwidth_main(argv):
    env.log_call("nvbandwidth", argv[1:])
    tests, samples, position = [], 3, 1
    while position < len(argv):
        arg = argv[position]
        position += 1
        if arg in ("-t", "--testcase"):
            while position < len(argv) and not argv[position].startswith("-"):
                tests.append(argv[position])
                position += 1
        elif arg in ("-i", "--testSamples") and position < len(argv):
            samples = argv[position]
            position += 1
        else:
            sys.stdout.write("ERROR: Invalid Arguments :\n\n%s\n" % " ".join(argv))
            return 1
    del samples
    sys.stdout.write("nvbandwidth Version: v0.8\nBuilt from Git version: unknown\n\n")
    error = _driver_error()
    if error:
        sys.stderr.write("%s in function main\n" % error)
        return 1
    gpus = gpu_view.load_gpus()
    version = env.installed_driver_version()
    sys.stdout.write("CUDA Runtime Version: 12080\nCUDA Driver Version: 12080\nDriver Version: %s\n\n" % version)
    sys.stdout.write("gpufleet-sim\n")
    for gpu in gpus:
        sys.stdout.write("Device %d: %s (%s:%s:%s)\n" % (gpu.index, gpu.model["product_name"],
                                                         gpu.bus_id.split(":")[0], gpu.pci_bus, gpu.pci_device))
    sys.stdout.write("\n")
    for name in tests or list(NVBANDWIDTH_TESTS):
        if name not in NVBANDWIDTH_TESTS:
            sys.stdout.write("ERROR: Testcase %s not found!\n" % name)
            continue
        description, key = NVBANDWIDTH_TESTS[name]
        if key == "peer_gbps":
            if len(gpus) < 2 or any(peer_gbps(gpu) is None for gpu in gpus):
                sys.stdout.write("Waived: \n")
                continue
            lines, total = _matrix(len(gpus), len(gpus), lambda row, column: None if row == column
                                   else min(peer_gbps(gpus[row]), peer_gbps(gpus[column])))
        else:
            lines, total = _matrix(1, len(gpus), lambda _row, column: host_gbps(gpus[column], key))
        sys.stdout.write("Running %s.\n%s\n%s\n\nSUM %s %.2f\n\n" % (name, description, "\n".join(lines), name, total))
    sys.stdout.write("NOTE: The reported results may not reflect the full capabilities of the platform.\n"
                     "Performance can vary with software drivers, hardware clocks, and system topology.\n\n")
    return 0


def _size(text):
    text = str(text)
    unit = text[-1:] if text[-1:] in SIZES else ""
    return int(text[:-1] if unit else text) * SIZES[unit]


def all_reduce_main(argv):
    env.log_call("all_reduce_perf", argv[1:])
    options = {"-b": "32M", "-e": "32M", "-f": "1", "-g": "1", "-c": "1"}
    position = 1
    while position < len(argv):
        if argv[position] not in options or position + 1 >= len(argv):
            sys.stderr.write("invalid option %s\n" % argv[position])
            return 1
        options[argv[position]] = argv[position + 1]
        position += 2
    count = int(options["-g"])
    header = ("# nThread 1 nGpus %d minBytes %d maxBytes %d step: %s(factor) warmup iters: 1 iters: 20 agg iters: 1 "
              "validation: %s graph: 0 unalign: 0"
              % (count, _size(options["-b"]), _size(options["-e"]), options["-f"], options["-c"]))
    lines = ["# nccl-tests version 2.17.6-sim nccl-headers=22807 nccl-library=22807",
             "# Collective test starting: all_reduce_perf", header, "#", "# Using devices"]
    error = _driver_error()
    gpus = gpu_view.load_gpus()
    if error or count > len(gpus):
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stderr.write("all_reduce_perf: common.cu:1037 CUDA failure common.cu 1037 '%s'\n"
                         % (error or "invalid device ordinal"))
        return 1
    used = gpus[:count]
    for gpu in used:
        lines.append("#  Rank %2d Group  0 Pid %6d on gpufleet-sim device %2d [%s:%s:%s] %s"
                     % (gpu.index, 4242, gpu.index, gpu.bus_id.split(":")[0][4:], gpu.pci_bus, gpu.pci_device,
                        gpu.model["product_name"]))
    peers = [peer_gbps(gpu) for gpu in used]
    if any(peer is None for peer in peers):
        busbw = min(host_gbps(gpu, "h2d_gbps") for gpu in used) * 0.9
    else:
        busbw = min(peers) * 1.2
    wrong = sum(int(_injected(gpu).get("wrong_results", 0)) for gpu in used)
    size = _size(options["-e"])
    algbw = busbw * count / (2.0 * (count - 1)) if count > 1 else busbw
    seconds = size / (algbw * 1e9) if algbw else 0
    lines += ["#",
              "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
              % ("", "", "", "", ""),
              "  %10d  %12d  %8s  %6s  %6d  %7.0f  %6.2f  %6.2f  %6d  %7.0f  %6.2f  %6.2f  %6d"
              % (size, size // 4, "float", "sum", -1, seconds * 1e6, algbw, busbw, wrong, seconds * 1e6, algbw,
                 busbw, wrong),
              "# %-20s : %d %s" % ("Out of bounds values", wrong, "FAILED" if wrong else "OK"),
              "# %-20s : %g %s" % ("Avg bus bandwidth", round(busbw, 3), ""),
              "#", "# Collective test concluded: all_reduce_perf", ""]
    sys.stdout.write("\n".join(lines))
    return 1 if wrong else 0
