# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-smi mig``: GPU/compute instance profiles, creation, listing, destruction.

Table layouts and messages follow the real tool (NVIDIA MIG user guide and
captured outputs); GPU instance IDs follow NVIDIA's placement numbering (see
profiles.gi_id_for) so "-cgi 19 x7" yields IDs 13, 11, 12, 7, 8, 9, 10.
"""

from nvsim import env, profiles
from nvsim.smi.common import ERR_ONE_COMMAND, RC_INVALID, RC_NOT_FOUND, RC_OK, RC_OTHER, select_gpus
from nvsim.smi.views import SUB_USAGE

FLAGS = {
    "-lgip": "lgip", "--list-gpu-instance-profiles": "lgip",
    "-lgipp": "lgipp", "--list-gpu-instance-possible-placements": "lgipp",
    "-cgi": "cgi", "--create-gpu-instance": "cgi",
    "-C": "default_ci", "--default-compute-instance": "default_ci",
    "-lgi": "lgi", "--list-gpu-instances": "lgi",
    "-dgi": "dgi", "--destroy-gpu-instance": "dgi",
    "-gi": "gi", "--gpu-instance-id": "gi",
    "-cci": "cci", "--create-compute-instance": "cci",
    "-lci": "lci", "--list-compute-instances": "lci",
    "-dci": "dci", "--destroy-compute-instance": "dci",
    "-ci": "ci", "--compute-instance-id": "ci",
    "-i": "id", "--id": "id",
}
NEEDS_VALUE = ("cgi", "gi", "ci", "id")
OPTIONAL_VALUE = ("cci",)
COMMANDS = ("lgip", "lgipp", "cgi", "lgi", "dgi", "cci", "lci", "dci")

NO_MIG = "No MIG-enabled devices found.\n"
NO_GI = "No GPU instances found: Not Found\n"
NO_CI = "No compute instances found: Not Found\n"


class _Usage(Exception):
    pass


def _parse(argv):
    opts = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        name, value = token, None
        if token.startswith("--") and "=" in token:
            name, value = token.split("=", 1)
        key = FLAGS.get(name)
        if key is None:
            raise _Usage(token)
        if key in NEEDS_VALUE and value is None:
            i += 1
            if i >= len(argv):
                raise _Usage(token)
            value = argv[i]
        elif key in OPTIONAL_VALUE and value is None and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            i += 1
            value = argv[i]
        opts[key] = value if value is not None else True
        i += 1
    return opts


def _ids(value):
    if value in (None, True):
        return None
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise _Usage(value)


def _box(title_lines, width):
    return ["+" + "-" * width + "+\n"] + ["|%s|\n" % line.ljust(width) for line in title_lines] + \
        ["|" + "=" * width + "|\n"]


def list_profiles(ctx, gpus):
    out = _box([" GPU instance profiles:",
                " GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC",
                "                              Free/Total   GiB              CE    JPEG  OFA"], 77)
    for gpu in gpus:
        for profile in profiles.mig_profiles(gpu):
            free = profiles.free_instances(gpu, profile)
            out.append("|%4d  %-16s%4d     %-11s%-11s%-7s%-7s%-6s%-4s|\n" % (
                gpu.index, "MIG " + profile["name"], profile["id"], "%d/%d" % (free, profile["instances"]),
                profile["memory_gib"], "No", profile["sm"], profile["dec"], profile["enc"]))
            out.append("|%s%2d%s%-6s%-4s|\n" % (" " * 60, profile["ce"], " " * 5, profile["jpeg"], profile["ofa"]))
            out.append("+" + "-" * 77 + "+\n")
    ctx.write("".join(out))
    return RC_OK


def list_placements(ctx, gpus):
    for gpu in gpus:
        for profile in profiles.mig_profiles(gpu):
            starts = profile["placements"]
            ctx.write("GPU %2d Profile ID %2d %s: {%s}:%d\n" % (
                gpu.index, profile["id"], "Placements" if len(starts) > 1 else "Placement ",
                ",".join(str(s) for s in starts), profile["size"]))
    return RC_OK


def _save_instances(gpu_index, instances):
    def apply(state):
        state["gpus"].setdefault(str(gpu_index), {})["gpu_instances"] = instances
    env.update_state(apply)


def _new_ci(gi, gi_profile, ci_profile_id, slices):
    used = set()
    for ci in gi.get("compute_instances", []):
        used.update(range(ci["placement_start"], ci["placement_start"] + ci["placement_size"]))
    start = None
    for candidate in range(0, gi_profile["compute_slices"] - slices + 1, slices):
        if not used & set(range(candidate, candidate + slices)):
            start = candidate
            break
    if start is None:
        return None
    taken = set(ci["id"] for ci in gi.get("compute_instances", []))
    ci_id = min(i for i in range(gi_profile["compute_slices"] + 1) if i not in taken)
    ci = {"id": ci_id, "profile_id": ci_profile_id, "slices": slices, "placement_start": start,
          "placement_size": slices}
    gi.setdefault("compute_instances", []).append(ci)
    return ci


def create_gpu_instances(ctx, gpus, spec, with_ci):
    for gpu in gpus:
        wanted = []
        for token in spec.split(","):
            profile = profiles.find_mig_profile(gpu, token)
            if profile is None:
                ctx.write("Unable to create a GPU instance on GPU %2d using profile %s: Invalid Argument\n"
                          "Failed to create GPU instances: Invalid Argument\n" % (gpu.index, token.strip()))
                return RC_INVALID
            wanted.append(profile)
        instances = [dict(gi) for gi in gpu.gpu_instances]
        gpu.settings = dict(gpu.settings, gpu_instances=instances)
        for profile in wanted:
            start = profiles.choose_placement(gpu, profile)
            if start is None:
                _save_instances(gpu.index, instances)
                ctx.write("Unable to create a GPU instance on GPU %2d using profile %d: Insufficient Resources\n"
                          "Failed to create GPU instances: Insufficient Resources\n" % (gpu.index, profile["id"]))
                return RC_OTHER
            gi = {"id": profiles.gi_id_for(profile["size"], start, gpu.mig["memory_slices"]),
                  "profile_id": profile["id"], "placement_start": start, "placement_size": profile["size"],
                  "compute_instances": []}
            instances.append(gi)
            ctx.write("Successfully created GPU instance ID %2d on GPU %2d using profile MIG %s (ID %2d)\n"
                      % (gi["id"], gpu.index, profile["name"], profile["id"]))
            if with_ci:
                ci = _new_ci(gi, profile, profile["ci_profile_id"], profile["compute_slices"])
                ctx.write("Successfully created compute instance ID %2d on GPU %2d GPU instance ID %2d "
                          "using profile MIG %s (ID %2d)\n" % (ci["id"], gpu.index, gi["id"], profile["name"],
                                                               ci["profile_id"]))
        _save_instances(gpu.index, instances)
    return RC_OK


def list_gpu_instances(ctx, gpus, gi_filter):
    rows = []
    for gpu in gpus:
        for gi in gpu.gpu_instances:
            if gi_filter is None or gi["id"] in gi_filter:
                rows.append((gpu, gi))
    if not rows:
        ctx.write(NO_GI)
        return RC_NOT_FOUND
    out = _box([" GPU instances:", " GPU   Name             Profile  Instance   Placement",
                "                          ID       ID       Start:Size"], 55)
    for gpu, gi in rows:
        profile = profiles.mig_profile_by_id(gpu, gi["profile_id"])
        placement = "%d:%d" % (gi["placement_start"], gi["placement_size"])
        cells = (gpu.index, "MIG " + profile["name"], gi["profile_id"], gi["id"], " " * 10, placement)
        out.append("|%4d  %-16s%6d%9d%s%-8s|\n" % cells)
        out.append("+" + "-" * 55 + "+\n")
    ctx.write("".join(out))
    return RC_OK


def destroy_gpu_instances(ctx, gpus, gi_filter):
    if not any(gpu.gpu_instances for gpu in gpus):
        ctx.write(NO_GI)
        return RC_NOT_FOUND
    for gpu in gpus:
        instances = [dict(gi) for gi in gpu.gpu_instances]
        present = set(gi["id"] for gi in instances)
        for wanted in gi_filter or []:
            if wanted not in present:
                ctx.write("Unable to destroy GPU instance ID %2d from GPU %2d: Not Found\n"
                          "Failed to destroy GPU instances: Not Found\n" % (wanted, gpu.index))
                return RC_NOT_FOUND
        remaining = list(instances)
        for gi in instances:
            if gi_filter is not None and gi["id"] not in gi_filter:
                continue
            if gi.get("compute_instances"):
                _save_instances(gpu.index, remaining)
                ctx.write("Unable to destroy GPU instance ID %2d from GPU %2d: In use by another client\n"
                          "Failed to destroy GPU instances: In use by another client\n" % (gi["id"], gpu.index))
                return RC_OTHER
            remaining.remove(gi)
            ctx.write("Successfully destroyed GPU instance ID %2d from GPU %2d\n" % (gi["id"], gpu.index))
        _save_instances(gpu.index, remaining)
    return RC_OK


def _target_gis(gpu, gi_filter):
    return [gi for gi in gpu.gpu_instances if gi_filter is None or gi["id"] in gi_filter]


def create_compute_instances(ctx, gpus, spec, gi_filter):
    if not any(gpu.gpu_instances for gpu in gpus):
        ctx.write(NO_GI)
        return RC_NOT_FOUND
    for gpu in gpus:
        instances = [dict(gi, compute_instances=[dict(ci) for ci in gi.get("compute_instances", [])])
                     for gi in gpu.gpu_instances]
        for gi in instances:
            if gi_filter is not None and gi["id"] not in gi_filter:
                continue
            gi_profile = profiles.mig_profile_by_id(gpu, gi["profile_id"])
            allowed = profiles.ci_profiles_for(gi_profile)
            tokens = [t.strip() for t in spec.split(",")] if isinstance(spec, str) else [None]
            for token in tokens:
                if token is None:
                    ci_profile_id, slices = gi_profile["ci_profile_id"], gi_profile["compute_slices"]
                else:
                    match = [a for a in allowed if token.isdigit() and a[0] == int(token)]
                    if not match:
                        ctx.write("Unable to create a compute instance on GPU %2d GPU instance ID %2d using "
                                  "profile %s: Invalid Argument\nFailed to create compute instances: Invalid "
                                  "Argument\n" % (gpu.index, gi["id"], token))
                        _save_instances(gpu.index, instances)
                        return RC_INVALID
                    ci_profile_id, slices = match[0]
                ci = _new_ci(gi, gi_profile, ci_profile_id, slices)
                if ci is None:
                    ctx.write("Unable to create a compute instance on GPU %2d GPU instance ID %2d using profile "
                              "%d: Insufficient Resources\nFailed to create compute instances: Insufficient "
                              "Resources\n" % (gpu.index, gi["id"], ci_profile_id))
                    _save_instances(gpu.index, instances)
                    return RC_OTHER
                ctx.write("Successfully created compute instance ID %2d on GPU %2d GPU instance ID %2d using "
                          "profile %s (ID %2d)\n" % (ci["id"], gpu.index, gi["id"],
                                                     profiles.ci_name(gi_profile, slices), ci_profile_id))
        _save_instances(gpu.index, instances)
    return RC_OK


def list_compute_instances(ctx, gpus, gi_filter, ci_filter):
    if not any(gpu.gpu_instances for gpu in gpus):
        ctx.write(NO_GI)
        return RC_NOT_FOUND
    rows = []
    for gpu in gpus:
        for gi in _target_gis(gpu, gi_filter):
            for ci in sorted(gi.get("compute_instances", []), key=lambda c: c["id"]):
                if ci_filter is None or ci["id"] in ci_filter:
                    rows.append((gpu, gi, ci))
    if not rows:
        ctx.write(NO_CI)
        return RC_NOT_FOUND
    out = _box([" Compute instances:", " GPU     GPU       Name             Profile   Instance   Placement",
                "       Instance                       ID        ID       Start:Size",
                "         ID"], 68)
    for gpu, gi, ci in rows:
        gi_profile = profiles.mig_profile_by_id(gpu, gi["profile_id"])
        out.append("|%4d%7d%s%-16s%6d%10d%s%-8s|\n" % (
            gpu.index, gi["id"], " " * 7, profiles.ci_name(gi_profile, ci["slices"]), ci["profile_id"], ci["id"],
            " " * 10, "%d:%d" % (ci["placement_start"], ci["placement_size"])))
        out.append("+" + "-" * 68 + "+\n")
    ctx.write("".join(out))
    return RC_OK


def destroy_compute_instances(ctx, gpus, gi_filter, ci_filter):
    if not any(gpu.gpu_instances for gpu in gpus):
        ctx.write(NO_GI)
        return RC_NOT_FOUND
    destroyed = 0
    for gpu in gpus:
        instances = [dict(gi, compute_instances=list(gi.get("compute_instances", []))) for gi in gpu.gpu_instances]
        for gi in instances:
            if gi_filter is not None and gi["id"] not in gi_filter:
                continue
            keep = []
            for ci in sorted(gi["compute_instances"], key=lambda c: c["id"]):
                if ci_filter is not None and ci["id"] not in ci_filter:
                    keep.append(ci)
                    continue
                destroyed += 1
                ctx.write("Successfully destroyed compute instance ID %2d from GPU %2d GPU instance ID %2d\n"
                          % (ci["id"], gpu.index, gi["id"]))
            gi["compute_instances"] = keep
        _save_instances(gpu.index, instances)
    if not destroyed:
        ctx.write(NO_CI)
        return RC_NOT_FOUND
    return RC_OK


def main(ctx, argv):
    try:
        opts = _parse(argv)
        gi_filter = _ids(opts.get("gi"))
        ci_filter = _ids(opts.get("ci"))
    except _Usage as exc:
        ctx.write(SUB_USAGE % exc.args[0])
        return RC_INVALID
    commands = [c for c in COMMANDS if c in opts]
    if len(commands) != 1 or ("default_ci" in opts and commands[0] != "cgi"):
        ctx.write(ERR_ONE_COMMAND if len(commands) > 1 else SUB_USAGE % (argv[0] if argv else "mig"))
        return RC_INVALID
    chosen = select_gpus(ctx, opts.get("id"))
    if chosen is None:
        return RC_NOT_FOUND
    gpus = [gpu for gpu in chosen if gpu.mig_current]
    if not gpus:
        ctx.write(NO_MIG)
        return RC_NOT_FOUND
    command = commands[0]
    if command == "lgip":
        return list_profiles(ctx, gpus)
    if command == "lgipp":
        return list_placements(ctx, gpus)
    if command == "cgi":
        return create_gpu_instances(ctx, gpus, opts["cgi"], bool(opts.get("default_ci")))
    if command == "lgi":
        return list_gpu_instances(ctx, gpus, gi_filter)
    if command == "dgi":
        return destroy_gpu_instances(ctx, gpus, gi_filter)
    if command == "cci":
        return create_compute_instances(ctx, gpus, opts["cci"], gi_filter)
    if command == "lci":
        return list_compute_instances(ctx, gpus, gi_filter, ci_filter)
    return destroy_compute_instances(ctx, gpus, gi_filter, ci_filter)
