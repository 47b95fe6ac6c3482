"""playbooks/awx_configure.yml: AWX job templates, surveys, schedule and workflow as code.

No AWX server can run in this project's CI, so the playbook never reaches a
controller here. What is checked: it passes ``ansible-playbook --syntax-check``;
its data (playbooks/vars/awx_configure.yml, rendered by Ansible's own templating
as the play would) names playbooks that exist (or the two the fleet operations
work adds), surveys asking for the variables those playbooks read, a weekly
schedule and a workflow over existing templates; it keeps no secret in a
default; and without a controller it stops before any change, saying what is
missing. Then it runs, twice, against ``awx_api_stub.py``, an in-memory stand-in
for the AWX REST API that keeps what the awx.awx modules send: every input is
accepted, the objects link up, no secret reaches the output, and the second
run changes nothing. The stub is not AWX: it checks none of AWX's own rules.
"""
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
BIN = os.path.dirname(sys.executable)
PLAYBOOK = os.path.join(ROOT, 'playbooks', 'awx_configure.yml')
INPUTS = os.path.join(ROOT, 'playbooks', 'vars', 'awx_configure.yml')
# Written by the fleet operations work, beside this playbook: a job template may
# name them before they land.
OTHERS_PLAYBOOKS = {'playbooks/driver_upgrade.yml', 'playbooks/health.yml'}
UPGRADE_SURVEY = {'nvidia_driver_branch', 'gpufleet_upgrade_serial', 'gpufleet_upgrade_drain'}
SURVEY_TYPES = {'text', 'textarea', 'password', 'integer', 'float', 'multiplechoice', 'multiselect'}


def _render(name, **overrides):
    """One input as the play sees it: the vars file, extra vars on top, templated by Ansible."""
    loader = DataLoader()
    variables = loader.load_from_file(INPUTS, trusted_as_template=True)
    variables.update(overrides)
    return Templar(loader=loader, variables=variables).template(variables[name])


@pytest.fixture(scope='module')
def templates():
    return {template['name']: template for template in _render('gpufleet_awx_job_templates')}


@pytest.fixture(scope='module')
def play():
    with open(PLAYBOOK) as handle:
        (play,) = yaml.safe_load(handle)
    return play


def _task(play, module):
    (task,) = [task for task in play['tasks'] if module in task]
    return task


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(('ANSIBLE_', 'CONTROLLER_', 'TOWER_'))}
    env['ANSIBLE_CONFIG'] = os.path.join(ROOT, 'ansible.cfg')
    return env


def test_syntax_check():
    result = subprocess.run([os.path.join(BIN, 'ansible-playbook'), '--syntax-check', PLAYBOOK],
                            cwd=ROOT, env=_env(), capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_three_job_templates(templates):
    assert set(templates) == {'Converge GPU nodes', 'Rolling driver upgrade', 'GPU health report'}
    assert templates['Converge GPU nodes']['playbook'] == 'playbooks/site.yml'
    assert templates['Rolling driver upgrade']['playbook'] == 'playbooks/driver_upgrade.yml'
    assert templates['GPU health report']['playbook'] == 'playbooks/health.yml'


def test_every_playbook_exists_in_the_project(templates):
    for template in templates.values():
        playbook = template['playbook']
        assert playbook in OTHERS_PLAYBOOKS or os.path.isfile(os.path.join(ROOT, playbook)), playbook


def test_converge_prompts_for_limit_tags_and_check_mode(templates):
    converge = templates['Converge GPU nodes']
    # Limit and tags are launch prompts (a survey only sets extra vars); job type
    # "check" runs the playbook in check mode.
    for prompt in ('ask_limit_on_launch', 'ask_tags_on_launch', 'ask_job_type_on_launch'):
        assert converge[prompt] is True, prompt
    assert 'survey_spec' not in converge


def _survey_ok(survey):
    assert survey['name'] and survey['description']
    for question in survey['spec']:
        assert question['type'] in SURVEY_TYPES
        assert question['question_name'] and question['question_description']
        assert isinstance(question['required'], bool)
        assert re.match(r'^[a-z_][a-z0-9_]*$', question['variable'])
        if question['type'] in ('multiplechoice', 'multiselect'):
            assert isinstance(question['choices'], list)
            assert question['default'] in question['choices']
        if question['type'] == 'text' and 'default' in question:
            assert isinstance(question['default'], str)
            assert question.get('min', 0) <= len(question['default']) <= question.get('max', 1024)
    return {question['variable']: question for question in survey['spec']}


def test_upgrade_survey_asks_branch_batch_and_drain_hook(templates):
    upgrade = templates['Rolling driver upgrade']
    questions = _survey_ok(upgrade['survey_spec'])
    assert set(questions) == UPGRADE_SURVEY
    assert questions['gpufleet_upgrade_drain']['type'] == 'multiplechoice'
    assert questions['gpufleet_upgrade_drain']['choices'] == ['slurm', 'kubernetes', 'command', 'none']
    with open(os.path.join(ROOT, 'roles', 'nvidia_driver', 'defaults', 'main.yml')) as handle:
        branch = yaml.safe_load(handle)['nvidia_driver_branch']
    assert questions['nvidia_driver_branch']['default'] == branch
    # serial batches span the whole fleet: slices would run batches side by side.
    assert upgrade['job_slice_count'] == 1


def test_survey_variables_are_read_by_the_upgrade_playbook():
    playbook = os.path.join(ROOT, 'playbooks', 'driver_upgrade.yml')
    with open(playbook) as handle:
        text = handle.read()
    unread = [name for name in UPGRADE_SURVEY - {'nvidia_driver_branch'} if name not in text]
    assert not unread, 'the survey sets variables playbooks/driver_upgrade.yml does not read: %s' % unread


def test_health_report_is_sliced_by_a_variable(templates):
    assert templates['GPU health report']['job_slice_count'] == 1
    (health,) = [t for t in _render('gpufleet_awx_job_templates', gpufleet_awx_health_job_slice_count=8)
                 if t['name'] == 'GPU health report']
    assert health['job_slice_count'] == 8
    assert templates['Converge GPU nodes']['job_slice_count'] == 1


def test_health_report_runs_weekly(templates):
    (schedule,) = _render('gpufleet_awx_schedules')
    assert schedule['unified_job_template'] == 'GPU health report'
    dtstart, rrule = schedule['rrule'].split(' ')
    assert re.match(r'^DTSTART(;TZID=[A-Za-z_/]+)?:\d{8}T\d{6}Z?$', dtstart)
    assert rrule.startswith('RRULE:')
    parts = dict(part.split('=', 1) for part in rrule[len('RRULE:'):].split(';'))
    assert parts['FREQ'] == 'WEEKLY'
    assert parts.get('INTERVAL', '1') == '1'
    assert set(parts) <= {'FREQ', 'INTERVAL', 'BYDAY', 'BYHOUR', 'BYMINUTE'}


def test_workflow_runs_health_after_converge(templates):
    workflow = _render('gpufleet_awx_workflow')
    nodes = {node['identifier']: node for node in workflow['workflow_nodes']}
    assert len(nodes) == len(workflow['workflow_nodes'])
    for node in nodes.values():
        assert node['unified_job_template']['type'] == 'job_template'
        assert node['unified_job_template']['name'] in templates
        assert node['unified_job_template']['organization']['name'] == _render('gpufleet_awx_organization')
        for kind in node.get('related', {}).values():
            assert all(target['identifier'] in nodes for target in kind)
    assert nodes['converge']['unified_job_template']['name'] == 'Converge GPU nodes'
    assert nodes['converge']['related']['success_nodes'] == [{'identifier': 'health'}]
    assert nodes['health']['unified_job_template']['name'] == 'GPU health report'


def test_the_play_uses_these_inputs(play):
    assert play['hosts'] == 'localhost'
    assert play['vars_files'] == ['vars/awx_configure.yml']
    assert _task(play, 'awx.awx.job_template')['loop'] == '{{ gpufleet_awx_job_templates }}'
    assert _task(play, 'awx.awx.schedule')['loop'] == '{{ gpufleet_awx_schedules }}'
    job_template = _task(play, 'awx.awx.job_template')['awx.awx.job_template']
    assert job_template['survey_spec'] == '{{ item.survey_spec | default(omit) }}'
    assert job_template['job_slice_count'] == '{{ item.job_slice_count | default(1) }}'
    workflow = _task(play, 'awx.awx.workflow_job_template')['awx.awx.workflow_job_template']
    assert workflow['workflow_nodes'] == '{{ gpufleet_awx_workflow.workflow_nodes }}'


def test_no_secret_has_a_default(play):
    with open(INPUTS) as handle:
        inputs = yaml.safe_load(handle)
    for name in inputs:
        assert not re.search(r'(token|password|secret|key_data)$', name), name
    for secret in ('gpufleet_awx_controller_token', 'gpufleet_awx_controller_password', 'gpufleet_awx_machine_ssh_key_data'):
        assert secret not in inputs
    # The secrets reach the modules only from extra vars or the environment.
    defaults = play['module_defaults']['group/awx.awx.controller']
    assert defaults['controller_oauthtoken'] == '{{ gpufleet_awx_controller_token | default(omit) }}'
    assert defaults['controller_password'] == '{{ gpufleet_awx_controller_password | default(omit) }}'
    credential = _task(play, 'awx.awx.credential')
    assert credential['no_log'] is True
    assert credential['when'] == 'gpufleet_awx_machine_ssh_key_data is defined'


def test_without_a_controller_it_stops_before_any_change(tmp_path):
    result = subprocess.run([os.path.join(BIN, 'ansible-playbook'), PLAYBOOK],
                            cwd=str(tmp_path), env=_env(), capture_output=True, text=True, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    for missing in ('CONTROLLER_HOST', 'CONTROLLER_OAUTH_TOKEN', 'gpufleet_awx_project_scm_url', 'gpufleet_awx_ee_image'):
        assert missing in result.stdout
    assert 'ok=0' in result.stdout and 'failed=1' in result.stdout
    assert 'TASK [Execution environment' not in result.stdout


# A private key that is not one: it only has to be recognisable if it leaked into the output.
FAKE_KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-key-gpufleet-test-0123456789\n-----END OPENSSH PRIVATE KEY-----\n'


def _run_against(stub, tmp_path):
    env = _env()
    env.update({'CONTROLLER_HOST': stub.url, 'CONTROLLER_OAUTH_TOKEN': 'stub-token'})
    extra = tmp_path / 'extra.yml'
    extra.write_text(yaml.safe_dump({
        'gpufleet_awx_project_scm_url': 'https://git.example.com/gpu/gpufleet-nvidia.git',
        'gpufleet_awx_ee_image': 'registry.example.com/gpufleet/nvidia-ee:0.1.0',
        'gpufleet_awx_machine_username': 'ansible',
        'gpufleet_awx_machine_ssh_key_data': FAKE_KEY,
        'gpufleet_awx_health_job_slice_count': 4,
    }))
    result = subprocess.run([os.path.join(BIN, 'ansible-playbook'), PLAYBOOK, '-e', '@%s' % extra],
                            cwd=str(tmp_path), env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'not-a-key-gpufleet-test' not in result.stdout + result.stderr
    assert 'stub-token' not in result.stdout + result.stderr
    (recap,) = [line for line in result.stdout.splitlines() if line.startswith('localhost ')]
    return dict(re.findall(r'(\w+)=(\d+)', recap))


@pytest.fixture(scope='module')
def configured(tmp_path_factory):
    """Two runs of the playbook against the API stub (tests/unit/ee/awx_api_stub.py): what the modules sent."""
    from ansible_collections.gpufleet.nvidia.tests.unit.ee.awx_api_stub import AwxApiStub
    tmp_path = tmp_path_factory.mktemp('awx')
    with AwxApiStub() as stub:
        first = _run_against(stub, tmp_path)
        requests_first = len(stub.requests)
        second = _run_against(stub, tmp_path)
        writes_second = [r for r in stub.requests[requests_first:] if r[0] != 'GET']
    return stub, first, second, writes_second


def test_stub_second_run_changes_nothing(configured):
    stub, first, second, writes_second = configured
    assert int(first['changed']) > 0
    assert second['changed'] == '0', second
    # The only write of a second run: the project sync the playbook asks for (update_project).
    (project,) = stub.find('projects')
    assert [(method, path) for method, path, _query, _body in writes_second] == [('POST', project['related']['update'])]


def test_stub_objects_and_what_the_modules_sent(configured):
    stub = configured[0]
    (organization,) = stub.find('organizations', name='Default')
    (ee,) = stub.find('execution_environments')
    assert ee['image'] == 'registry.example.com/gpufleet/nvidia-ee:0.1.0' and ee['organization'] == organization['id']
    (credential,) = stub.find('credentials')
    assert credential['name'] == 'GPU nodes SSH' and credential['inputs']['username'] == 'ansible'
    assert stub.stored_secrets[credential['id']] == {'ssh_key_data': FAKE_KEY}
    (project,) = stub.find('projects')
    assert project['scm_type'] == 'git' and project['scm_update_on_launch'] is True
    assert project['default_environment'] == ee['id']
    (inventory,) = stub.find('inventories')
    templates = {t['name']: t for t in stub.find('job_templates')}
    assert set(templates) == {'Converge GPU nodes', 'Rolling driver upgrade', 'GPU health report'}
    for template in templates.values():
        assert template['project'] == project['id'] and template['inventory'] == inventory['id']
        assert template['execution_environment'] == ee['id'] and template['forks'] == 10
        assert stub.associated(template, 'credentials') == [credential['id']]
    assert templates['Converge GPU nodes']['ask_job_type_on_launch'] is True
    assert templates['Converge GPU nodes']['ask_tags_on_launch'] is True
    assert templates['GPU health report']['job_slice_count'] == 4
    assert templates['Rolling driver upgrade']['job_slice_count'] == 1
    assert templates['Rolling driver upgrade']['survey_enabled'] is True
    survey = stub.survey(templates['Rolling driver upgrade'])
    assert {question['variable'] for question in survey['spec']} == UPGRADE_SURVEY
    assert not stub.survey(templates['Converge GPU nodes'])
    (schedule,) = stub.find('schedules')
    assert schedule['unified_job_template'] == templates['GPU health report']['id']
    assert 'RRULE:FREQ=WEEKLY' in schedule['rrule']
    (workflow,) = stub.find('workflow_job_templates')
    nodes = {node['identifier']: node for node in stub.find('workflow_job_template_nodes')}
    assert set(nodes) == {'converge', 'health'}
    assert all(node['workflow_job_template'] == workflow['id'] for node in nodes.values())
    assert nodes['converge']['unified_job_template'] == templates['Converge GPU nodes']['id']
    assert nodes['health']['unified_job_template'] == templates['GPU health report']['id']
    assert stub.associated(nodes['converge'], 'success_nodes') == [nodes['health']['id']]
