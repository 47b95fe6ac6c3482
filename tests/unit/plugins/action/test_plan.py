# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet.nvidia.plan, run by ansible-playbook on this machine (local
connection), in check mode and in a real run: what a role's plan shows, when
it is shown without -v, when it reports changed, and what it refuses."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.action.local_play import play_results, run_play

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: A plan with work
      gpufleet.nvidia.plan:
        role: example
        changes:
          packages: [a 1.0-1, b 1.0-1]
          holds: hold a, b
          settings: []
          cdi: ""
          restart: false
        notes:
          - "{{ 'Check mode: the repository is not configured yet.' if ansible_check_mode else '' }}"
          - ""
        warnings:
          - "{{ 'Version 1.0 is affected by CVE-0000-0001.' }}"
          - ""
      register: with_work

    - name: A converged host
      gpufleet.nvidia.plan:
        role: example
        changes:
          packages: []
          holds: ""
      register: converged

%s
    - name: Keep what the plan returned
      ansible.builtin.debug:
        msg: "RESULTS {{ {'with_work': with_work, 'converged': converged, 'refused': refused | default([])} | to_json }}"
"""

# Each wrong call in a block whose rescue keeps the message: one run for all.
WRONG = """
    - name: A wrong call
      block:
        - name: %s
          gpufleet.nvidia.plan: %s
      rescue:
        - name: Keep the message
          ansible.builtin.set_fact:
            refused: "{{ refused | default([]) + [ansible_failed_result.msg] }}"
"""
WRONG_CALLS = [
    ({'changes': {'a': ['b']}}, 'role must be the name of the role'),
    ({'role': 'x', 'change': {}}, 'unknown parameters change'),
    ({'role': 'x', 'changes': ['a']}, 'changes must be a mapping'),
    ({'role': 'x', 'notes': 'one note'}, 'notes must be a list of strings'),
]


def _run(tmp_path, play, *options):
    path = tmp_path / 'play.yml'
    path.write_text(play % ''.join(
        WRONG % (json.dumps('Call the plan with ' + json.dumps(call)), json.dumps(call)) for call, _message in WRONG_CALLS))
    return run_play(path, *options)


def _block(stdout, task):
    """The lines the default callback printed for one task."""
    return stdout.split('TASK [%s]' % task, 1)[1].split('TASK [', 1)[0]


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    real = _run(tmp_path_factory.mktemp('real'), PLAY)
    check = _run(tmp_path_factory.mktemp('check'), PLAY, '--check')
    return {'real': (real, play_results(real)), 'check': (check, play_results(check))}


def test_the_plan_keeps_only_the_work_and_the_notes(runs):
    for mode in ('real', 'check'):
        plan = runs[mode][1]['with_work']['plan']
        assert plan['role'] == 'example'
        assert plan['changes'] == {'packages': ['a 1.0-1', 'b 1.0-1'], 'holds': 'hold a, b'}, mode
        assert runs[mode][1]['converged']['plan']['changes'] == {}, mode
    assert runs['check'][1]['with_work']['plan']['notes'] == ['Check mode: the repository is not configured yet.']
    assert runs['real'][1]['with_work']['plan']['notes'] == []


def test_check_mode_reports_the_work_as_a_change_and_a_real_run_never(runs):
    assert runs['check'][1]['with_work']['changed'] is True
    assert runs['check'][1]['converged']['changed'] is False
    assert runs['real'][1]['with_work']['changed'] is False
    assert runs['real'][1]['converged']['changed'] is False
    assert 'changed=1' in runs['check'][0].stdout and 'changed=0' in runs['real'][0].stdout


def test_the_plan_is_printed_without_v_when_it_has_something_to_say(runs):
    for mode in ('real', 'check'):
        stdout = runs[mode][0].stdout
        work = _block(stdout, 'A plan with work')
        assert 'packages: a 1.0-1, b 1.0-1; holds: hold a, b' in work, (mode, work)
        assert '[WARNING]: Version 1.0 is affected by CVE-0000-0001.' in stdout.replace('\n', ' ').replace('  ', ' '), mode
    assert 'Check mode: example: a real run changes' in _block(runs['check'][0].stdout, 'A plan with work')
    # Check mode always says what the plan is; a converged host in a real run is a quiet "ok".
    assert 'example: nothing to change' in _block(runs['check'][0].stdout, 'A converged host')
    assert '"msg"' not in _block(runs['real'][0].stdout, 'A converged host')


def test_a_wrong_call_fails_with_what_is_wrong(runs):
    for mode in ('real', 'check'):
        refused = runs[mode][1]['refused']
        assert len(refused) == len(WRONG_CALLS), (mode, refused)
        for message, (_call, expected) in zip(refused, WRONG_CALLS):
            assert expected in message, (mode, message)
