# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nvidia contributors
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet.nvidia.config_file with compare_only, run by ansible-playbook on
this machine (local connection) against real files read by
host_state_info: it says whether a file differs (content, mode, a missing
file, one to remove) and never writes, in a real run as in check mode."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.action.local_play import play_results, run_play

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    dir: %(dir)s
  tasks:
    - name: Read the files
      gpufleet.nvidia.host_state_info:
        files: ["{{ dir }}/same", "{{ dir }}/other", "{{ dir }}/mode", "{{ dir }}/missing"]
      register: state

    - name: Compare
      gpufleet.nvidia.config_file:
        content: "{{ item.content }}"
        dest: "{{ dir }}/{{ item.name }}"
        state: "{{ item.state | default('present') }}"
        mode: "0644"
        known: "{{ state.files }}"
        compare_only: true
      loop:
        - {name: same, content: "wanted\\n"}
        - {name: other, content: "wanted\\n"}
        - {name: mode, content: "wanted\\n"}
        - {name: missing, content: "wanted\\n"}
        - {name: missing, content: "", state: absent}
        - {name: same, content: "", state: absent}
      register: compared

    - name: Compare without a record
      block:
        - name: A call without known
          gpufleet.nvidia.config_file:
            content: "x"
            dest: "{{ dir }}/same"
            compare_only: true
      rescue:
        - name: Keep the message
          ansible.builtin.set_fact:
            refused: "{{ ansible_failed_result.msg }}"

    - name: Keep the results
      ansible.builtin.debug:
        msg: "RESULTS {{ {'compared': compared.results | map(attribute='differs') | list,
                          'changed': compared.results | map(attribute='changed') | list,
                          'refused': refused | default('')} | to_json }}"
"""


def _run(tmp_path, *options):
    files = tmp_path / 'files'
    files.mkdir()
    (files / 'same').write_text('wanted\n')
    (files / 'other').write_text('something else\n')
    (files / 'mode').write_text('wanted\n')
    for name in ('same', 'other'):
        os.chmod(str(files / name), 0o644)
    os.chmod(str(files / 'mode'), 0o600)
    path = tmp_path / 'play.yml'
    path.write_text(PLAY % {'dir': str(files)})
    proc = run_play(path, *options)
    results = play_results(proc)
    contents = dict((name, (files / name).read_text()) for name in ('same', 'other', 'mode'))
    return proc, results, contents, sorted(os.listdir(str(files)))


@pytest.mark.parametrize('options', [[], ['--check']], ids=['real run', 'check mode'])
def test_compare_only_says_what_differs_and_writes_nothing(tmp_path, options):
    proc, results, contents, names = _run(tmp_path, *options)
    # same, other (content), mode (0600), missing, missing absent (nothing to remove), same absent (to remove)
    assert results['compared'] == [False, True, True, True, False, True]
    assert results['changed'] == [False] * 6
    assert contents == {'same': 'wanted\n', 'other': 'something else\n', 'mode': 'wanted\n'}
    assert names == ['mode', 'other', 'same']
    assert 'compare_only needs known' in results['refused']
    assert 'changed=0' in proc.stdout
