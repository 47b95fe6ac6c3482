# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Experiment (benchmark only): load every Jinja filter and test plugin in the
# main ansible-playbook process before the first worker forks, so that the
# forked workers inherit the loaders' caches instead of enumerating the
# plugins again each.
from __future__ import annotations

DOCUMENTATION = r"""
name: preload_jinja_plugins
type: aggregate
short_description: load the Jinja plugins once in the main process (benchmark experiment)
description: [Benchmark tooling of gpufleet.nvidia, not part of the collection.]
"""

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader, test_loader


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "preload_jinja_plugins"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_play_start(self, play):
        list(filter_loader.all())
        list(test_loader.all())
        for name in ("gpufleet.nvidia.driver_branch",):
            try:
                filter_loader.get(name)
            except Exception:  # noqa: BLE001 - an experiment, never a failure
                pass
