# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``--query-gpu`` / ``--query-compute-apps`` / ``--query-remapped-rows`` /
``--query-supported-clocks`` with ``--format=csv[,noheader][,nounits]``.

Headers use the canonical field name (an alias such as ``gpu_name`` is
reported as ``name``) followed by the unit in brackets, as the real tool does.
"""

import time

NA = object()
NOT_SUPPORTED = object()


def _enabled(flag):
    return "Enabled" if flag else "Disabled"


def _active(flag):
    return "Active" if flag else "Not Active"


def _ecc_counter(gpu):
    if not gpu.ecc_supported:
        return NOT_SUPPORTED
    return "0" if gpu.ecc_current else NA


def _reason_mask(gpu):
    # bit 0 = GPU idle; the other reasons never fire in the simulator.
    return "0x0000000000000000" if gpu.busy else "0x0000000000000001"


def _mig_mode(gpu, pending):
    if not gpu.mig_capable:
        return NA
    return _enabled(gpu.mig_pending if pending else gpu.mig_current)


def _fabric(gpu, ctx, what):
    if not ctx.profile.get("nvswitches"):
        return NA
    from nvsim import env
    running = env.fabricmanager_running()
    if what == "state":
        return "Completed" if running else "Not Started"
    return "Success" if running else NA


def _utilization(gpu):
    return NA if gpu.mig_current else str(gpu.utilization)


def _mem(value):
    return str(int(value))


def _watts(value):
    return "%.2f" % value


REASONS = (
    ("gpu_idle", lambda g: _active(not g.busy)),
    ("applications_clocks_setting", lambda g: _active(False)),
    ("sw_power_cap", lambda g: _active(False)),
    ("hw_slowdown", lambda g: _active(False)),
    ("hw_thermal_slowdown", lambda g: _active(False)),
    ("hw_power_brake_slowdown", lambda g: _active(False)),
    ("sw_thermal_slowdown", lambda g: _active(False)),
    ("sync_boost", lambda g: _active(False)),
)

# (canonical name, aliases, unit, getter(ctx, gpu))
GPU_FIELDS = [
    ("timestamp", (), None, lambda c, g: _csv_time(c)),
    ("driver_version", (), None, lambda c, g: c.driver_version),
    ("count", (), None, lambda c, g: str(len(c.gpus))),
    ("name", ("gpu_name",), None, lambda c, g: g.product_name),
    ("serial", ("gpu_serial",), None, lambda c, g: g.serial),
    ("uuid", ("gpu_uuid",), None, lambda c, g: g.uuid),
    ("pci.bus_id", ("gpu_bus_id",), None, lambda c, g: g.bus_id),
    ("pci.domain", (), None, lambda c, g: "0x" + g.pci_domain),
    ("pci.bus", (), None, lambda c, g: "0x" + g.pci_bus),
    ("pci.device", (), None, lambda c, g: "0x" + g.pci_device),
    ("pci.device_id", (), None, lambda c, g: g.pci_device_id),
    ("pci.sub_device_id", (), None, lambda c, g: g.pci_subsystem_id),
    ("pcie.link.gen.current", (), None, lambda c, g: str(g.pcie["current_gen"])),
    ("pcie.link.gen.gpucurrent", (), None, lambda c, g: str(g.pcie["current_gen"])),
    ("pcie.link.gen.max", (), None, lambda c, g: str(min(g.pcie["max_gen"], g.pcie["host_max_gen"]))),
    ("pcie.link.gen.gpumax", (), None, lambda c, g: str(g.pcie["max_gen"])),
    ("pcie.link.gen.hostmax", (), None, lambda c, g: str(g.pcie["host_max_gen"])),
    ("pcie.link.width.current", (), None, lambda c, g: str(g.pcie["current_width"])),
    ("pcie.link.width.max", (), None, lambda c, g: str(g.pcie["max_width"])),
    ("index", (), None, lambda c, g: str(g.index)),
    ("display_mode", (), None, lambda c, g: "Disabled"),
    ("display_active", (), None, lambda c, g: "Disabled"),
    ("persistence_mode", (), None, lambda c, g: _enabled(g.persistence)),
    ("addressing_mode", (), None, lambda c, g: "None"),
    ("accounting.mode", (), None, lambda c, g: "Disabled"),
    ("accounting.buffer_size", (), None, lambda c, g: "4000"),
    ("driver_model.current", (), None, lambda c, g: NA),
    ("driver_model.pending", (), None, lambda c, g: NA),
    ("vbios_version", (), None, lambda c, g: g.vbios_version),
    ("inforom.img", ("inforom.image",), None, lambda c, g: g.inforom["img"]),
    ("inforom.oem", (), None, lambda c, g: g.inforom["oem"]),
    ("inforom.ecc", (), None, lambda c, g: g.inforom["ecc"]),
    ("inforom.pwr", ("inforom.power",), None, lambda c, g: NA if g.inforom["pwr"] == "N/A" else g.inforom["pwr"]),
    ("gom.current", ("gpu_operation_mode.current",), None, lambda c, g: NA),
    ("gom.pending", ("gpu_operation_mode.pending",), None, lambda c, g: NA),
    ("fan.speed", (), "%", lambda c, g: NA if g.fan_percent is None else str(g.fan_percent)),
    ("pstate", (), None, lambda c, g: g.pstate),
    ("memory.total", (), "MiB", lambda c, g: _mem(g.memory["total_mib"])),
    ("memory.reserved", (), "MiB", lambda c, g: _mem(g.memory["reserved_mib"])),
    ("memory.used", (), "MiB", lambda c, g: _mem(g.memory_used)),
    ("memory.free", (), "MiB", lambda c, g: _mem(g.memory_free)),
    ("compute_mode", (), None, lambda c, g: g.compute_mode),
    ("compute_cap", (), None, lambda c, g: g.compute_cap),
    ("utilization.gpu", (), "%", lambda c, g: _utilization(g)),
    ("utilization.memory", (), "%", lambda c, g: _utilization(g)),
    ("utilization.encoder", (), "%", lambda c, g: "0"),
    ("utilization.decoder", (), "%", lambda c, g: "0"),
    ("utilization.jpeg", (), "%", lambda c, g: "0"),
    ("utilization.ofa", (), "%", lambda c, g: "0"),
    ("encoder.stats.sessionCount", (), None, lambda c, g: "0"),
    ("encoder.stats.averageFps", (), None, lambda c, g: "0"),
    ("encoder.stats.averageLatency", (), None, lambda c, g: "0"),
    ("ecc.mode.current", (), None, lambda c, g: _enabled(g.ecc_current) if g.ecc_supported else NA),
    ("ecc.mode.pending", (), None, lambda c, g: _enabled(g.ecc_pending) if g.ecc_supported else NA),
    ("retired_pages.single_bit_ecc.count", ("retired_pages.sbe",), None, lambda c, g: NA),
    ("retired_pages.double_bit.count", ("retired_pages.dbe",), None, lambda c, g: NA),
    ("retired_pages.pending", (), None, lambda c, g: NA),
    ("temperature.gpu", (), None, lambda c, g: str(g.temperature)),
    # T.Limit is the margin below the slowdown threshold, not an absolute temperature.
    ("temperature.gpu.tlimit", (), None, lambda c, g: str(g.model["temperature"]["slowdown"] - g.temperature)),
    ("temperature.memory", (), None, lambda c, g: NA if g.model["temperature"]["memory_idle"] is None
     else str(g.model["temperature"]["memory_idle"] + (10 if g.busy else 0))),
    ("power.management", (), None, lambda c, g: "Enabled"),
    ("power.draw", (), "W", lambda c, g: _watts(g.power_draw)),
    ("power.draw.average", (), "W", lambda c, g: _watts(g.power_draw)),
    ("power.draw.instant", (), "W", lambda c, g: _watts(g.power_draw)),
    ("power.limit", (), "W", lambda c, g: _watts(g.power_limit)),
    ("enforced.power.limit", (), "W", lambda c, g: _watts(g.power_limit)),
    ("power.default_limit", (), "W", lambda c, g: _watts(g.power["default_w"])),
    ("power.min_limit", (), "W", lambda c, g: _watts(g.power["min_w"])),
    ("power.max_limit", (), "W", lambda c, g: _watts(g.power["max_w"])),
    ("module.power.draw.average", (), "W", lambda c, g: NA),
    ("module.power.draw.instant", (), "W", lambda c, g: NA),
    ("module.power.limit", (), "W", lambda c, g: NA),
    ("module.enforced.power.limit", (), "W", lambda c, g: NA),
    ("module.power.default_limit", (), "W", lambda c, g: NA),
    ("module.power.min_limit", (), "W", lambda c, g: NA),
    ("module.power.max_limit", (), "W", lambda c, g: NA),
    ("clocks.current.graphics", ("clocks.gr",), "MHz", lambda c, g: str(g.current_clocks[0])),
    ("clocks.current.sm", ("clocks.sm",), "MHz", lambda c, g: str(g.current_clocks[1])),
    ("clocks.current.memory", ("clocks.mem",), "MHz", lambda c, g: str(g.current_clocks[2])),
    ("clocks.current.video", ("clocks.video",), "MHz", lambda c, g: str(g.current_clocks[3])),
    ("clocks.applications.graphics", ("clocks.applications.gr",), "MHz", lambda c, g: str(g.app_clocks[1])),
    ("clocks.applications.memory", ("clocks.applications.mem",), "MHz", lambda c, g: str(g.app_clocks[0])),
    ("clocks.default_applications.graphics", ("clocks.default_applications.gr",), "MHz",
     lambda c, g: str(g.clocks["default_app_graphics"])),
    ("clocks.default_applications.memory", ("clocks.default_applications.mem",), "MHz",
     lambda c, g: str(g.clocks["default_app_memory"])),
    ("clocks.max.graphics", ("clocks.max.gr",), "MHz", lambda c, g: str(g.clocks["max_graphics"])),
    ("clocks.max.sm", (), "MHz", lambda c, g: str(g.clocks["max_sm"])),
    ("clocks.max.memory", ("clocks.max.mem",), "MHz", lambda c, g: str(g.clocks["max_memory"])),
    ("mig.mode.current", (), None, lambda c, g: _mig_mode(g, False)),
    ("mig.mode.pending", (), None, lambda c, g: _mig_mode(g, True)),
    ("fabric.state", (), None, lambda c, g: _fabric(g, c, "state")),
    ("fabric.status", (), None, lambda c, g: _fabric(g, c, "status")),
]

for _family in ("clocks_event_reasons", "clocks_throttle_reasons"):
    GPU_FIELDS.append((_family + ".supported", (), None, lambda c, g: "0x00000000000001FF"))
    GPU_FIELDS.append((_family + ".active", (), None, lambda c, g: _reason_mask(g)))
    for _reason, _getter in REASONS:
        GPU_FIELDS.append(("%s.%s" % (_family, _reason), (), None,
                           lambda c, g, _f=_getter: _f(g)))

for _kind in ("corrected", "uncorrected"):
    for _scope in ("volatile", "aggregate"):
        for _where in ("device_memory", "dram", "sram", "register_file", "l1_cache", "l2_cache",
                       "texture_memory", "cbu", "total"):
            GPU_FIELDS.append(("ecc.errors.%s.%s.%s" % (_kind, _scope, _where), (), None,
                               lambda c, g: _ecc_counter(g)))

APP_FIELDS = [
    ("timestamp", (), None, lambda c, g, p: _csv_time(c)),
    ("gpu_name", (), None, lambda c, g, p: g.product_name),
    ("gpu_bus_id", (), None, lambda c, g, p: g.bus_id),
    ("gpu_serial", (), None, lambda c, g, p: g.serial),
    ("gpu_uuid", (), None, lambda c, g, p: g.uuid),
    ("pid", (), None, lambda c, g, p: str(p["pid"])),
    ("process_name", ("name",), None, lambda c, g, p: p.get("name", "")),
    ("used_gpu_memory", ("used_memory",), "MiB", lambda c, g, p: _mem(p.get("used_memory", 0))),
]

REMAPPED_FIELDS = [
    ("timestamp", (), None, lambda c, g, p: _csv_time(c)),
    ("gpu_name", (), None, lambda c, g, p: g.product_name),
    ("gpu_bus_id", (), None, lambda c, g, p: g.bus_id),
    ("gpu_serial", (), None, lambda c, g, p: g.serial),
    ("gpu_uuid", (), None, lambda c, g, p: g.uuid),
    ("remapped_rows.correctable", (), None, lambda c, g, p: _remap(g, "0")),
    ("remapped_rows.uncorrectable", (), None, lambda c, g, p: _remap(g, "0")),
    ("remapped_rows.pending", (), None, lambda c, g, p: _remap(g, "0")),
    ("remapped_rows.failure", (), None, lambda c, g, p: _remap(g, "0")),
]

CLOCK_FIELDS = [
    ("timestamp", (), None, lambda c, g, p: _csv_time(c)),
    ("gpu_name", (), None, lambda c, g, p: g.product_name),
    ("gpu_bus_id", (), None, lambda c, g, p: g.bus_id),
    ("gpu_serial", (), None, lambda c, g, p: g.serial),
    ("gpu_uuid", (), None, lambda c, g, p: g.uuid),
    ("memory", ("mem",), "MHz", lambda c, g, p: str(p[0])),
    ("graphics", ("gr",), "MHz", lambda c, g, p: str(p[1])),
]


def _remap(gpu, value):
    return value if gpu.remapped_rows["supported"] else NA


def _csv_time(ctx):
    millis = int((ctx.now - int(ctx.now)) * 1000)
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(ctx.now)) + ".%03d" % millis


def _resolve(table, requested):
    index = {}
    for entry in table:
        index[entry[0].lower()] = entry
        for alias in entry[1]:
            index[alias.lower()] = entry
    chosen = []
    for name in requested.split(","):
        name = name.strip()
        if not name:
            continue
        entry = index.get(name.lower())
        if entry is None:
            return None, name
        chosen.append(entry)
    return chosen, None


def _parse_format(spec):
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts or parts[0] != "csv" or any(p not in ("noheader", "nounits") for p in parts[1:]):
        return None
    return {"header": "noheader" not in parts, "units": "nounits" not in parts}


def _cell(value, unit, units):
    if value is NA:
        return "[N/A]"
    if value is NOT_SUPPORTED:
        return "[Not Supported]"
    if unit and units:
        return "%s %s" % (value, unit)
    return value


def _emit(ctx, fields, rows, fmt):
    if fmt["header"]:
        ctx.write(", ".join(name + (" [%s]" % unit if unit else "") for name, _a, unit, _g in fields) + "\n")
    for row in rows:
        ctx.write(", ".join(_cell(value, unit, fmt["units"])
                            for value, (_n, _a, unit, _g) in zip(row, fields)) + "\n")


def run(ctx, chosen, kind, requested, format_spec):
    from nvsim.smi import INVALID_COMBINATION, RC_INVALID, RC_OK
    fmt = _parse_format(format_spec)
    if fmt is None:
        ctx.write(INVALID_COMBINATION)
        return RC_INVALID
    table = {"query_gpu": GPU_FIELDS, "query_apps": APP_FIELDS,
             "query_remapped": REMAPPED_FIELDS, "query_clocks": CLOCK_FIELDS}[kind]
    fields, bad = _resolve(table, requested)
    if fields is None or not fields:
        ctx.write('Field "%s" is not a valid field to query.\n\n' % (bad or requested))
        return RC_INVALID
    rows = []
    if kind == "query_gpu":
        rows = [[getter(ctx, gpu) for _n, _a, _u, getter in fields] for gpu in chosen]
    else:
        for gpu in chosen:
            if kind == "query_apps":
                items = gpu.processes
            elif kind == "query_clocks":
                items = gpu.supported_clock_pairs()
            else:
                items = [None]
            for item in items:
                rows.append([getter(ctx, gpu, item) for _n, _a, _u, getter in fields])
    _emit(ctx, fields, rows, fmt)
    return RC_OK
