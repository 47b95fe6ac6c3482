# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated ``nvidia-ctk`` (test double).

``main`` dispatches the commands; ``common`` holds what the commands share
(errors, flag parsing, the toolkit version), so that no command imports ``main``.
"""
