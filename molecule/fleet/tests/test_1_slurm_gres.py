"""Slurm GRES of the simulated GPU nodes, judged by real Slurm (Debian's 22.05).

side_effect.yml ran the slurm_gres role and started slurmctld and slurmd with
the generated gres.conf and NodeName lines. Here ``slurmd -G`` (slurmd's own
parse of gres.conf against slurm.conf) and slurmctld's view of each node
must give the GPU count and types that nvidia-smi reports: whole GPUs by
their model, MIG devices by model and profile.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import GPU_NODES, out, slurm_node  # noqa: E402  pylint: disable=wrong-import-position,import-error

TYPES = {"NVIDIA H100 80GB HBM3": "h100", "NVIDIA L40S": "l40s", "NVIDIA A100-SXM4-40GB": "a100"}


def expected(node):
    """What nvidia-smi reports: {type: count}, with MIG devices counted by profile."""
    gpus = out(node, "nvidia-smi --query-gpu=index,name,mig.mode.current --format=csv,noheader").strip().splitlines()
    listing = out(node, "nvidia-smi -L")
    counts = {}
    for line in gpus:
        index, name, mig = [f.strip() for f in line.split(",")]
        if mig == "Enabled":
            block = re.search(r"^GPU %s:.*?(?=^GPU |\Z)" % index, listing, re.S | re.M).group(0)
            for profile in re.findall(r"MIG (\S+)\s+Device", block):
                key = "%s_%s" % (TYPES[name], profile)
                counts[key] = counts.get(key, 0) + 1
        else:
            counts[TYPES[name]] = counts.get(TYPES[name], 0) + 1
    return counts


def slurmd_parsed(node):
    """``slurmd -G``: one "Gres Name=gpu Type=<type> Count=<n> ..." line per gres.conf line slurmd accepted."""
    text = out(node, "slurmd -G 2>&1")
    assert "error" not in text.lower() and "fatal" not in text.lower(), text
    counts = {}
    for match in re.finditer(r"Gres Name=gpu Type=(\S+) Count=(\d+)", text):
        counts[match.group(1)] = counts.get(match.group(1), 0) + int(match.group(2))
    return counts, text


def test_slurmd_parses_the_generated_gres_conf_as_nvidia_smi_reports_the_gpus():
    seen = {}
    for node in GPU_NODES:
        counts, text = slurmd_parsed(node)
        assert counts == expected(node), (node, text)
        seen[node] = counts
    # The A100's MIG layout (two 3g.20gb instances) is what Slurm schedules there.
    assert seen["fleet-a100"] == {"a100_3g.20gb": 2}
    assert seen["fleet-hgx"] == {"h100": 8} and seen["fleet-l40s"] == {"l40s": 2}


def test_slurmctld_registered_the_nodes_with_their_gres():
    for node in GPU_NODES:
        view = slurm_node(node)
        registered = dict((m.group(1), int(m.group(2))) for m in re.finditer(r"gpu:([^:,(]+):(\d+)", view["gres"]))
        assert registered == expected(node), view["text"]
        assert view["state"] == "IDLE", view["text"]


def test_cores_follow_the_gpus_cpu_affinity():
    # HGX: GPUs 0-3 on the first socket (CPUs 0-55,112-167 = cores 0-55), 4-7 on the second.
    text = out("fleet-hgx", "slurmd -G 2>&1")
    cores = re.findall(r"File=/dev/nvidia(\d) Cores=(\S+)", text)
    assert dict(cores) == dict([(str(i), "0-55") for i in range(4)] + [(str(i), "56-111") for i in range(4, 8)]), text
    node_line = out("fleet-hgx", "cat /etc/slurm/gpufleet-node.conf")
    assert "CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 ThreadsPerCore=2" in node_line
    # The A100's MIG devices: the GPU's device file and its GPU and compute instance capabilities.
    assert re.search(r"MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap\d+,/dev/nvidia-caps/nvidia-cap\d+",
                     out("fleet-a100", "cat /etc/slurm/gres.conf"))
