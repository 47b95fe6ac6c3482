# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU profiles of the simulator and the effective view of each GPU.

Profile JSON schema (``profiles/<name>.json``)::

    {
      "description": str,
      "driver_loadable": bool,      # false: the kernel module never binds (nvidia-smi exit 9)
      "cpu_affinity": {"<numa node>": "0-55,112-167", ...},
      "nvlink_fabric": bool,        # true: every GPU pair is NV<links> in `topo -m`
      "pcie_same_node": "NODE",     # topo relation of PCIe GPUs on one NUMA node
      "nvswitches": [{"bus_id": "00000000:05:00.0", "device_id": "0x22A310DE",
                      "subsystem_id": "0x16C110DE"}],
      "nics": [{"name": "mlx5_0", "numa_node": 0, "pcie_switch": 0}],   # optional: topo -m NIC rows
      "models": {"<model>": MODEL},
      "gpus": [{"model": "<model>", "bus_id": "00000000:18:00.0",
                "uuid": "GPU-...", "serial": "1654922001234", "numa_node": 0,
                "module_id": 1, "board_id": "0x1800",
                "pcie_switch": 0}]              # optional: devices behind one switch are PIX
    }

Adding a profile is this one file plus its golden outputs
(tests/unit/simulator/expected/<name>/, with the driver they show in
``DRIVER``; ``NVIDIA_SIM_UPDATE_GOLDEN=1`` writes them for review).

MODEL keys (all required unless marked optional)::

    product_name, product_brand, architecture, compute_cap ("9.0"),
    pci_device_id ("0x233010DE"), pci_subsystem_id, pci_class ("0x030200"),
    vbios_version, board_part_number, gpu_part_number,
    inforom: {img, oem, ecc, pwr}, gsp_firmware: bool,
    memory: {total_mib, reserved_mib, bar1_total_mib},
    power: {min_w, default_w, max_w, idle_w, busy_w},
    clocks: {max_graphics, max_sm, max_memory, max_video,
             idle_graphics, idle_memory, idle_video, busy_graphics, busy_video,
             default_app_graphics, default_app_memory},
    supported_clocks: [{memory, graphics_max, graphics_min, graphics_step}],
    temperature: {idle, busy, shutdown, slowdown, max_operating,
                  memory_idle (null = N/A), memory_max_operating (null = N/A)},
    pcie: {max_gen, current_gen, host_max_gen, max_width, current_width},
    fan_percent: int or null (null = N/A, passively cooled),
    ecc: {supported: bool, default_enabled: bool},
    remapped_rows: {supported: bool, histogram_max: int},
    nvlink: {links: int, speed_gbps: float, active: bool},
    mig: null | {default_enabled: bool, memory_slices: int, bar1_mib: int,
                 profiles: [{id, name ("1g.5gb"), memory_gib ("4.75"),
                             memory_mib, sm, dec, enc, ce, jpeg, ofa,
                             instances, size, placements: [start, ...],
                             compute_slices, ci_profile_id}]}

Settings that tools change live in ``state.json`` (see ``env.py``); the
functions below merge them over the profile defaults.
"""

from nvsim import env

# Compute-instance profile IDs by compute slices (NVML_COMPUTE_INSTANCE_PROFILE_*).
CI_PROFILE_IDS = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}

COMPUTE_MODES = ("Default", "Exclusive_Thread", "Prohibited", "Exclusive_Process")


class Gpu(object):
    """One GPU as the driver would report it now: profile + state + processes."""

    def __init__(self, index, spec, model, settings, processes):
        self.index = index
        self.spec = spec
        self.model = model
        self.settings = settings
        self.processes = processes

    def __getattr__(self, name):
        if name in ("spec", "model"):
            raise AttributeError(name)
        if name in self.spec:
            return self.spec[name]
        if name in self.model:
            return self.model[name]
        raise AttributeError(name)

    # --- identity -----------------------------------------------------
    @property
    def short_bus_id(self):
        """``0000:18:00.0`` form (domain shortened to 4 digits)."""
        return self.bus_id[4:]

    @property
    def pci_bus(self):
        return self.bus_id.split(":")[1]

    @property
    def pci_device(self):
        return self.bus_id.split(":")[2].split(".")[0]

    @property
    def pci_domain(self):
        return self.bus_id.split(":")[0][4:]

    # --- settings -----------------------------------------------------
    @property
    def persistence(self):
        value = self.settings.get("persistence_mode")
        if value is None:
            return env.daemon_holds_persistence()
        return bool(value)

    @property
    def power_limit(self):
        return float(self.settings.get("power_limit", self.model["power"]["default_w"]))

    @property
    def app_clocks(self):
        """(memory, graphics) applications clocks."""
        custom = self.settings.get("app_clocks")
        if custom:
            return int(custom[0]), int(custom[1])
        clocks = self.model["clocks"]
        return clocks["default_app_memory"], clocks["default_app_graphics"]

    @property
    def compute_mode(self):
        return self.settings.get("compute_mode", "Default")

    @property
    def ecc_supported(self):
        return bool(self.model["ecc"]["supported"])

    @property
    def ecc_current(self):
        return bool(self.settings.get("ecc_current", self.model["ecc"]["default_enabled"]))

    @property
    def ecc_pending(self):
        return bool(self.settings.get("ecc_pending", self.ecc_current))

    @property
    def mig_capable(self):
        return self.model.get("mig") is not None

    @property
    def mig_current(self):
        if not self.mig_capable:
            return False
        return bool(self.settings.get("mig_current", self.model["mig"]["default_enabled"]))

    @property
    def mig_pending(self):
        return bool(self.settings.get("mig_pending", self.mig_current))

    @property
    def gpu_instances(self):
        if not self.mig_current:
            return []
        return sorted(self.settings.get("gpu_instances", []), key=lambda gi: gi["id"])

    # --- derived runtime readings ------------------------------------
    @property
    def busy(self):
        return bool(self.processes)

    @property
    def memory_used(self):
        if self.mig_current:
            return sum(mig_device_used(self, gi) for gi in self.gpu_instances)
        return sum(int(p.get("used_memory", 0)) for p in self.processes)

    @property
    def memory_free(self):
        mem = self.model["memory"]
        return max(0, mem["total_mib"] - mem["reserved_mib"] - self.memory_used)

    @property
    def temperature(self):
        return self.model["temperature"]["busy" if self.busy else "idle"]

    @property
    def power_draw(self):
        power = self.model["power"]
        return min(power["busy_w"] if self.busy else power["idle_w"], self.power_limit)

    @property
    def utilization(self):
        return 100 if self.busy else 0

    @property
    def current_clocks(self):
        """(graphics, sm, memory, video) in MHz."""
        clocks = self.model["clocks"]
        if self.busy:
            graphics = min(clocks["busy_graphics"], self.app_clocks[1]) if self.settings.get("app_clocks") \
                else clocks["busy_graphics"]
            return graphics, graphics, clocks["max_memory"], clocks["busy_video"]
        return clocks["idle_graphics"], clocks["idle_graphics"], clocks["idle_memory"], clocks["idle_video"]

    @property
    def pstate(self):
        return "P0"

    @property
    def handle_error(self):
        """NVML's error for a GPU it lists but cannot open (state.json
        ``nvml_device_error``, e.g. "Unknown Error"), else None."""
        return self.settings.get("nvml_device_error")

    def supported_clock_pairs(self):
        pairs = []
        for entry in self.model["supported_clocks"]:
            graphics = entry["graphics_max"]
            while graphics >= entry["graphics_min"]:
                pairs.append((entry["memory"], graphics))
                graphics -= entry["graphics_step"]
        return pairs


def mig_profiles(gpu):
    return gpu.model["mig"]["profiles"] if gpu.mig_capable else []


def mig_profile_by_id(gpu, profile_id):
    for profile in mig_profiles(gpu):
        if profile["id"] == profile_id:
            return profile
    return None


def find_mig_profile(gpu, token):
    """Profile by numeric ID, ``1g.5gb`` or ``MIG 1g.5gb``; None if unknown."""
    token = token.strip()
    if token.isdigit():
        return mig_profile_by_id(gpu, int(token))
    name = token[4:] if token.upper().startswith("MIG ") else token
    for profile in mig_profiles(gpu):
        if profile["name"] == name:
            return profile
    return None


def gi_id_for(size, start, slices=8):
    """GPU instance ID as NVIDIA numbers them: a binary heap over memory slices.

    The full GPU is 0, halves 1-2, quarters 3-6, eighths 7-14 (so seven 1g
    instances of an A100/H100 get IDs 7..13 and two 3g ones get 1 and 2).
    """
    level = slices // size
    return (level - 1) + start // size


def used_slices(gpu):
    used = set()
    for gi in gpu.gpu_instances:
        used.update(range(gi["placement_start"], gi["placement_start"] + gi["placement_size"]))
    return used


def _blocked_placements(gpu, start, size):
    """Placements of other profiles that a new instance at start:size would kill."""
    slots = set(range(start, start + size))
    free = set(range(gpu.model["mig"]["memory_slices"])) - used_slices(gpu)
    killed = 0
    for profile in mig_profiles(gpu):
        for other in profile["placements"]:
            other_slots = set(range(other, other + profile["size"]))
            if other_slots <= free and other_slots & slots:
                killed += 1
    return killed


def choose_placement(gpu, profile):
    """Free placement for a new instance, or None when resources are exhausted.

    The driver keeps room for large profiles: it takes the placement that
    removes the fewest still-possible placements of any profile (lowest
    start on ties).  This reproduces the real creation order of seven 1g
    instances (IDs 13, 11, 12, 7, 8, 9, 10) and of two 3g ones (2, then 1).
    """
    existing = [gi for gi in gpu.gpu_instances if gi["profile_id"] == profile["id"]]
    if len(existing) >= profile["instances"]:
        return None
    used = used_slices(gpu)
    candidates = [start for start in profile["placements"]
                  if not used & set(range(start, start + profile["size"]))]
    if not candidates:
        return None
    return min(candidates, key=lambda start: (_blocked_placements(gpu, start, profile["size"]), start))


def free_instances(gpu, profile):
    """How many more instances of a profile fit (the Free column of -lgip)."""
    existing = len([gi for gi in gpu.gpu_instances if gi["profile_id"] == profile["id"]])
    used = set(used_slices(gpu))
    count = 0
    for start in profile["placements"]:
        slots = set(range(start, start + profile["size"]))
        if not used & slots:
            used |= slots
            count += 1
    return max(0, min(profile["instances"] - existing, count))


def ci_name(gi_profile, compute_slices):
    if compute_slices == gi_profile["compute_slices"]:
        return "MIG " + gi_profile["name"]
    return "MIG %dc.%s" % (compute_slices, gi_profile["name"])


def ci_profiles_for(gi_profile):
    """Compute-instance profiles a GPU instance accepts: [(ci_profile_id, slices)]."""
    slices = gi_profile["compute_slices"]
    result = []
    for count in (1, 2, 3, 4, 7):
        if count > slices or (count == 3 and slices not in (3, 7)):
            continue
        if count == slices:
            result.append((gi_profile["ci_profile_id"], count))
        else:
            result.append((CI_PROFILE_IDS[count], count))
    return result


def mig_devices(gpu):
    """MIG devices (one per compute instance) in enumeration order."""
    devices = []
    for gi in gpu.gpu_instances:
        profile = mig_profile_by_id(gpu, gi["profile_id"])
        for ci in sorted(gi.get("compute_instances", []), key=lambda c: c["id"]):
            devices.append({
                "index": len(devices),
                "gi": gi,
                "ci": ci,
                "profile": profile,
                "name": ci_name(profile, ci["slices"]),
                "uuid": mig_uuid(gpu.uuid, gi["id"], ci["id"]),
            })
    return devices


def mig_uuid(gpu_uuid, gi_id, ci_id):
    """Stable MIG device UUID derived from its parent GPU and instance IDs."""
    import uuid  # only MIG listings need it; keeps plain nvidia-smi calls fast
    return "MIG-" + str(uuid.uuid5(uuid.UUID(gpu_uuid[4:]), "%d/%d" % (gi_id, ci_id)))


def mig_device_used(gpu, gi):
    """Framebuffer used in a GPU instance (MiB): what it reserves for its own
    contexts once it has compute instances, plus its processes."""
    if not gi.get("compute_instances"):
        return 0
    return 12 + sum(int(p.get("used_memory", 0)) for p in gpu.processes if p.get("gpu_instance_id") == gi["id"])


def mig_device_free(gpu, gi):
    profile = mig_profile_by_id(gpu, gi["profile_id"])
    return max(0, profile["memory_mib"] - mig_device_used(gpu, gi))


def gpus(profile, state=None, processes=None):
    """All GPUs of a profile as Gpu objects (index = enumeration order)."""
    if state is None:
        state = env.load_state()
    if processes is None:
        processes = env.alive_processes()
    result = []
    for index, spec in enumerate(profile.get("gpus", [])):
        model = profile["models"][spec["model"]]
        own = [p for p in processes if str(p.get("gpu")) == str(index) or p.get("gpu_uuid") == spec["uuid"]]
        result.append(Gpu(index, spec, model, env.gpu_state(state, index), own))
    return result


def select(gpu_list, id_option):
    """GPUs named by ``-i`` (indexes, UUIDs, PCI bus ids; comma separated).

    Returns None when any of them does not exist (nvidia-smi then answers
    "No devices were found").
    """
    if id_option is None:
        return list(gpu_list)
    chosen = []
    for token in id_option.split(","):
        token = token.strip()
        match = None
        for gpu in gpu_list:
            if token.isdigit() and int(token) == gpu.index:
                match = gpu
            elif token.upper() in (gpu.uuid.upper(), gpu.uuid[4:].upper()):
                match = gpu
            elif _same_bus_id(token, gpu.bus_id):
                match = gpu
            if match is not None:
                break
        if match is None:
            return None
        if match not in chosen:
            chosen.append(match)
    return chosen


def _same_bus_id(token, bus_id):
    parts = token.upper().split(":")
    if len(parts) < 2:
        return False
    full = bus_id.upper().split(":")
    if len(parts) == 2:
        parts = ["00000000"] + parts
    try:
        return (int(parts[0], 16) == int(full[0], 16) and int(parts[1], 16) == int(full[1], 16)
                and parts[2] == full[2])
    except ValueError:
        return False
