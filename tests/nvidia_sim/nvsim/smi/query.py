# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``--query-gpu`` / ``--query-compute-apps`` / ``--query-remapped-rows`` /
``--query-supported-clocks`` with ``--format=csv[,noheader][,nounits]``.

Headers use the canonical field name (an alias such as ``gpu_name`` is
reported as ``name``) followed by the unit in brackets, as the real tool
does; ``nounits`` drops the units from the values only.

Which fields a branch knows: a field is accepted from the first branch with
evidence for it, the real 535 and 550 binaries (the field names they carry)
or the 590-610 captures (every field of ``--help-query-gpu``, corpus
query-gpu/).  No value: ``[N/A]``; from 590 as the captures print it,
``N/A`` without brackets for ``temperature.memory`` and ``fabric.*``,
``[Requested functionality has been deprecated]`` for ``display_mode``
(from 580, as the XML), ``power.management`` and the application clocks, and
an empty cell for ``platform.chassis_serial_number``.  In MIG mode the
utilisation and remapped-row fields are ``[N/A]``.
"""

import time

NA = object()
NA_BARE = object()
NOT_SUPPORTED = object()
DEPRECATED = object()
EMPTY = object()

SPELLINGS = {NA: "[N/A]", NA_BARE: "N/A", NOT_SUPPORTED: "[Not Supported]",
             DEPRECATED: "[Requested functionality has been deprecated]", EMPTY: ""}


def _enabled(flag):
    return "Enabled" if flag else "Disabled"


def _active(flag):
    return "Active" if flag else "Not Active"


def _na(ctx):
    """The plain "no value" of a field that 590 prints without brackets."""
    return NA_BARE if ctx.branch >= 590 else NA


def _ecc_counter(ctx, gpu):
    if not gpu.ecc_supported:
        return NA if ctx.branch >= 590 else NOT_SUPPORTED
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
        return _na(ctx)
    from nvsim import env
    running = env.fabricmanager_running()
    if what == "state":
        return "Completed" if running else "Not Started"
    if what == "status":
        return "Success" if running else _na(ctx)
    if what == "cliqueId":
        return "0" if running else _na(ctx)
    if what == "clusterUuid":
        return "00000000-0000-0000-0000-000000000000" if running else _na(ctx)
    return _na(ctx)


def _utilization(gpu, value=None):
    if gpu.mig_current:
        return NA
    return str(gpu.utilization) if value is None else value


def _remapped(ctx, gpu, value):
    """A remapped-rows value: [N/A] without row remapping and in MIG mode."""
    if not gpu.remapped_rows["supported"] or gpu.mig_current:
        return NA
    return value


def _from(branch, old, new):
    """A getter returning ``new`` from ``branch`` on, else ``old``."""
    return lambda c, g: new(c, g) if c.branch >= branch else old(c, g)


def _mem(value):
    return str(int(value))


def _watts(value):
    return "%.2f" % value


def _temperature_memory(ctx, gpu):
    idle = gpu.model["temperature"]["memory_idle"]
    if idle is None:
        return _na(ctx)
    return str(idle + (10 if gpu.busy else 0))


def _gsp(ctx, gpu):
    from nvsim import env
    return _enabled(gpu.model["gsp_firmware"] and env.module_flavour() != "proprietary")


def _deprecated_from(branch, getter):
    return _from(branch, getter, lambda c, g: DEPRECATED)


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


def _na_getter(_ctx, _gpu):
    return NA


def field(name, getter=_na_getter, unit=None, aliases=(), since=0):
    """A --query-gpu field: (canonical name, aliases, unit, getter(ctx, gpu), first branch)."""
    return (name, tuple(aliases), unit, getter, since)


# In the order of --help-query-gpu (610), legacy names at the end.
GPU_FIELDS = [
    field("timestamp", lambda c, g: _csv_time(c)),
    field("driver_version", lambda c, g: c.driver_version),
    field("kmd_version", lambda c, g: c.driver_version, since=595),
    field("vgpu_driver_capability.heterogenous_multivGPU"),
    field("count", lambda c, g: str(len(c.gpus))),
    field("name", lambda c, g: g.product_name, aliases=("gpu_name",)),
    field("serial", lambda c, g: g.serial, aliases=("gpu_serial",)),
    field("uuid", lambda c, g: g.uuid, aliases=("gpu_uuid",)),
    field("pci.bus_id", lambda c, g: g.bus_id, aliases=("gpu_bus_id",)),
    field("pci.domain", lambda c, g: "0x" + g.pci_domain),
    field("pci.bus", lambda c, g: "0x" + g.pci_bus),
    field("pci.device", lambda c, g: "0x" + g.pci_device),
    field("pci.baseClass", lambda c, g: "0x%X" % int(g.pci_class[2:4], 16), since=550),
    field("pci.subClass", lambda c, g: "0x%X" % int(g.pci_class[4:6], 16), since=550),
    field("pci.device_id", lambda c, g: g.pci_device_id),
    field("pci.sub_device_id", lambda c, g: g.pci_subsystem_id),
    field("vgpu_device_capability.fractional_multiVgpu"),
    field("vgpu_device_capability.heterogeneous_timeSlice_profile"),
    field("vgpu_device_capability.heterogeneous_timeSlice_sizes"),
    field("vgpu_device_capability.homogeneous_placements", since=590),
    field("vgpu_device_capability.mig_timeSlicing", since=590),
    field("vgpu_device_capability.mig_timeSlicing_mode", since=590),
    field("pcie.link.gen.current", lambda c, g: str(g.pcie["current_gen"])),
    field("pcie.link.gen.gpucurrent", lambda c, g: str(g.pcie["current_gen"])),
    field("pcie.link.gen.max", lambda c, g: str(min(g.pcie["max_gen"], g.pcie["host_max_gen"]))),
    field("pcie.link.gen.gpumax", lambda c, g: str(g.pcie["max_gen"])),
    field("pcie.link.gen.hostmax", lambda c, g: str(g.pcie["host_max_gen"])),
    field("pcie.link.width.current", lambda c, g: str(g.pcie["current_width"])),
    field("pcie.link.width.max", lambda c, g: str(g.pcie["max_width"])),
    field("index", lambda c, g: str(g.index)),
    field("display_mode", _deprecated_from(580, lambda c, g: "Disabled")),
    field("display_attached", lambda c, g: "No", since=590),
    field("display_active", lambda c, g: "Disabled"),
    field("persistence_mode", lambda c, g: _enabled(g.persistence)),
    field("addressing_mode", lambda c, g: "None"),
    field("accounting.mode", lambda c, g: "Disabled"),
    field("accounting.buffer_size", lambda c, g: "4000"),
    field("driver_model.current"),
    field("driver_model.pending"),
    field("vbios_version", lambda c, g: g.vbios_version),
    field("inforom.img", lambda c, g: g.inforom["img"], aliases=("inforom.image",)),
    field("inforom.oem", lambda c, g: g.inforom["oem"]),
    field("inforom.ecc", lambda c, g: g.inforom["ecc"]),
    field("inforom.pwr", lambda c, g: NA if g.inforom["pwr"] == "N/A" else g.inforom["pwr"],
          aliases=("inforom.power",)),
    field("inforom.checksum_validation", lambda c, g: "valid", since=590),
    field("gpu_recovery_action", lambda c, g: "None", since=590),
    field("gom.current", aliases=("gpu_operation_mode.current",)),
    field("gom.pending", aliases=("gpu_operation_mode.pending",)),
    field("fan.speed", lambda c, g: NA if g.fan_percent is None else str(g.fan_percent), "%"),
    field("pstate", lambda c, g: g.pstate),
]
for _family, _since in (("clocks_event_reasons", 0), ("clocks_throttle_reasons", 0)):
    GPU_FIELDS.append(field(_family + ".supported", lambda c, g: "0x00000000000001FF", since=_since))
    GPU_FIELDS.append(field(_family + ".active", lambda c, g: _reason_mask(g), since=_since))
    for _reason, _getter in REASONS:
        GPU_FIELDS.append(field("%s.%s" % (_family, _reason), lambda c, g, _f=_getter: _f(g), since=_since))
for _counter in ("sw_power_cap", "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
                 "hw_power_brake_slowdown"):
    GPU_FIELDS.append(field("clocks_event_reasons_counters." + _counter, lambda c, g: "0", "us", since=590))
GPU_FIELDS += [
    field("memory.total", lambda c, g: _mem(g.memory["total_mib"]), "MiB"),
    field("memory.reserved", lambda c, g: _mem(g.memory["reserved_mib"]), "MiB"),
    field("memory.used", lambda c, g: _mem(g.memory_used), "MiB"),
    field("memory.free", lambda c, g: _mem(g.memory_free), "MiB"),
    field("compute_mode", lambda c, g: g.compute_mode),
    field("compute_cap", lambda c, g: g.compute_cap),
    field("utilization.gpu", lambda c, g: _utilization(g), "%"),
    field("utilization.memory", lambda c, g: _utilization(g), "%"),
    field("utilization.encoder", lambda c, g: _utilization(g, "0"), "%"),
    field("utilization.decoder", lambda c, g: _utilization(g, "0"), "%"),
    field("utilization.jpeg", lambda c, g: _utilization(g, "0"), "%"),
    field("utilization.ofa", lambda c, g: _utilization(g, "0"), "%"),
    field("encoder.stats.sessionCount", lambda c, g: "0"),
    field("encoder.stats.averageFps", lambda c, g: "0"),
    field("encoder.stats.averageLatency", lambda c, g: "0"),
    field("dramEncryption.mode.current", since=590),
    field("dramEncryption.mode.pending", since=590),
    field("ecc.mode.current", lambda c, g: _enabled(g.ecc_current) if g.ecc_supported else NA),
    field("ecc.mode.pending", lambda c, g: _enabled(g.ecc_pending) if g.ecc_supported else NA),
]
for _kind in ("corrected", "uncorrected"):
    for _scope in ("volatile", "aggregate"):
        for _where in ("device_memory", "dram", "register_file", "l1_cache", "l2_cache", "texture_memory", "cbu",
                       "sram", "total"):
            GPU_FIELDS.append(field("ecc.errors.%s.%s.%s" % (_kind, _scope, _where), _ecc_counter))
for _name in ("volatile.sram.parity", "volatile.sram.secded", "aggregate.sram.parity", "aggregate.sram.secded"):
    GPU_FIELDS.append(field("ecc.errors.uncorrected." + _name, _ecc_counter, since=590))
GPU_FIELDS.append(field("ecc.errors.uncorrected.aggregate.sram.thresholdExceeded",
                        lambda c, g: "No" if _ecc_counter(c, g) == "0" else NA, since=590))
for _name in ("l2", "sm", "mcu", "pcie", "other"):
    GPU_FIELDS.append(field("ecc.errors.uncorrected.aggregate.sram." + _name, _ecc_counter, since=590))
GPU_FIELDS += [
    field("retired_pages.single_bit_ecc.count", aliases=("retired_pages.sbe",)),
    field("retired_pages.double_bit.count", aliases=("retired_pages.dbe",)),
    field("retired_pages.pending"),
    field("remapped_rows.correctable", lambda c, g: _remapped(c, g, "0"), since=590),
    field("remapped_rows.correctable_inactive", lambda c, g: _remapped(c, g, "0"), since=595),
    field("remapped_rows.uncorrectable", lambda c, g: _remapped(c, g, "0"), since=590),
    field("remapped_rows.uncorrectable_inactive", lambda c, g: _remapped(c, g, "0"), since=595),
    field("remapped_rows.pending", lambda c, g: _remapped(c, g, "No"), since=590),
    field("remapped_rows.failure", lambda c, g: _remapped(c, g, "No"), since=590),
    field("remapped_rows.histogram.max", lambda c, g: _remapped(c, g, str(g.remapped_rows["histogram_max"])),
          since=590),
]
for _level in ("high", "partial", "low", "none"):
    GPU_FIELDS.append(field("remapped_rows.histogram." + _level, lambda c, g: _remapped(c, g, "0"), since=590))
GPU_FIELDS += [
    field("temperature.gpu", lambda c, g: str(g.temperature)),
    # T.Limit is the margin below the slowdown threshold, not an absolute temperature.
    field("temperature.gpu.tlimit", lambda c, g: str(g.model["temperature"]["slowdown"] - g.temperature)),
    field("temperature.memory", _temperature_memory),
    field("power.management", _deprecated_from(590, lambda c, g: "Enabled")),
    field("power.draw", lambda c, g: _watts(g.power_draw), "W"),
    field("power.draw.average", lambda c, g: _watts(g.power_draw), "W"),
    field("power.draw.instant", lambda c, g: _watts(g.power_draw), "W"),
    field("power.limit", lambda c, g: _watts(g.power_limit), "W"),
    field("enforced.power.limit", lambda c, g: _watts(g.power_limit), "W"),
    field("power.default_limit", lambda c, g: _watts(g.power["default_w"]), "W"),
    field("power.min_limit", lambda c, g: _watts(g.power["min_w"]), "W"),
    field("power.max_limit", lambda c, g: _watts(g.power["max_w"]), "W"),
]
for _name in ("power.draw.average", "power.draw.instant", "power.limit", "enforced.power.limit", "power.default_limit",
              "power.min_limit", "power.max_limit"):
    GPU_FIELDS.append(field("module." + _name, unit="W", since=590))
for _name in ("current", "requested", "default", "min", "max"):
    GPU_FIELDS.append(field("gpu.base." + _name, unit="W", since=610))
# Power smoothing: (name, unit, first branch); no simulated GPU has it.
for _name, _unit, _since in (
        ("tmp_floor", "W", 610), ("tmp_ceil", "W", 610), ("hw_lifetime_remaining_percent", "%", 610),
        ("enabled", None, 610), ("delayed_power_smoothing_supported", None, 590),
        ("soc_power_smoothing_enabled", None, 610), ("priv_level", None, 610), ("imm_ramp_down", None, 610),
        ("max_percent_tmp_floor", "%", 610), ("min_percent_tmp_floor", "%", 610),
        ("primary_power_floor", "W", 590), ("secondary_power_floor", "W", 590),
        ("min_primary_floor_activation_offset", "W", 590), ("min_primary_floor_activation_point", "W", 590),
        ("window_multiplier", "ms", 590), ("num_preset_profiles", None, 610),
        ("curr_profile.percent_tmp_floor", "%", 610), ("curr_profile.ramp_up_rate", "W/s", 610),
        ("curr_profile.ramp_down_rate", "W/s", 610), ("curr_profile.ramp_down_hysteresis", "ms", 610),
        ("curr_profile.secondary_power_floor", "W", 590), ("curr_profile.primary_floor_act_window_multiplier", None, 590),
        ("curr_profile.primary_floor_tar_window_multiplier", None, 590),
        ("curr_profile.primary_floor_act_offset", "W", 590), ("active_profile", None, 610),
        ("admin_override.percent_tmp_floor", "%", 610), ("admin_override.ramp_up_rate", "W/s", 610),
        ("admin_override.ramp_down_rate", "W/s", 610), ("admin_override.ramp_down_hysteresis", "ms", 610),
        ("admin_override.secondary_power_floor", "W", 590),
        ("admin_override.primary_floor_act_window_multiplier", None, 590),
        ("admin_override.primary_floor_tar_window_multiplier", None, 590),
        ("admin_override.primary_floor_act_offset", "W", 590)):
    GPU_FIELDS.append(field("power_smoothing." + _name, unit=_unit, since=_since))
GPU_FIELDS += [
    field("edpp_multiplier", unit="%", since=590),
    field("clocks.current.graphics", lambda c, g: str(g.current_clocks[0]), "MHz", ("clocks.gr",)),
    field("clocks.current.sm", lambda c, g: str(g.current_clocks[1]), "MHz", ("clocks.sm",)),
    field("clocks.current.memory", lambda c, g: str(g.current_clocks[2]), "MHz", ("clocks.mem",)),
    field("clocks.current.video", lambda c, g: str(g.current_clocks[3]), "MHz", ("clocks.video",)),
    field("clocks.applications.graphics", _deprecated_from(590, lambda c, g: str(g.app_clocks[1])), "MHz",
          ("clocks.applications.gr",)),
    field("clocks.applications.memory", _deprecated_from(590, lambda c, g: str(g.app_clocks[0])), "MHz",
          ("clocks.applications.mem",)),
    field("clocks.default_applications.graphics",
          _deprecated_from(590, lambda c, g: str(g.clocks["default_app_graphics"])), "MHz",
          ("clocks.default_applications.gr",)),
    field("clocks.default_applications.memory",
          _deprecated_from(590, lambda c, g: str(g.clocks["default_app_memory"])), "MHz",
          ("clocks.default_applications.mem",)),
    field("clocks.max.graphics", lambda c, g: str(g.clocks["max_graphics"]), "MHz", ("clocks.max.gr",)),
    field("clocks.max.sm", lambda c, g: str(g.clocks["max_sm"]), "MHz"),
    field("clocks.max.memory", lambda c, g: str(g.clocks["max_memory"]), "MHz", ("clocks.max.mem",)),
    field("mig.mode.current", lambda c, g: _mig_mode(g, False)),
    field("mig.mode.pending", lambda c, g: _mig_mode(g, True)),
    field("gsp.mode.current", _gsp),
    field("gsp.mode.default", _gsp),
    field("c2c.mode", lambda c, g: "Disabled", since=550),
    field("protected_memory.total", lambda c, g: "0", "MiB"),
    field("protected_memory.used", lambda c, g: "0", "MiB"),
    field("protected_memory.free", lambda c, g: "0", "MiB"),
    field("fabric.state", lambda c, g: _fabric(g, c, "state")),
    field("fabric.status", lambda c, g: _fabric(g, c, "status")),
    field("fabric.cliqueId", lambda c, g: _fabric(g, c, "cliqueId"), since=550),
    field("fabric.clusterUuid", lambda c, g: _fabric(g, c, "clusterUuid"), since=550),
    field("fabric.health.summary", lambda c, g: _na(c), since=590),
    field("fabric.health.bandwidth", lambda c, g: _na(c), since=550),
]
for _name, _since in (("route_recovery_in_progress", 590), ("route_unhealthy", 590),
                      ("access_timeout_recovery", 590), ("incorrect_configuration", 590),
                      ("partition_assigned", 595)):
    GPU_FIELDS.append(field("fabric.health." + _name, lambda c, g: _na(c), since=_since))
GPU_FIELDS += [
    field("platform.chassis_serial_number", lambda c, g: EMPTY, since=590),
    field("platform.slot_number", lambda c, g: "0", since=590),
    field("platform.tray_index", lambda c, g: "0", since=590),
    field("platform.host_id", lambda c, g: "1", since=590),
    field("platform.peer_type", lambda c, g: "Direct Connected", since=590),
    field("platform.module_id", lambda c, g: str(g.module_id), since=590),
    field("platform.gpu_fabric_guid", lambda c, g: "0x0000000000000000", since=590),
    field("hostname", since=590),
    field("bbx.time_run", unit="seconds", since=610),
]


def fields_for(branch, table=None):
    """The fields (and aliases) a driver branch accepts."""
    return [entry for entry in (table or GPU_FIELDS) if branch >= entry[4]]


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
    ("remapped_rows.correctable", (), None, lambda c, g, p: _remapped(c, g, "0")),
    ("remapped_rows.uncorrectable", (), None, lambda c, g, p: _remapped(c, g, "0")),
    ("remapped_rows.pending", (), None, lambda c, g, p: _remapped(c, g, "0")),
    ("remapped_rows.failure", (), None, lambda c, g, p: _remapped(c, g, "0")),
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
APP_FIELDS = [entry + (0,) for entry in APP_FIELDS]
REMAPPED_FIELDS = [entry + (0,) for entry in REMAPPED_FIELDS]
CLOCK_FIELDS = [entry + (0,) for entry in CLOCK_FIELDS]


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
    """{"header", "units"}, or the real tool's complaint about the modifiers."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if "csv" not in parts:
        return "csv"
    if any(p not in ("csv", "noheader", "nounits") for p in parts):
        return "modifier"
    return {"header": "noheader" not in parts, "units": "nounits" not in parts}


def _cell(value, unit, units):
    if value in SPELLINGS:
        return SPELLINGS[value]
    if unit and units:
        return "%s %s" % (value, unit)
    return value


def _emit(ctx, fields, rows, fmt):
    if fmt["header"]:
        ctx.write(", ".join(entry[0] + (" [%s]" % entry[2] if entry[2] else "") for entry in fields) + "\n")
    for row in rows:
        ctx.write(", ".join(_cell(value, entry[2], fmt["units"]) for value, entry in zip(row, fields)) + "\n")


def run(ctx, chosen, kind, requested, format_spec):
    from nvsim.smi.common import ERR_BAD_FIELD, ERR_FORMAT_CSV, ERR_FORMAT_MODIFIER, RC_INVALID, RC_OK
    fmt = _parse_format(format_spec)
    if not isinstance(fmt, dict):
        ctx.write(ERR_FORMAT_CSV if fmt == "csv" else ERR_FORMAT_MODIFIER)
        return RC_INVALID
    table = {"query_gpu": GPU_FIELDS, "query_apps": APP_FIELDS,
             "query_remapped": REMAPPED_FIELDS, "query_clocks": CLOCK_FIELDS}[kind]
    fields, bad = _resolve(fields_for(ctx.branch, table), requested)
    if fields is None or not fields:
        ctx.write(ERR_BAD_FIELD % (bad or requested))
        return RC_INVALID
    rows = []
    if kind == "query_gpu":
        rows = [[entry[3](ctx, gpu) for entry in fields] for gpu in chosen]
    else:
        for gpu in chosen:
            if kind == "query_apps":
                items = gpu.processes
            elif kind == "query_clocks":
                items = gpu.supported_clock_pairs()
            else:
                items = [None]
            for item in items:
                rows.append([entry[3](ctx, gpu, item) for entry in fields])
    _emit(ctx, fields, rows, fmt)
    return ctx.handle_rc or RC_OK
