# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated DCGM 4 diagnostics (``dcgmi diag``) run by the host engine (test double).

Levels select the same tests as DCGM 4 (1 quick: deployment checks; 2 medium:
+ memory and PCIe; 3 long: + diagnostic, stress tests; 4 xlong: + memtest
and pulse test).  The simulator finishes at once; the results are derived
from the host state so that what a real run would flag is flagged here too:

* ``software`` fails for a GPU without persistence mode, with the warning
  DCGM 4 prints;
* a per-GPU entry ``"dcgm_diag_failures": {"<test>": "<message>"}`` in the
  simulator's ``state.json`` makes that test fail on that GPU.
"""

from nvsim import env
from nvsim import gpus as gpu_info

LEVELS = {"1": 1, "quick": 1, "short": 1, "2": 2, "medium": 2, "3": 3, "long": 3, "4": 4, "xlong": 4}
CATEGORY_ORDER = ("Deployment", "Hardware", "Integration", "Stress")
CATEGORY_OF = {
    "software": "Deployment",
    "memory": "Hardware", "diagnostic": "Hardware", "nvbandwidth": "Hardware",
    "memtest": "Hardware", "pulse_test": "Hardware",
    "pcie": "Integration",
    "memory_bandwidth": "Stress", "targeted_stress": "Stress", "targeted_power": "Stress",
}
# DCGM_FR_PERSISTENCE_MODE and its category/severity as DCGM 4 reports them.
PERSISTENCE_WARNING = {"error_category": 8, "error_id": 29, "error_severity": 5}


class DiagError(ValueError):
    pass


def _version_tuple(version):
    parts = []
    for piece in version.split(".")[:3]:
        parts.append(int(piece) if piece.isdigit() else 0)
    return tuple(parts)


def tests_for(run, dcgm_version):
    """Test names for a --run value (a level, its alias, or test names)."""
    level = LEVELS.get(run.strip().lower())
    if level is not None:
        tests = ["software"]
        if level >= 2:
            tests += ["memory", "pcie"]
        if level >= 3:
            tests += ["diagnostic"]
            if _version_tuple(dcgm_version) >= (4, 3, 0):
                tests += ["nvbandwidth"]
            tests += ["memory_bandwidth", "targeted_stress", "targeted_power"]
        if level >= 4:
            tests += ["memtest", "pulse_test"]
        return tests
    names = [name.strip().lower() for name in run.split(",") if name.strip()]
    for name in names:
        if name not in CATEGORY_OF or name == "software":
            raise DiagError(name)
    return names


def _failures(gpu_index):
    state = env.load_state()
    return env.gpu_state(state, gpu_index).get("dcgm_diag_failures") or {}


def run(run_value, gpu_ids, dcgm_version):
    """Run the tests on the GPUs with the given ids; returns a result dict.

    {"categories": [[category, [test]]], "entities": [{device_id, entity_id,
    serial_num}], "failed": bool} (JSON-serialisable: it crosses the socket)
    with test = {"name", "status", "gpus": [(id, status)], "warnings": [text],
                 "results": [per-entity JSON result]}
    """
    names = tests_for(run_value, dcgm_version)
    devices = [gpu for gpu in gpu_info.load_gpus() if gpu.index in gpu_ids]
    by_category = {}
    failed = False
    for name in names:
        test = {"name": name, "gpus": [], "warnings": [], "results": []}
        for gpu in devices:
            warnings = []
            if name == "software" and not gpu.persistence:
                warnings.append(dict(PERSISTENCE_WARNING, warning=(
                    "Persistence Mode: Persistence mode for GPU %d is disabled. Enable persistence "
                    "mode by running \"nvidia-smi -i <gpuId> -pm 1 \" as root." % gpu.index)))
            message = _failures(gpu.index).get(name)
            if message:
                warnings.append({"error_category": 0, "error_id": 0, "error_severity": 5,
                                 "warning": message})
            status = "Fail" if warnings else "Pass"
            test["gpus"].append((gpu.index, status))
            result = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu.index,
                      "status": status}
            if warnings:
                result["warnings"] = warnings
                test["warnings"].extend(w["warning"] for w in warnings)
            test["results"].append(result)
        test["status"] = "Fail" if any(s == "Fail" for _unused, s in test["gpus"]) else "Pass"
        failed = failed or test["status"] == "Fail"
        by_category.setdefault(CATEGORY_OF[name], []).append(test)
    categories = [[c, by_category[c]] for c in CATEGORY_ORDER if c in by_category]
    entities = [{"device_id": gpu_info.device_id(gpu), "entity_id": gpu.index,
                 "serial_num": gpu.spec.get("serial") or "<<<NOT_SUPPORTED>>>"} for gpu in devices]
    return {"categories": categories, "entities": entities, "failed": failed}


def json_document(result, driver_version, dcgm_version):
    """The JSON document of ``dcgmi diag -j`` in DCGM 4's layout."""
    categories = []
    for category, tests in result["categories"]:
        categories.append({"category": category, "tests": [
            {"name": t["name"], "results": t["results"], "test_summary": {"status": t["status"]}}
            for t in tests]})
    return {
        "DCGM Diagnostic": {"test_categories": categories},
        "entity_groups": [{
            "entities": result["entities"],
            "entity_group": "GPU",
            "entity_group_id": 1,
        }],
        "metadata": {"Driver Version Detected": driver_version, "version": dcgm_version},
    }
