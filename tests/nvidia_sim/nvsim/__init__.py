# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated NVIDIA stack (test double; never installed on a real host).

Kept empty on purpose: every tool imports only the modules it needs so that
a simulated ``nvidia-smi`` starts as fast as a real one.
"""
