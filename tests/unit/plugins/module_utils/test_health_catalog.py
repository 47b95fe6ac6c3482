# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The health catalog as data: its own consistency, model matching and the operator's overrides."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import os
import re

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import health_catalog
from ansible_collections.gpufleet.nvidia.plugins.module_utils.health_catalog import (
    ACTIONS,
    CHECKS,
    MODELS,
    SEVERITIES,
    SOURCES,
    THRESHOLDS,
    Catalog,
    check_overrides,
    model_key,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.nvidia_smi_failures import HINTS

PLUGINS = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'plugins')


def test_every_check_has_a_severity_an_action_of_the_ladder_and_a_known_source():
    assert ACTIONS == ('none', 'watch', 'drain', 'reset', 'reboot', 'rma')
    for code, entry in CHECKS.items():
        assert entry['severity'] in SEVERITIES, code
        assert entry['action'] in ACTIONS, code
        assert entry['source'] in SOURCES, code
        assert entry['what'].strip(), code
    for name, entry in THRESHOLDS.items():
        assert entry['source'] in SOURCES, name
        assert set(entry.get('models', {})) <= set(key for key, _pattern in MODELS), name
    for action in (set(health_catalog.NVIDIA_SMI_ACTIONS.values()) | set(health_catalog.XID_ACTIONS.values())
                   | set(health_catalog.XID_CATEGORY_ACTIONS.values())):
        assert action in ACTIONS


def _emitted_codes():
    """Every literal finding code the collection's plugins can emit (first argument of a _finding or found
    call, or a 'code': '...' entry)."""
    found = set()
    for folder, _dirs, files in os.walk(PLUGINS):
        for name in files:
            if not name.endswith('.py'):
                continue
            with open(os.path.join(folder, name)) as handle:
                tree = ast.parse(handle.read())
            for node in ast.walk(tree):
                # _finding(code, ...), and gpu_validation's self.found(code, ...).
                if (isinstance(node, ast.Call) and (getattr(node.func, 'id', None) == '_finding'
                                                    or getattr(node.func, 'attr', None) == 'found') and node.args
                        and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                    found.add(node.args[0].value)
                if isinstance(node, ast.Dict):
                    for key, value in zip(node.keys, node.values):
                        if (isinstance(key, ast.Constant) and key.value == 'code' and isinstance(value, ast.Constant)
                                and isinstance(value.value, str)):
                            found.add(value.value)
    return found


def _literals_outside_the_catalog():
    found = set()
    for folder, _dirs, files in os.walk(PLUGINS):
        for name in files:
            if name.endswith('.py') and name != 'health_catalog.py':
                with open(os.path.join(folder, name)) as handle:
                    tree = ast.parse(handle.read())
                found.update(node.value for node in ast.walk(tree)
                             if isinstance(node, ast.Constant) and isinstance(node.value, str))
    return found


def test_every_code_the_plugins_emit_is_in_the_catalog():
    emitted = _emitted_codes()
    assert len(emitted) >= 40
    missing = sorted(code for code in emitted if code not in CHECKS and not re.match(r'^(xid|sxid)_\d+$', code))
    assert missing == []
    # ... and every entry of the catalog is a check some plugin raises (families aside): its code appears as a
    # string outside the catalog.
    assert sorted(code for code in CHECKS if not code.endswith('*') and code not in _literals_outside_the_catalog()) == []
    # ... and every nvidia-smi failure reason is covered by the nvidia_smi_* family with an action.
    for reason in HINTS:
        assert Catalog().entry('nvidia_smi_%s' % reason)[1] in ACTIONS


@pytest.mark.parametrize('name, key', [
    ('NVIDIA H100 80GB HBM3', 'H100'), ('NVIDIA H100 PCIe', None), ('NVIDIA H100 NVL', None),
    ('NVIDIA H200', 'H200'), ('NVIDIA H200 NVL', None), ('NVIDIA GH200 480GB', 'GH200'),
    ('NVIDIA B200', 'B200'), ('NVIDIA GB200', 'GB200'), ('NVIDIA A100-SXM4-80GB', 'A100'),
    ('NVIDIA A100-SXM4-40GB', 'A100'), ('NVIDIA A100 80GB PCIe', None), ('NVIDIA L40S', 'L40S'),
    ('NVIDIA L4', 'L4'), ('NVIDIA L40', None), ('Tesla V100-SXM2-32GB', None), (None, None),
])
def test_models_match_on_word_boundaries_and_form_factors(name, key):
    assert model_key(name) == key


def test_thresholds_resolve_per_model_then_operator_default_then_model_override():
    catalog = Catalog()
    assert catalog.threshold('nvlink_expected_active', 'NVIDIA H100 80GB HBM3') == 18
    assert catalog.threshold('nvlink_expected_active', 'NVIDIA A100-SXM4-80GB') == 12
    assert catalog.threshold('nvlink_expected_active', 'NVIDIA L40S') is None
    assert catalog.threshold('nvlink_expected_active', None) is None
    assert catalog.threshold_source('nvlink_expected_active', 'NVIDIA H100 80GB HBM3') == 'nvidia-nvlink'
    site = Catalog(thresholds={'nvlink_expected_active': {'default': 16, 'A100': 11}, 'temperature_margin_c': 8})
    assert site.threshold('nvlink_expected_active', 'NVIDIA H100 80GB HBM3') == 16
    assert site.threshold('nvlink_expected_active', 'NVIDIA A100-SXM4-80GB') == 11
    assert site.threshold('temperature_margin_c', 'NVIDIA L4') == 8
    assert site.threshold_source('temperature_margin_c') == 'inventory'
    assert site.threshold('max_smi_seconds') == 10.0


def test_operator_overrides_change_severity_and_action_and_say_so():
    catalog = Catalog(checks={'persistence_mode_off': {'severity': 'info', 'action': 'watch'},
                              'xid_13': {'severity': 'warning'}})
    finding = catalog.annotate({'code': 'persistence_mode_off', 'severity': 'warning'})
    assert (finding['severity'], finding['action'], finding['source']) == ('info', 'watch', 'inventory')
    xid = catalog.annotate({'code': 'xid_13', 'severity': 'info', 'action': 'none'})
    assert (xid['severity'], xid['action']) == ('warning', 'none')
    plain = Catalog().annotate({'code': 'nvidia_smi_gpu_lost', 'severity': 'critical'})
    assert (plain['action'], plain['source']) == ('reboot', 'nvidia-smi')


@pytest.mark.parametrize('thresholds, checks, expected', [
    ({'temprature_margin_c': 5}, None, "unknown threshold 'temprature_margin_c'"),
    ({'nvlink_expected_active': {'H300': 18}}, None, "health_thresholds.nvlink_expected_active: unknown GPU model 'H300'"),
    ({'temperature_margin_c': 'five'}, None, "health_thresholds.temperature_margin_c: must be a number of C"),
    ({'temperature_margin_c': True}, None, 'must be a number'),
    ({'max_smi_seconds': -1}, None, 'must be a number'),
    (None, {'persistance_mode_off': {'severity': 'info'}}, "unknown finding code 'persistance_mode_off'"),
    (None, {'xid_13': {'severity': 'minor'}}, "health_check_overrides.xid_13.severity: must be one of"),
    (None, {'xid_13': {'action': 'replace'}}, "health_check_overrides.xid_13.action: must be one of none, watch"),
    (None, {'xid_13': {'colour': 'red'}}, "health_check_overrides.xid_13: unknown key 'colour'"),
    (None, {'xid_13': 'info'}, 'must be a mapping with severity and/or action'),
    ('many', None, 'health_thresholds must be a mapping'),
])
def test_unknown_or_wrong_overrides_are_refused_by_name(thresholds, checks, expected):
    problems = check_overrides(thresholds, checks)
    assert len(problems) == 1 and expected in problems[0], problems
    with pytest.raises(ValueError, match=re.escape(expected)):
        Catalog(thresholds if isinstance(thresholds, dict) else None if thresholds is None else thresholds, checks)


def test_sound_overrides_pass():
    assert check_overrides({'nvlink_expected_active': {'default': None, 'H100': 18}, 'retired_pages_max': 10},
                           {'sxid_12028': {'severity': 'critical', 'action': 'reboot'},
                            'nvidia_smi_timeout': {'action': 'reset'}}) == []
    assert check_overrides(None, None) == [] and check_overrides({}, {}) == []


def test_the_health_roles_readme_shows_the_catalog_as_it_is():
    import importlib.util
    tool = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'harness', 'health_catalog_tables.py')
    spec = importlib.util.spec_from_file_location('health_catalog_tables', tool)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with open(module.README) as handle:
        text = handle.read()
    assert module.render(text) == text, 'run python3 tests/harness/health_catalog_tables.py'
    for code in CHECKS:
        assert '| `%s` |' % code in text
