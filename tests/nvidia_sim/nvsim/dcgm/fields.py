# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DCGM field names and the values the simulated host engine reports (test double).

``snapshot()`` turns the profile + settings state + simulated workloads into
the readings one DCGM sample would hold; ``FIELDS`` names the DCGM fields the
simulator knows (names as in ``dcgm_fields.h``) and where each value comes
from.  A name missing here is "unknown" to the simulated dcgm-exporter, which
rejects it like the real one rejects a field its DCGM does not define.
"""

import os
import time

from nvsim import env
from nvsim import gpus as gpu_info
from nvsim import profiles


def _uptime_seconds():
    marker = env.path(*env.BOOTED_MARKER)
    try:
        return max(0.0, env.now() - os.path.getmtime(marker))
    except OSError:
        return 0.0


def gpu_snapshot(gpu, uptime):
    model = gpu.model
    graphics, sm, memory, video = gpu.current_clocks
    app_memory, app_graphics = gpu.app_clocks
    mem = model["memory"]
    temps = model["temperature"]
    pcie = model["pcie"]
    nvlink = model.get("nvlink") or {}
    memory_temp = temps.get("memory_idle")
    if memory_temp is not None and gpu.busy:
        memory_temp += temps["busy"] - temps["idle"]
    snap = {
        "index": gpu.index,
        "name": model["product_name"],
        "brand": model.get("product_brand", "NVIDIA"),
        "uuid": gpu.uuid,
        "bus_id": gpu.bus_id,
        "serial": gpu.spec.get("serial"),
        "device_id": gpu_info.device_id(gpu),
        "pci_combined_id": model["pci_device_id"],
        "pci_subsystem_id": model.get("pci_subsystem_id"),
        "vbios": model.get("vbios_version"),
        "inforom_image": (model.get("inforom") or {}).get("img"),
        "inforom_oem": (model.get("inforom") or {}).get("oem"),
        "inforom_ecc": (model.get("inforom") or {}).get("ecc"),
        "inforom_power": (model.get("inforom") or {}).get("pwr"),
        "minor_number": gpu.index,
        "temperature": gpu.temperature,
        "memory_temperature": memory_temp,
        "slowdown_temp": temps.get("slowdown"),
        "shutdown_temp": temps.get("shutdown"),
        "gpu_max_op_temp": temps.get("max_operating"),
        "mem_max_op_temp": temps.get("memory_max_operating"),
        "power_usage": round(gpu.power_draw, 3),
        "power_limit": gpu.power_limit,
        "power_min": model["power"]["min_w"],
        "power_max": model["power"]["max_w"],
        "power_default": model["power"]["default_w"],
        "energy_mj": int(model["power"]["idle_w"] * uptime * 1000),
        "sm_clock": sm,
        "graphics_clock": graphics,
        "mem_clock": memory,
        "video_clock": video,
        "app_sm_clock": app_graphics,
        "app_mem_clock": app_memory,
        "max_sm_clock": model["clocks"]["max_sm"],
        "max_mem_clock": model["clocks"]["max_memory"],
        "max_video_clock": model["clocks"]["max_video"],
        "gpu_util": gpu.utilization,
        "mem_copy_util": 35 if gpu.busy else 0,
        "enc_util": 0,
        "dec_util": 0,
        "fb_total": mem["total_mib"],
        "fb_reserved": mem["reserved_mib"],
        "fb_used": gpu.memory_used,
        "fb_free": gpu.memory_free,
        "bar1_total": mem.get("bar1_total_mib"),
        "pstate": int(gpu.pstate[1:]),
        "fan_speed": model.get("fan_percent"),
        "pcie_gen": pcie["current_gen"],
        "pcie_width": pcie["current_width"],
        "pcie_max_gen": pcie["max_gen"],
        "pcie_max_width": pcie["max_width"],
        "persistence_mode": 1 if gpu.persistence else 0,
        "compute_mode": profiles.COMPUTE_MODES.index(gpu.compute_mode),
        "ecc_current": 1 if gpu.ecc_current else 0,
        "ecc_pending": 1 if gpu.ecc_pending else 0,
        "mig_mode": 1 if gpu.mig_current else 0,
        "nvlink_links": nvlink.get("links", 0) if nvlink.get("active") else 0,
        "mig_instances": [],
    }
    for gi in gpu.gpu_instances:
        profile = profiles.mig_profile_by_id(gpu, gi["profile_id"])
        snap["mig_instances"].append({
            "gi_id": gi["id"],
            "profile": profile["name"] if profile else str(gi["profile_id"]),
            "fb_used": profiles.mig_device_used(gpu, gi),
            "fb_total": profile["memory_mib"] if profile else 0,
        })
    return snap


def snapshot():
    """Readings of every GPU plus host-wide values, as plain JSON data."""
    uptime = _uptime_seconds()
    return {
        "driver_version": env.loaded_driver_version() or env.installed_driver_version(),
        "nvml_version": env.installed_driver_version(),
        "cuda_version": env.cuda_version(env.installed_driver_version()),
        "timestamp": time.time(),
        "gpus": [gpu_snapshot(gpu, uptime) for gpu in gpu_info.load_gpus()],
    }


def _key(name):
    return lambda snap, host: snap.get(name)


def _host(name):
    return lambda snap, host: host.get(name)


def _zero(snap, host):
    return 0


def _cuda_driver(snap, host):
    major, _unused, minor = (host.get("cuda_version") or "0.0").partition(".")
    return int(major) * 1000 + int(minor or 0) * 10


def _nvlink_bandwidth(snap, host):
    return 0 if snap.get("nvlink_links") else None


def _fb_used_percent(snap, host):
    return round(100.0 * snap["fb_used"] / snap["fb_total"], 2) if snap.get("fb_total") else None


def _active_ratio(snap, host):
    return 0.95 if snap.get("gpu_util") else 0.0


# name -> value(snapshot_of_one_gpu, host_values); None means "blank" (not sampled).
FIELDS = {
    "DCGM_FI_DRIVER_VERSION": _host("driver_version"),
    "DCGM_FI_NVML_VERSION": _host("nvml_version"),
    "DCGM_FI_CUDA_DRIVER_VERSION": _cuda_driver,
    "DCGM_FI_DEV_COUNT": lambda snap, host: host.get("gpu_count"),
    "DCGM_FI_DEV_NAME": _key("name"),
    "DCGM_FI_DEV_BRAND": _key("brand"),
    "DCGM_FI_DEV_NVML_INDEX": _key("index"),
    "DCGM_FI_DEV_SERIAL": _key("serial"),
    "DCGM_FI_DEV_UUID": _key("uuid"),
    "DCGM_FI_DEV_MINOR_NUMBER": _key("minor_number"),
    "DCGM_FI_DEV_OEM_INFOROM_VER": _key("inforom_oem"),
    "DCGM_FI_DEV_PCI_BUSID": _key("bus_id"),
    "DCGM_FI_DEV_PCI_COMBINED_ID": _key("pci_combined_id"),
    "DCGM_FI_DEV_PCI_SUBSYS_ID": _key("pci_subsystem_id"),
    "DCGM_FI_DEV_COMPUTE_MODE": _key("compute_mode"),
    "DCGM_FI_DEV_PERSISTENCE_MODE": _key("persistence_mode"),
    "DCGM_FI_DEV_MIG_MODE": _key("mig_mode"),
    "DCGM_FI_DEV_ECC_INFOROM_VER": _key("inforom_ecc"),
    "DCGM_FI_DEV_POWER_INFOROM_VER": _key("inforom_power"),
    "DCGM_FI_DEV_INFOROM_IMAGE_VER": _key("inforom_image"),
    "DCGM_FI_DEV_VBIOS_VERSION": _key("vbios"),
    "DCGM_FI_DEV_BAR1_TOTAL": _key("bar1_total"),
    "DCGM_FI_DEV_SM_CLOCK": _key("sm_clock"),
    "DCGM_FI_DEV_MEM_CLOCK": _key("mem_clock"),
    "DCGM_FI_DEV_VIDEO_CLOCK": _key("video_clock"),
    "DCGM_FI_DEV_APP_SM_CLOCK": _key("app_sm_clock"),
    "DCGM_FI_DEV_APP_MEM_CLOCK": _key("app_mem_clock"),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": _zero,
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": _zero,
    "DCGM_FI_DEV_MAX_SM_CLOCK": _key("max_sm_clock"),
    "DCGM_FI_DEV_MAX_MEM_CLOCK": _key("max_mem_clock"),
    "DCGM_FI_DEV_MAX_VIDEO_CLOCK": _key("max_video_clock"),
    "DCGM_FI_DEV_MEMORY_TEMP": _key("memory_temperature"),
    "DCGM_FI_DEV_GPU_TEMP": _key("temperature"),
    "DCGM_FI_DEV_MEM_MAX_OP_TEMP": _key("mem_max_op_temp"),
    "DCGM_FI_DEV_GPU_MAX_OP_TEMP": _key("gpu_max_op_temp"),
    "DCGM_FI_DEV_SLOWDOWN_TEMP": _key("slowdown_temp"),
    "DCGM_FI_DEV_SHUTDOWN_TEMP": _key("shutdown_temp"),
    "DCGM_FI_DEV_POWER_USAGE": _key("power_usage"),
    "DCGM_FI_DEV_POWER_USAGE_INSTANT": _key("power_usage"),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": _key("energy_mj"),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": _key("power_limit"),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT_MIN": _key("power_min"),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX": _key("power_max"),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF": _key("power_default"),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": _key("power_limit"),
    "DCGM_FI_DEV_PSTATE": _key("pstate"),
    "DCGM_FI_DEV_FAN_SPEED": _key("fan_speed"),
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": _zero,
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": _zero,
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": _zero,
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN": _key("pcie_max_gen"),
    "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH": _key("pcie_max_width"),
    "DCGM_FI_DEV_PCIE_LINK_GEN": _key("pcie_gen"),
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": _key("pcie_width"),
    "DCGM_FI_DEV_GPU_UTIL": _key("gpu_util"),
    "DCGM_FI_DEV_MEM_COPY_UTIL": _key("mem_copy_util"),
    "DCGM_FI_DEV_ENC_UTIL": _key("enc_util"),
    "DCGM_FI_DEV_DEC_UTIL": _key("dec_util"),
    "DCGM_FI_DEV_XID_ERRORS": _zero,
    "DCGM_FI_DEV_POWER_VIOLATION": _zero,
    "DCGM_FI_DEV_THERMAL_VIOLATION": _zero,
    "DCGM_FI_DEV_SYNC_BOOST_VIOLATION": _zero,
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION": _zero,
    "DCGM_FI_DEV_LOW_UTIL_VIOLATION": _zero,
    "DCGM_FI_DEV_RELIABILITY_VIOLATION": _zero,
    "DCGM_FI_DEV_FB_TOTAL": _key("fb_total"),
    "DCGM_FI_DEV_FB_FREE": _key("fb_free"),
    "DCGM_FI_DEV_FB_USED": _key("fb_used"),
    "DCGM_FI_DEV_FB_RESERVED": _key("fb_reserved"),
    "DCGM_FI_DEV_FB_USED_PERCENT": _fb_used_percent,
    "DCGM_FI_DEV_ECC_CURRENT": _key("ecc_current"),
    "DCGM_FI_DEV_ECC_PENDING": _key("ecc_pending"),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": _zero,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": _zero,
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": _zero,
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": _zero,
    "DCGM_FI_DEV_RETIRED_SBE": _zero,
    "DCGM_FI_DEV_RETIRED_DBE": _zero,
    "DCGM_FI_DEV_RETIRED_PENDING": _zero,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": _zero,
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": _zero,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": _zero,
    "DCGM_FI_DEV_ROW_REMAP_PENDING": _zero,
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": _zero,
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": _zero,
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": _zero,
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": _zero,
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": _nvlink_bandwidth,
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": _zero,
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": _active_ratio,
    "DCGM_FI_PROF_SM_ACTIVE": _active_ratio,
    "DCGM_FI_PROF_SM_OCCUPANCY": _active_ratio,
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": _active_ratio,
    "DCGM_FI_PROF_DRAM_ACTIVE": _active_ratio,
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": _active_ratio,
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": _active_ratio,
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": _active_ratio,
    "DCGM_FI_PROF_PCIE_TX_BYTES": _zero,
    "DCGM_FI_PROF_PCIE_RX_BYTES": _zero,
    "DCGM_FI_PROF_NVLINK_TX_BYTES": _zero,
    "DCGM_FI_PROF_NVLINK_RX_BYTES": _zero,
}

# Metrics dcgm-exporter computes itself (DCGM_EXP_*), as the real one names them.
EXPORTER_FIELDS = {
    "DCGM_EXP_XID_ERRORS_COUNT": _zero,
    "DCGM_EXP_CLOCK_EVENTS_COUNT": _zero,
    "DCGM_EXP_GPU_HEALTH_STATUS": _zero,
    "DCGM_EXP_P2P_STATUS": _zero,
}
