# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated DCGM family (test double): ``nv-hostengine`` and ``dcgmi``
(``main``), their protocol, fields, diagnostics and renderers, and
``dcgm-exporter`` (``exporter``, ``exporter_config``).
"""
