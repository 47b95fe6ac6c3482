# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-smi -q`` (text), ``-q -x`` (XML) and ``-q -d SECTION``.

One tree per GPU feeds both renderers, so the text and XML reports can never
disagree.  Layout follows the driver branch: the label column is 42 wide up
to r575 and 55 wide from r580; power readings switch from "Power Draw" to
average/instantaneous at r550 (the DTD the 550 binary embeds); the DTD is
nvsmi_device_v12 up to r580 and v13 from r590.
"""

from nvsim import env, profiles

NA = "N/A"


class Node(object):
    __slots__ = ("label", "tag", "value", "kids", "text", "xml")

    def __init__(self, label, tag, value=None, kids=None, text=True, xml=True):
        self.label = label
        self.tag = tag
        self.value = value
        self.kids = kids
        self.text = text
        self.xml = xml


def leaf(label, tag, value, text=True, xml=True):
    return Node(label, tag, "%s" % value, None, text, xml)


def group(label, tag, kids, text=True, xml=True, value=None):
    return Node(label, tag, value, kids, text, xml)


# -d SECTION -> top-level tags it shows.
SECTIONS = {
    "MEMORY": ("fb_memory_usage", "bar1_memory_usage", "cc_protected_memory_usage"),
    "UTILIZATION": ("utilization", "encoder_stats", "fbc_stats"),
    "ECC": ("ecc_mode", "ecc_errors"),
    "TEMPERATURE": ("temperature",),
    "POWER": ("gpu_power_readings", "gpu_memory_power_readings", "module_power_readings",
              "power_smoothing", "power_profiles"),
    "CLOCK": ("clocks", "applications_clocks", "default_applications_clocks", "deferred_clocks",
              "max_clocks", "max_customer_boost_clocks", "clock_policy"),
    "COMPUTE": ("compute_mode",),
    "PIDS": ("processes",),
    "PERFORMANCE": ("performance_state", "clocks_event_reasons", "clocks_throttle_reasons",
                    "clocks_event_reasons_counters"),
    "SUPPORTED_CLOCKS": ("supported_clocks",),
    "PAGE_RETIREMENT": ("retired_pages",),
    "ACCOUNTING": ("accounting_mode", "accounting_mode_buffer_size", "accounted_processes"),
    "ROW_REMAPPER": ("remapped_rows",),
    "RESET_STATUS": ("gpu_reset_status", "gpu_recovery_action"),
}

# nvsmi_device_v12.dtd up to 580: the 535 and 550 binaries embed v12, the 570
# captures name it; v13 in every 590/595 capture.  No public 575/580 capture.
DTD_V13_FROM = 590

# Marks the process block, which keeps the old 42-column layout on every branch.
FIXED_WIDTH = object()


def _en(flag):
    return "Enabled" if flag else "Disabled"


def _mib(value):
    return "%d MiB" % value


def _mhz(value):
    return "%d MHz" % value


def _watt(value):
    return "%.2f W" % value


def _temp(value):
    return NA if value is None else "%d C" % value


def _ecc_value(gpu):
    return "0" if gpu.ecc_supported and gpu.ecc_current else NA


def _memory_usage(total, reserved, used):
    return [leaf("Total", "total", _mib(total)), leaf("Reserved", "reserved", _mib(reserved)),
            leaf("Used", "used", _mib(used)), leaf("Free", "free", _mib(max(0, total - reserved - used)))]


def _bar1(total, used):
    return [leaf("Total", "total", _mib(total)), leaf("Used", "used", _mib(used)),
            leaf("Free", "free", _mib(total - used))]


def _mig_device_nodes(ctx, gpu):
    devices = profiles.mig_devices(gpu)
    if not devices:
        return [group("MIG Devices", "mig_devices", [], text=False, value="None")]
    nodes = []
    for device in devices:
        profile = device["profile"]
        share = float(device["ci"]["slices"]) / profile["compute_slices"]
        used = profiles.mig_device_used(gpu, device["gi"])
        nodes.append(group("MIG Device", "mig_device", [
            leaf("Index", "index", device["index"]),
            leaf("GPU Instance ID", "gpu_instance_id", device["gi"]["id"]),
            leaf("Compute Instance ID", "compute_instance_id", device["ci"]["id"]),
            group("Device Attributes", "device_attributes", [group("Shared", "shared", [
                leaf("Multiprocessor count", "multiprocessor_count", int(profile["sm"] * share)),
                leaf("Copy Engine count", "copy_engine_count", profile["ce"]),
                leaf("Encoder count", "encoder_count", profile["enc"]),
                leaf("Decoder count", "decoder_count", profile["dec"]),
                leaf("OFA count", "ofa_count", profile["ofa"]),
                leaf("JPG count", "jpg_count", profile["jpeg"]),
            ])]),
            group("ECC Errors", "ecc_error_count", [group("Volatile", "volatile_count", [
                leaf("SRAM Uncorrectable", "sram_uncorrectable", _ecc_value(gpu))])]),
            group("FB Memory Usage", "fb_memory_usage", _memory_usage(profile["memory_mib"], 0, used)),
            group("BAR1 Memory Usage", "bar1_memory_usage", _bar1(gpu.mig["bar1_mib"], 0)),
        ], text=True, xml=True))
    return [group(None, "mig_devices", nodes, text=False)] + [
        Node(n.label, n.tag, n.value, n.kids, True, False) for n in nodes]


def _pci(ctx, gpu):
    pcie = gpu.pcie
    kids = [
        leaf("Bus", "pci_bus", "0x" + gpu.pci_bus, xml=False),
        leaf(None, "pci_bus", gpu.pci_bus, text=False),
        leaf("Device", "pci_device", "0x" + gpu.pci_device, xml=False),
        leaf(None, "pci_device", gpu.pci_device, text=False),
        leaf("Domain", "pci_domain", "0x" + gpu.pci_domain, xml=False),
        leaf(None, "pci_domain", gpu.pci_domain, text=False),
    ]
    if ctx.branch >= 550:
        kids += [leaf("Base Classcode", "pci_base_class", "0x3", xml=False),
                 leaf(None, "pci_base_class", "3", text=False),
                 leaf("Sub Classcode", "pci_sub_class", "0x2", xml=False),
                 leaf(None, "pci_sub_class", "2", text=False)]
    kids += [
        leaf("Device Id", "pci_device_id", gpu.pci_device_id, xml=False),
        leaf(None, "pci_device_id", gpu.pci_device_id[2:], text=False),
        leaf("Bus Id", "pci_bus_id", gpu.bus_id),
        leaf("Sub System Id", "pci_sub_system_id", gpu.pci_subsystem_id, xml=False),
        leaf(None, "pci_sub_system_id", gpu.pci_subsystem_id[2:], text=False),
        group("GPU Link Info", "pci_gpu_link_info", [
            group("PCIe Generation", "pcie_gen", [
                leaf("Max", "max_link_gen", min(pcie["max_gen"], pcie["host_max_gen"])),
                leaf("Current", "current_link_gen", pcie["current_gen"]),
                leaf("Device Current", "device_current_link_gen", pcie["current_gen"]),
                leaf("Device Max", "max_device_link_gen", pcie["max_gen"]),
                leaf("Host Max", "max_host_link_gen", pcie["host_max_gen"]),
            ]),
            group("Link Width", "link_widths", [
                leaf("Max", "max_link_width", "%dx" % pcie["max_width"]),
                leaf("Current", "current_link_width", "%dx" % pcie["current_width"]),
            ]),
        ]),
        group("Bridge Chip", "pci_bridge_chip", [leaf("Type", "bridge_chip_type", NA),
                                                 leaf("Firmware", "bridge_chip_fw", NA)]),
        leaf("Replays Since Reset", "replay_counter", 0),
        leaf("Replay Number Rollovers", "replay_rollover_counter", 0),
        leaf("Tx Throughput", "tx_util", "%d KB/s" % (4000 if gpu.busy else 0)),
        leaf("Rx Throughput", "rx_util", "%d KB/s" % (4000 if gpu.busy else 0)),
    ]
    # Inbound first up to 550 (the DTDs of the 535 and 550 binaries), outbound first from 570 (captures).
    atomic = [leaf("Atomic Caps Inbound", "atomic_caps_inbound", NA),
              leaf("Atomic Caps Outbound", "atomic_caps_outbound", NA)]
    kids += atomic[::-1] if ctx.branch >= 570 else atomic
    return group("PCI", "pci", kids)


def _event_reasons(ctx, gpu):
    family = "clocks_event_reason" if ctx.branch >= 535 else "clocks_throttle_reason"
    label = "Clocks Event Reasons" if ctx.branch >= 535 else "Clocks Throttle Reasons"
    idle = "Not Active" if gpu.busy else "Active"
    names = [("Idle", "gpu_idle", idle), ("Applications Clocks Setting", "applications_clocks_setting", "Not Active"),
             ("SW Power Cap", "sw_power_cap", "Not Active"), ("HW Slowdown", "hw_slowdown", "Not Active"),
             ("    HW Thermal Slowdown", "hw_thermal_slowdown", "Not Active"),
             ("    HW Power Brake Slowdown", "hw_power_brake_slowdown", "Not Active"),
             ("Sync Boost", "sync_boost", "Not Active"), ("SW Thermal Slowdown", "sw_thermal_slowdown", "Not Active"),
             ("Display Clock Setting", "display_clocks_setting", "Not Active")]
    nodes = [group(label, family + "s", [leaf(text, "%s_%s" % (family, tag), value) for text, tag, value in names])]
    if ctx.branch >= 580:
        prefix = "clocks_event_reasons_counters_"
        nodes.append(group("Clocks Event Reasons Counters", "clocks_event_reasons_counters", [
            leaf("SW Power Capping", prefix + "sw_power_cap", "0 us"),
            leaf("Sync Boost", prefix + "sync_boost", "0 us"),
            leaf("SW Thermal Slowdown", prefix + "sw_therm_slowdown", "0 us"),
            leaf("HW Thermal Slowdown", prefix + "hw_therm_slowdown", "0 us"),
            leaf("HW Power Braking", prefix + "hw_power_brake", "0 us"),
        ]))
    return nodes


def _ecc_errors(ctx, gpu):
    value = _ecc_value(gpu)
    if ctx.branch < 550:
        names = [("SRAM Correctable", "sram_correctable"), ("SRAM Uncorrectable", "sram_uncorrectable"),
                 ("DRAM Correctable", "dram_correctable"), ("DRAM Uncorrectable", "dram_uncorrectable")]
        return group("ECC Errors", "ecc_errors", [
            group("Volatile", "volatile", [leaf(t, g, value) for t, g in names]),
            group("Aggregate", "aggregate", [leaf(t, g, value) for t, g in names]),
        ])
    names = [("SRAM Correctable", "sram_correctable"), ("SRAM Uncorrectable Parity", "sram_uncorrectable_parity"),
             ("SRAM Uncorrectable SEC-DED", "sram_uncorrectable_secded"), ("DRAM Correctable", "dram_correctable"),
             ("DRAM Uncorrectable", "dram_uncorrectable")]
    threshold = "No" if value == "0" else NA
    kids = [
        group("Volatile", "volatile", [leaf(t, g, value) for t, g in names]),
        group("Aggregate", "aggregate", [leaf(t, g, value) for t, g in names]
              + [leaf("SRAM Threshold Exceeded", "sram_threshold_exceeded", threshold)]),
        group("Aggregate Uncorrectable SRAM Sources", "aggregate_uncorrectable_sram_sources", [
            leaf("SRAM L2", "sram_l2", value), leaf("SRAM SM", "sram_sm", value),
            leaf("SRAM Microcontroller", "sram_microcontroller", value), leaf("SRAM PCIE", "sram_pcie", value),
            leaf("SRAM Other", "sram_other", value)]),
    ]
    if ctx.branch >= 580:
        kids += [leaf("Channel Repair Pending", "channel_repair_pending", "No"),
                 leaf("TPC Repair Pending", "tpc_repair_pending", "No")]
    return group("ECC Errors", "ecc_errors", kids)


def _retired_pages():
    return [
        group("Retired Pages", "retired_pages", [
            leaf("Single Bit ECC", "retired_count", NA),
            leaf("Double Bit ECC", "retired_count", NA),
            leaf("Pending Page Blacklist", "pending_blacklist", NA),
        ], xml=False),
        group(None, "retired_pages", [
            group(None, "multiple_single_bit_retirement", [leaf(None, "retired_count", NA),
                                                           leaf(None, "retired_pagelist", NA)]),
            group(None, "double_bit_retirement", [leaf(None, "retired_count", NA),
                                                  leaf(None, "retired_pagelist", NA)]),
            leaf(None, "pending_blacklist", NA),
            leaf(None, "pending_retirement", NA),
        ], text=False),
    ]


def _remapped_rows(gpu):
    # In MIG mode the real GPUs report the whole block as N/A (A100 510, 535 captures).
    if not gpu.remapped_rows["supported"] or gpu.mig_current:
        return [leaf("Remapped Rows", "remapped_rows", NA)]
    banks = "%d bank(s)"
    return [group("Remapped Rows", "remapped_rows", [
        leaf("Correctable Error", "remapped_row_corr", 0),
        leaf("Uncorrectable Error", "remapped_row_unc", 0),
        leaf("Pending", "remapped_row_pending", "No"),
        leaf("Remapping Failure Occurred", "remapped_row_failure", "No"),
        group("Bank Remap Availability Histogram", "row_remapper_histogram", [
            leaf("Max", "row_remapper_histogram_max", banks % gpu.remapped_rows["histogram_max"]),
            leaf("High", "row_remapper_histogram_high", banks % 0),
            leaf("Partial", "row_remapper_histogram_partial", banks % 0),
            leaf("Low", "row_remapper_histogram_low", banks % 0),
            leaf("None", "row_remapper_histogram_none", banks % 0),
        ]),
    ])]


def _temperature(gpu):
    temp = gpu.model["temperature"]
    memory = None if temp["memory_idle"] is None else temp["memory_idle"] + (10 if gpu.busy else 0)
    return group("Temperature", "temperature", [
        leaf("GPU Current Temp", "gpu_temp", _temp(gpu.temperature)),
        leaf("GPU T.Limit Temp", "gpu_temp_tlimit", NA),
        leaf("GPU Shutdown Temp", "gpu_temp_max_threshold", _temp(temp["shutdown"])),
        leaf("GPU Slowdown Temp", "gpu_temp_slow_threshold", _temp(temp["slowdown"])),
        leaf("GPU Max Operating Temp", "gpu_temp_max_gpu_threshold", _temp(temp["max_operating"])),
        leaf("GPU Target Temperature", "gpu_target_temperature", NA),
        leaf("Memory Current Temp", "memory_temp", _temp(memory)),
        leaf("Memory Max Operating Temp", "gpu_temp_max_mem_threshold", _temp(temp["memory_max_operating"])),
    ])


def _power(ctx, gpu):
    power = gpu.power
    if ctx.branch >= 550:
        draw = [leaf("Average Power Draw", "average_power_draw", _watt(gpu.power_draw)),
                leaf("Instantaneous Power Draw", "instant_power_draw", _watt(gpu.power_draw))]
        module_draw = [leaf("Average Power Draw", "average_power_draw", NA),
                       leaf("Instantaneous Power Draw", "instant_power_draw", NA)]
    else:
        draw = [leaf("Power Draw", "power_draw", _watt(gpu.power_draw))]
        module_draw = [leaf("Power Draw", "power_draw", NA)]
    limits = [("Current Power Limit", "current_power_limit"), ("Requested Power Limit", "requested_power_limit"),
              ("Default Power Limit", "default_power_limit"), ("Min Power Limit", "min_power_limit"),
              ("Max Power Limit", "max_power_limit")]
    values = [gpu.power_limit, gpu.power_limit, power["default_w"], power["min_w"], power["max_w"]]
    state = leaf(None, "power_state", gpu.pstate, text=False)
    nodes = [group("GPU Power Readings", "gpu_power_readings",
                   [state] + draw + [leaf(t, g, _watt(v)) for (t, g), v in zip(limits, values)])]
    if ctx.branch >= 550:
        nodes.append(group("GPU Memory Power Readings ", "gpu_memory_power_readings", list(module_draw)))
    nodes.append(group("Module Power Readings", "module_power_readings",
                       [state] + module_draw + [leaf(t, g, NA) for t, g in limits]))
    if ctx.branch >= 570:
        nodes.append(leaf("Power Smoothing", "power_smoothing", NA))
        nodes.append(group("Workload Power Profiles", "power_profiles", [
            leaf("Requested Profiles", "power_profile_requested_profiles", NA),
            leaf("Enforced Profiles", "power_profile_enforced_profiles", NA)]))
    if ctx.branch >= 590:  # every 590/595 capture
        nodes.append(leaf("EDPp Multiplier", "edpp_multiplier", NA))
    return nodes


def _clocks(ctx, gpu):
    clocks = gpu.clocks
    graphics, sm, memory, video = gpu.current_clocks
    app_memory, app_graphics = gpu.app_clocks
    nodes = [
        group("Clocks", "clocks", [leaf("Graphics", "graphics_clock", _mhz(graphics)),
                                   leaf("SM", "sm_clock", _mhz(sm)), leaf("Memory", "mem_clock", _mhz(memory)),
                                   leaf("Video", "video_clock", _mhz(video))]),
        group("Applications Clocks", "applications_clocks", [
            leaf("Graphics", "graphics_clock", _mhz(app_graphics)), leaf("Memory", "mem_clock", _mhz(app_memory))]),
        group("Default Applications Clocks", "default_applications_clocks", [
            leaf("Graphics", "graphics_clock", _mhz(clocks["default_app_graphics"])),
            leaf("Memory", "mem_clock", _mhz(clocks["default_app_memory"]))]),
        group("Deferred Clocks", "deferred_clocks", [leaf("Memory", "mem_clock", NA)]),
        group("Max Clocks", "max_clocks", [
            leaf("Graphics", "graphics_clock", _mhz(clocks["max_graphics"])),
            leaf("SM", "sm_clock", _mhz(clocks["max_sm"])), leaf("Memory", "mem_clock", _mhz(clocks["max_memory"])),
            leaf("Video", "video_clock", _mhz(clocks["max_video"]))]),
        group("Max Customer Boost Clocks", "max_customer_boost_clocks", [
            leaf("Graphics", "graphics_clock", _mhz(clocks["max_graphics"]))]),
        group("Clock Policy", "clock_policy", [leaf("Auto Boost", "auto_boost", NA),
                                               leaf("Auto Boost Default", "auto_boost_default", NA)]),
    ]
    if ctx.branch < 580:
        nodes.append(group("Voltage", "voltage", [leaf("Graphics", "graphics_volt", NA)]))
    return nodes


def _fabric(ctx, gpu):
    if ctx.profile.get("nvswitches"):
        running = env.fabricmanager_running()
        state, status = ("Completed", "Success") if running else ("Not Started", NA)
    else:
        state, status = NA, NA
    kids = [leaf("State", "state", state), leaf("Status", "status", status)]
    if ctx.branch >= 550:  # (state, status, cliqueId, clusterUuid, health(bandwidth)) in the 550 DTD
        health = []
        if ctx.branch >= 580:
            health.append(leaf("Summary", "summary", NA))
        health.append(leaf("Bandwidth", "bandwidth", NA))
        if ctx.branch >= 570:
            health += [leaf("Route Recovery in progress", "route_recovery_in_progress", NA),
                       leaf("Route Unhealthy", "route_unhealthy", NA),
                       leaf("Access Timeout Recovery", "access_timeout_recovery", NA)]
        if ctx.branch >= 580:
            health.append(leaf("Incorrect Configuration", "incorrect_configuration", NA))
        kids += [leaf("CliqueId", "cliqueId", NA), leaf("ClusterUUID", "clusterUuid", NA),
                 group("Health", "health", health)]
    return group("Fabric", "fabric", kids)


def _supported_clocks(gpu, text):
    entries = []
    current = None
    for memory, graphics in gpu.supported_clock_pairs():
        if memory != current:
            current = memory
            entries.append((memory, []))
        entries[-1][1].append(graphics)
    if text:
        kids = []
        for memory, graphics_list in entries:
            kids.append(group("Memory", None, [leaf("Graphics", None, _mhz(g)) for g in graphics_list],
                              value=_mhz(memory)))
        return group("Supported Clocks", "supported_clocks", kids, xml=False)
    kids = []
    for memory, graphics_list in entries:
        kids.append(group(None, "supported_mem_clock", [leaf(None, "value", _mhz(memory))]
                          + [leaf(None, "supported_graphics_clock", _mhz(g)) for g in graphics_list]))
    return group(None, "supported_clocks", kids, text=False)


def _processes(ctx, gpu):
    if not gpu.processes:
        return [leaf("Processes", "processes", "None", xml=False), group(None, "processes", [], text=False)]
    xml_kids, text_kids = [], []
    for proc in gpu.processes:
        used = _mib(int(proc.get("used_memory", 0)))
        xml_kids.append(group(None, "process_info", [
            leaf(None, "gpu_instance_id", proc.get("gpu_instance_id", NA)),
            leaf(None, "compute_instance_id", proc.get("compute_instance_id", NA)),
            leaf(None, "pid", proc["pid"]), leaf(None, "type", proc.get("type", "C")),
            leaf(None, "process_name", proc.get("name", "")), leaf(None, "used_memory", used)]))
        text_kids += [leaf("GPU instance ID", None, proc.get("gpu_instance_id", NA)),
                      leaf("Compute instance ID", None, proc.get("compute_instance_id", NA)),
                      group("Process ID", None, [leaf("Type", None, proc.get("type", "C")),
                                                 leaf("Name", None, proc.get("name", "")),
                                                 leaf("Used GPU Memory", None, used)], value=proc["pid"])]
    return [group("Processes", "processes", text_kids, xml=False, value=FIXED_WIDTH),
            group(None, "processes", xml_kids, text=False)]


def gpu_tree(ctx, gpu):
    model = gpu.model
    mem = model["memory"]
    mig_nodes = []
    if gpu.mig_capable:
        mig_nodes = _mig_device_nodes(ctx, gpu) if gpu.mig_current else [
            group(None, "mig_devices", [], text=False, value="None")]
    else:
        mig_nodes = [group(None, "mig_devices", [], text=False, value="None")]
    nodes = [
        leaf("Product Name", "product_name", model["product_name"]),
        leaf("Product Brand", "product_brand", model["product_brand"]),
        leaf("Product Architecture", "product_architecture", model["architecture"]),
        leaf("Display Mode", "display_mode", "Disabled" if ctx.branch < 580
             else "Requested functionality has been deprecated"),
    ]
    if ctx.branch >= 580:
        nodes.append(leaf("Display Attached", "display_attached", "No"))
    nodes += [
        leaf("Display Active", "display_active", "Disabled"),
        leaf("Persistence Mode", "persistence_mode", _en(gpu.persistence)),
        leaf("Addressing Mode", "addressing_mode", "None"),
        group("MIG Mode", "mig_mode", [
            leaf("Current", "current_mig", _en(gpu.mig_current) if gpu.mig_capable else NA),
            leaf("Pending", "pending_mig", _en(gpu.mig_pending) if gpu.mig_capable else NA)]),
    ] + mig_nodes + [
        leaf("Accounting Mode", "accounting_mode", "Disabled"),
        leaf("Accounting Mode Buffer Size", "accounting_mode_buffer_size", 4000),
        group("Driver Model", "driver_model", [leaf("Current", "current_dm", NA), leaf("Pending", "pending_dm", NA)]),
        leaf("Serial Number", "serial", gpu.serial),
        leaf("GPU UUID", "uuid", gpu.uuid),
    ]
    if ctx.branch >= 580:
        # The platform device identifier: stable per board, derived here from the UUID.
        nodes.append(leaf("GPU PDI", "pdi", "0x" + gpu.uuid.replace("-", "")[4:20]))
    nodes += [
        leaf("Minor Number", "minor_number", gpu.index),
        leaf("VBIOS Version", "vbios_version", model["vbios_version"]),
        leaf("MultiGPU Board", "multigpu_board", "No"),
        leaf("Board ID", "board_id", gpu.board_id),
        leaf("Board Part Number", "board_part_number", model["board_part_number"]),
        leaf("GPU Part Number", "gpu_part_number", model["gpu_part_number"]),
        leaf("FRU Part Number", "gpu_fru_part_number", NA),
    ]
    if ctx.branch >= 570:  # 550 still has gpu_module_id (its DTD)
        nodes.append(group("Platform Info", "platformInfo", [
            leaf("Chassis Serial Number", "chassis_serial_number", NA),
            leaf("Slot Number", "slot_number", NA), leaf("Tray Index", "tray_index", NA),
            leaf("Host ID", "host_id", NA), leaf("Peer Type", "peer_type", NA),
            leaf("Module Id", "module_id", gpu.module_id), leaf("GPU Fabric GUID", "gpu_fabric_guid", NA)]))
    else:
        nodes.append(leaf("Module ID", "gpu_module_id", gpu.module_id))
    inforom = model["inforom"]
    nodes.append(group("Inforom Version", "inforom_version", [
        leaf("Image Version", "img_version", inforom["img"]), leaf("OEM Object", "oem_object", inforom["oem"]),
        leaf("ECC Object", "ecc_object", inforom["ecc"]), leaf("Power Management Object", "pwr_object", inforom["pwr"])]))
    # In the DTD of the 535.261 and 550 binaries (535.54 did not print it yet).
    nodes.append(group("Inforom BBX Object Flush", "inforom_bbx_flush", [
        leaf("Latest Timestamp", "latest_timestamp", NA), leaf("Latest Duration", "latest_duration", NA)]))
    nodes.append(group("GPU Operation Mode", "gpu_operation_mode", [
        leaf("Current", "current_gom", NA), leaf("Pending", "pending_gom", NA)]))
    gsp = leaf("GSP Firmware Version", "gsp_firmware_version",
               ctx.driver_version if model["gsp_firmware"] and env.module_flavour() != "proprietary" else NA)
    if ctx.branch < 550:  # 535 prints it right after the operation mode (its DTD)
        nodes.append(gsp)
    if ctx.branch >= 550:
        nodes.append(leaf("GPU C2C Mode", "c2c_mode", "Disabled"))
    virt = [leaf("Virtualization Mode", "virtualization_mode", "None"), leaf("Host VGPU Mode", "host_vgpu_mode", NA)]
    if ctx.branch >= 550:
        virt.append(leaf("vGPU Heterogeneous Mode", "vgpu_heterogeneous_mode", NA))
    nodes.append(group("GPU Virtualization Mode", "gpu_virtualization_mode", virt))
    if ctx.branch < 580:
        nodes.append(group("GPU Reset Status", "gpu_reset_status", [
            leaf("Reset Required", "reset_required", "No"),
            leaf("Drain and Reset Recommended", "drain_and_reset_recommended", "No")]))
    if ctx.branch >= 570:
        nodes.append(leaf("GPU Recovery Action", "gpu_recovery_action", "None"))
    if ctx.branch >= 550:
        nodes.append(gsp)
    nodes.append(group("IBMNPU", "ibmnpu", [leaf("Relaxed Ordering Mode", "relaxed_ordering_mode", NA)]))
    nodes.append(_pci(ctx, gpu))
    nodes.append(leaf("Fan Speed", "fan_speed", NA if gpu.fan_percent is None else "%d %%" % gpu.fan_percent))
    nodes.append(leaf("Performance State", "performance_state", gpu.pstate))
    nodes += _event_reasons(ctx, gpu)
    nodes.append(leaf("Sparse Operation Mode", "sparse_operation_mode", NA))
    nodes.append(group("FB Memory Usage", "fb_memory_usage",
                       _memory_usage(mem["total_mib"], mem["reserved_mib"], gpu.memory_used)))
    nodes.append(group("BAR1 Memory Usage", "bar1_memory_usage", _bar1(mem["bar1_total_mib"], 1)))
    nodes.append(group("Conf Compute Protected Memory Usage", "cc_protected_memory_usage", _bar1(0, 0)))
    nodes.append(leaf("Compute Mode", "compute_mode", gpu.compute_mode))
    util = NA if gpu.mig_current else "%d %%" % gpu.utilization
    nodes.append(group("Utilization", "utilization", [
        leaf("GPU", "gpu_util", util), leaf("Memory", "memory_util", util),
        leaf("Encoder", "encoder_util", NA if gpu.mig_current else "0 %"),
        leaf("Decoder", "decoder_util", NA if gpu.mig_current else "0 %"),
        leaf("JPEG", "jpeg_util", NA if gpu.mig_current else "0 %"),
        leaf("OFA", "ofa_util", NA if gpu.mig_current else "0 %")]))
    for label, tag in (("Encoder Stats", "encoder_stats"), ("FBC Stats", "fbc_stats")):
        nodes.append(group(label, tag, [leaf("Active Sessions", "session_count", 0),
                                        leaf("Average FPS", "average_fps", 0),
                                        leaf("Average Latency", "average_latency", 0)]))
    if ctx.branch >= 570:
        nodes.append(group("DRAM Encryption Mode", "dram_encryption_mode", [
            leaf("Current", "current_dram_encryption", NA), leaf("Pending", "pending_dram_encryption", NA)]))
    ecc_current = _en(gpu.ecc_current) if gpu.ecc_supported else NA
    ecc_pending = _en(gpu.ecc_pending) if gpu.ecc_supported else NA
    nodes.append(group("ECC Mode", "ecc_mode", [leaf("Current", "current_ecc", ecc_current),
                                                leaf("Pending", "pending_ecc", ecc_pending)]))
    nodes.append(_ecc_errors(ctx, gpu))
    nodes += _retired_pages()
    nodes += _remapped_rows(gpu)
    nodes.append(_temperature(gpu))
    nodes.append(group(None, "supported_gpu_target_temp", [
        leaf(None, "gpu_target_temp_min", NA), leaf(None, "gpu_target_temp_max", NA)], text=False))
    nodes += _power(ctx, gpu)
    nodes += _clocks(ctx, gpu)
    nodes.append(_fabric(ctx, gpu))
    nodes.append(_supported_clocks(gpu, text=True))
    nodes.append(_supported_clocks(gpu, text=False))
    nodes += _processes(ctx, gpu)
    nodes.append(group(None, "accounted_processes", [], text=False))
    if ctx.branch >= 570:
        nodes.append(group("Capabilities", "capabilities", [leaf("EGM", "egm", "disabled")]))
    return nodes


def _width(ctx):
    return 55 if ctx.branch >= 580 else 42


def _render_text(ctx, nodes, depth, out, width):
    for node in nodes:
        if not node.text:
            continue
        indent = "    " * depth
        if node.kids is None:
            out.append("%s: %s\n" % ((indent + node.label).ljust(width), node.value))
        elif node.value is FIXED_WIDTH:
            out.append(indent + node.label + "\n")
            _render_text(ctx, node.kids, depth + 1, out, 42)
        elif node.value is not None:
            out.append("%s: %s\n" % ((indent + node.label).ljust(width), node.value))
            _render_text(ctx, node.kids, depth + 1, out, width)
        else:
            out.append(indent + node.label + "\n")
            _render_text(ctx, node.kids, depth + 1, out, width)


def _escape(value):
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _render_xml(nodes, depth, out):
    indent = "\t" * depth
    for node in nodes:
        if not node.xml:
            continue
        if node.kids is None:
            out.append("%s<%s>%s</%s>\n" % (indent, node.tag, _escape(node.value), node.tag))
            continue
        out.append("%s<%s>\n" % (indent, node.tag))
        if node.kids:
            _render_xml(node.kids, depth + 1, out)
        elif isinstance(node.value, str):
            out.append("%s\t%s\n" % (indent, node.value))
        out.append("%s</%s>\n" % (indent, node.tag))


def _filter(nodes, sections):
    if not sections:
        return [n for n in nodes if n.tag != "supported_clocks" or not n.text]
    wanted = set()
    for section in sections:
        wanted.update(SECTIONS[section])
    return [n for n in nodes if n.tag in wanted]


def run(ctx, chosen, xml, display, selected):
    from nvsim.smi.common import ERR_INVALID_INPUT, RC_INVALID, RC_OK
    sections = None
    if display:
        sections = [s.strip().upper() for s in display.split(",") if s.strip()]
        if not sections or any(s not in SECTIONS for s in sections):
            ctx.write(ERR_INVALID_INPUT)
            return RC_INVALID
    out = []
    if xml:
        dtd = "nvsmi_device_v13.dtd" if ctx.branch >= DTD_V13_FROM else "nvsmi_device_v12.dtd"
        out.append('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "%s">\n<nvidia_smi_log>\n' % dtd)
        out.append("\t<timestamp>%s</timestamp>\n\t<driver_version>%s</driver_version>\n"
                   "\t<cuda_version>%s</cuda_version>\n\t<attached_gpus>%d</attached_gpus>\n"
                   % (ctx.timestamp(), ctx.driver_version, ctx.cuda_version, len(ctx.gpus)))
        for gpu in chosen:
            out.append('\t<gpu id="%s">\n' % gpu.bus_id)
            _render_xml(_filter(gpu_tree(ctx, gpu), sections), 2, out)
            out.append("\t</gpu>\n")
        out.append("\n</nvidia_smi_log>\n")
    else:
        width = _width(ctx)
        out.append("\n==============NVSMI LOG==============\n\n")
        out.append("%s: %s\n%s: %s\n%s: %s\n\n%s: %d\n" % (
            "Timestamp".ljust(width), ctx.timestamp(), "Driver Version".ljust(width), ctx.driver_version,
            "CUDA Version".ljust(width), ctx.cuda_version, "Attached GPUs".ljust(width), len(ctx.gpus)))
        for gpu in chosen:
            out.append("GPU %s\n" % gpu.bus_id)
            _render_text(ctx, _filter(gpu_tree(ctx, gpu), sections), 1, out, width)
            out.append("\n")
    ctx.write("".join(out))
    return RC_OK
