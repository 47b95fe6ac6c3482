# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The shipped Prometheus files pass Prometheus' own checks (promtool, Debian's prometheus package).

- ``promtool check rules`` and ``promtool test rules`` on
  roles/dcgm_exporter/files/prometheus-alerts.yml, with the unit tests of
  prometheus-alerts.test.yml beside this file: every alert fires on what it
  is for and stays quiet otherwise.
- ``promtool check config`` on a complete prometheus.yml: the shipped scrape
  job merged as its header says (as shipped, and with its TLS and basic auth
  block uncommented) and the rules in rule_files.

promtool missing is a failure, not a skip: ``make setup`` installs it.
molecule/dcgm/tests/test_prometheus.py runs the same files in a real
Prometheus against the role's exporter.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.loading import REPO_ROOT, load_module as load_file

JOB = load_file(os.path.join(REPO_ROOT, 'molecule', '_shared', 'prometheus_job.py'), 'prometheus_job')
RULE_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'prometheus-alerts.test.yml')
DEFAULTS = os.path.join(REPO_ROOT, 'roles', 'dcgm_exporter', 'defaults', 'main.yml')
SEVERITIES = {'critical', 'warning'}


@pytest.fixture(scope='module')
def promtool():
    path = shutil.which('promtool')
    if not path:
        pytest.fail("promtool not found: it comes with Debian's prometheus package, which `make setup` installs "
                    "(apt-get install prometheus)")
    return path


def run(*argv):
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=120, check=False)
    return done.returncode, done.stdout


def _load(path):
    with open(path, encoding='utf-8') as handle:
        return yaml.safe_load(handle)


def test_promtool_checks_the_rules(promtool):
    rc, out = run(promtool, 'check', 'rules', JOB.ALERTS)
    assert rc == 0, out
    assert 'SUCCESS: %d rules found' % len(JOB.alert_rules()) in out, out


def test_promtool_unit_tests_of_the_rules_pass(promtool):
    rc, out = run(promtool, 'test', 'rules', RULE_TESTS)
    assert rc == 0, out
    assert 'SUCCESS' in out and 'FAILED' not in out, out


def test_every_alert_is_tested_firing_and_quiet():
    """Each alert has a promtool case where it fires and one where it does not."""
    rule_files = _load(RULE_TESTS)['rule_files']
    assert [os.path.realpath(os.path.join(os.path.dirname(RULE_TESTS), f)) for f in rule_files] == \
        [os.path.realpath(JOB.ALERTS)]
    cases = [case for test in _load(RULE_TESTS)['tests'] for case in test['alert_rule_test']]
    for name in (rule['alert'] for rule in JOB.alert_rules()):
        mine = [case for case in cases if case['alertname'] == name]
        assert any(case['exp_alerts'] for case in mine), '%s never expected to fire' % name
        assert any(not case['exp_alerts'] for case in mine), '%s never expected to stay quiet' % name


def test_rules_read_only_default_counters_and_carry_severity_and_text():
    defaults = {counter['name'] for counter in _load(DEFAULTS)['dcgm_exporter_counters']}
    for rule in JOB.alert_rules():
        metrics = set(re.findall(r'\bDCGM_[A-Z0-9_]+', rule['expr']))
        assert metrics <= defaults, (rule['alert'], metrics - defaults)
        assert rule['labels']['severity'] in SEVERITIES, rule['alert']
        assert rule['annotations']['summary'] and rule['annotations']['description'], rule['alert']
        if 'up{' not in rule['expr']:
            # Not about a target, so about a GPU: it names the host and the GPU, as the exporter labels them.
            for annotation in ('summary', 'description'):
                text = rule['annotations'][annotation]
                assert '$labels.Hostname' in text and '$labels.gpu' in text, (rule['alert'], annotation)


@pytest.mark.parametrize('tls', [False, True], ids=['as shipped', 'TLS and basic auth uncommented'])
def test_promtool_checks_a_prometheus_yml_with_the_shipped_job(promtool, tmp_path, tls):
    job = JOB.shipped_job(tls=tls)
    # The files the snippet names live under /etc/prometheus on a real server;
    # here they are made in a temporary directory, and only their paths change.
    sd_file = JOB.write_yaml(tmp_path / 'dcgm-exporter.yml',
                             [{'targets': ['gpu-node-01.example:9400'], 'labels': {'cluster': 'training'}}])
    job['file_sd_configs'][0]['files'] = [sd_file]
    if tls:
        (tmp_path / 'ca.crt').write_text('not parsed by promtool check config\n')
        (tmp_path / 'password').write_text('secret\n')
        job['tls_config']['ca_file'] = str(tmp_path / 'ca.crt')
        job['basic_auth']['password_file'] = str(tmp_path / 'password')
    config = JOB.write_yaml(tmp_path / 'prometheus.yml', JOB.prometheus_config([job]))
    rc, out = run(promtool, 'check', 'config', config)
    assert rc == 0, out
    assert 'SUCCESS: %d rules found' % len(JOB.alert_rules()) in out, out
    assert 'SUCCESS: %s is valid prometheus config file syntax' % config in out, out


# --- the node-local health check's rules (roles/health/files) --------------------------------

HEALTH_ALERTS = os.path.join(REPO_ROOT, 'roles', 'health', 'files', 'gpufleet-health-alerts.yml')
HEALTH_RULE_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'health-alerts.test.yml')


def test_promtool_checks_and_tests_the_health_rules(promtool):
    rules = [rule for group in _load(HEALTH_ALERTS)['groups'] for rule in group['rules']]
    rc, out = run(promtool, 'check', 'rules', HEALTH_ALERTS)
    assert rc == 0 and 'SUCCESS: %d rules found' % len(rules) in out, out
    rc, out = run(promtool, 'test', 'rules', HEALTH_RULE_TESTS)
    assert rc == 0 and 'SUCCESS' in out and 'FAILED' not in out, out
    cases = [case for test in _load(HEALTH_RULE_TESTS)['tests'] for case in test['alert_rule_test']]
    for rule in rules:
        mine = [case for case in cases if case['alertname'] == rule['alert']]
        assert any(case['exp_alerts'] for case in mine) and any(not case['exp_alerts'] for case in mine), rule['alert']
        assert rule['labels']['severity'] in SEVERITIES and set(re.findall(r'\bgpufleet_health_\w+', rule['expr'])) <= {
            'gpufleet_health_finding', 'gpufleet_health_last_run_timestamp_seconds'}, rule['alert']
