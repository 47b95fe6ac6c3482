# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Entry point of every simulated tool: ``python3 -S launch.py <tool> [args]``.

The executables in ``bin/`` are two-line shell launchers (ansible-test only
accepts generic shebangs); this maps their name to the simulator function.
"""
import importlib
import os
import sys

# tool name -> (module, function, takes argv)
TOOLS = {
    "nvidia-smi": ("smi.main", "main", False),
    "nvidia-persistenced": ("persistenced", "main", True),
    "nv-hostengine": ("dcgm.main", "hostengine_main", True),
    "dcgmi": ("dcgm.main", "dcgmi_main", True),
    "dcgm-exporter": ("dcgm.exporter", "main", True),
    "nv-fabricmanager": ("fabricmanager", "main", True),
    "nvidia-ctk": ("ctk.main", "main", True),
    "nvidia-sim-hw": ("tools", "hw_main", False),
    "nvidia-sim-modload": ("tools", "modload_main", False),
    "nvidia-sim-workload": ("tools", "workload_main", False),
    # Host-side test doubles only (not packaged): tests/unit/integration.
    "nvbandwidth": ("acceptance", "nvbandwidth_main", True),
    "all_reduce_perf": ("acceptance", "all_reduce_main", True),
}


def main():
    tool = sys.argv[1]
    # The script's own directory (nvsim/) must not shadow anything: import the
    # package from its parent, as an installed tool would.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.argv = [tool] + sys.argv[2:]
    module_name, function, takes_argv = TOOLS[tool]
    entry = getattr(importlib.import_module("nvsim." + module_name), function)
    return entry(sys.argv) if takes_argv else entry()


if __name__ == "__main__":
    sys.exit(main())
