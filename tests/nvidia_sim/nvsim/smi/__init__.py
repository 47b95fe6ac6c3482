# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated ``nvidia-smi`` (test double).

``main`` parses and dispatches; ``common`` holds what every part shares
(exit codes, messages, the context, option parsing), so that no part imports
``main`` and ``main`` imports the parts only when a command needs them.
"""
