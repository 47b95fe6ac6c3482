# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulator held to the real captures of tests/unit/plugins/module_utils/fixtures/real.

For every output format of the corpus, the simulator's output of every GPU
profile and driver branch is reduced to what the captures can judge (line
shapes, byte layouts, XML element paths and their order, DTD names, CSV
headers and "no value" spellings, MIG table frames, error texts) and compared
with the captures of the same format.  Every difference is either fixed in the
simulator or listed in KNOWN with its reason; a difference not listed fails,
and so does a listed one that no longer occurs.

The simulated branches are those of the simulated repository (535-580) plus
590.48.01, the branch most of the corpus comes from.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import csv
import io
import json
import os
import re
from xml.etree import ElementTree

import pytest

from daemon_helpers import nvsim_module

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(os.path.dirname(HERE), 'plugins', 'module_utils', 'fixtures', 'real')
DRIVERS = ('535.261.03', '550.163.01', '570.195.03', '580.95.05', '590.48.01')
GPU_PROFILES = ('hgx_h100_8gpu', 'l40s_2gpu', 'a100_40gb_mig')
FORMATS = ('list', 'topo', 'nvlink', 'mig-lgip', 'mig-lgi', 'q-x', 'query-gpu', 'query-compute-apps', 'errors')
UNAVAILABLE = ('[N/A]', 'N/A', '[Not Supported]', '[Requested functionality has been deprecated]', '',
               '[Function Not Found]', '[Unknown Error]')

# (format, difference) -> why it stays.  Differences are the strings the
# comparisons below produce; keep the reasons short and checkable.
KNOWN = {
    # nvlink -s: the strings of the real 535 and 550 binaries have "...NVLink information as all links are
    # inActive" and "\t Link %u: <inactive>" (test_oracle_real_nvidia_smi.py); the only pre-590 captures are
    # of an A100 with active links and of an older driver that spelled it "inactive".
    ('nvlink', "before 590: sim line 'NVML: Unable to retrieve NVLink information as all links are inActive' "
               "is in no capture"): 'text of the 535/550 binaries, no pre-590 capture of a GPU without NVLink',
    ('nvlink', "before 590: sim line 'TAB SPACE Link <n>: <inactive>' is in no capture"):
        'format of the 535/550 binaries; no capture of inactive links (the A100 profile has them)',
    # -q -x
    ('q-x', '535: sim prints /gpu/inforom_bbx_flush, no capture of the branch does'):
        'added within 535: in the DTD of 535.261.03 (oracle), not yet in the 535.54-536.40 captures',
    ('q-x', '535: sim prints /gpu/sparse_operation_mode, no capture of the branch does'):
        'added within 535: in the DTD of 535.261.03 (oracle), not yet in the 535.54-536.40 captures',
    ('q-x', '570: sim prints /gpu/mig_devices/mig_device, no capture of the branch does'):
        'the only 570 capture is a GeForce RTX 3060 (no MIG); names as in the 535/550 DTDs and the A100 captures',
    ('q-x', '590: sim prints /gpu/mig_devices/mig_device, no capture of the branch does'):
        'no 590 capture has MIG enabled; names as in the 535/550 DTDs and the A100 captures',
    ('q-x', '570: sim prints /gpu/processes/process_info, no capture of the branch does'):
        'the 570 capture has no process; the element is in the 535/550 DTDs and the 536.40 capture',
}
KNOWN.update({
    # --query-gpu
    ('query-gpu', "610.62: bbx.time_run is '[N/A]' where the capture has ['[Function Not Found]']"):
        'Windows 610.62 only; the Linux 610.57.04 capture prints [N/A] as the simulator',
    # --query-compute-apps
    ('query-compute-apps', "used_gpu_memory: '2194 MiB', real '[N/A]'"):
        'the Windows (WDDM) captures cannot see process memory; the simulator is Linux nvidia-smi',
    # error texts
    ('errors', 'errors/gh200-480gb_unknown_kfgh-cgi-in-use.txt: no simulated state refuses -cgi as in use'):
        'a profiler attached to a MIG GPU (nsys) is not simulated; -cgi there fails only for resources',
    ('errors', 'errors/rtx-2080-super_591.86_gpuexp-win-topo.txt: Windows only (the simulator is Linux '
               'nvidia-smi)'): 'Windows nvidia-smi has no topo sub-command',
    ('errors', "errors/unknown_unknown_chaelin-mismatch.txt: sim prints 'Failed to initialize NVML: "
               "Driver/library version mismatch\\nNVML library version: 570.195\\n'"):
        'the capture is of an older driver; 535 and 550 add the "NVML library version: %s" line (their strings)',
})


def _index():
    with open(os.path.join(CORPUS, 'index.json')) as handle:
        return json.load(handle)


INDEX = _index()


def captures(fmt, exclude=()):
    """(entry, text) of every capture of a format; CRLF (a TTY's) read as LF."""
    found = []
    for entry in INDEX:
        if entry['format'] == fmt and not set(exclude) & set(entry['fidelity']):
            with open(os.path.join(CORPUS, entry['file']), 'rb') as handle:
                found.append((entry, handle.read().decode('utf-8').replace('\r\n', '\n')))
    return found


# Driver branches; a Windows release counts as the Linux branch it belongs to (536 -> 535, 591 -> 590).
BRANCHES = (352, 384, 410, 418, 430, 440, 450, 460, 510, 515, 525, 535, 550, 570, 580, 590, 595, 610)


def branch(driver):
    if not driver or not driver[0].isdigit():
        return None
    number = int(driver.split('.')[0])
    return max(b for b in BRANCHES if b <= number)


def check(fmt, differences, prefix=''):
    """Fail on differences not in KNOWN, and on KNOWN entries of fmt (starting with prefix) that no longer occur."""
    found = set(differences)
    new = sorted(d for d in found if (fmt, d) not in KNOWN)
    stale = sorted(d for (f, d) in KNOWN if f == fmt and d.startswith(prefix) and d not in found)
    assert new == [], 'differences from the real captures, neither fixed nor in KNOWN:\n  ' + '\n  '.join(new)
    assert stale == [], 'KNOWN lists differences that no longer occur:\n  ' + '\n  '.join(stale)


@pytest.fixture(scope='module')
def sim(shared_sim_root):
    """sim(profile, driver, *args) -> (rc, stdout) of the simulator (hosts cached per profile and driver)."""
    def run(profile, driver, *args):
        result = shared_sim_root(profile, driver=driver).smi(*args)
        return result.returncode, result.stdout

    return run


# --- -L ----------------------------------------------------------------------

def list_shape(line):
    match = re.match(r'^GPU \d+: .+ \(UUID: GPU-[^)]+\)$', line)
    if match:
        return 'GPU <n>: <name> (UUID: GPU-<uuid>)'
    match = re.match(r'^  (MIG \S+ *)Device +(\d+): \(UUID: MIG-[^)]+\)$', line)
    if match:
        return '  <MIG profile padded to %d>Device <n, width %d>: (UUID: MIG-<uuid>)' % (
            len(match.group(1)), len(line.split('Device')[1].split(':')[0]))
    return 'other: ' + line


def test_list(sim, sim_root):
    real = set(list_shape(line) for _e, text in captures('list') for line in text.splitlines())
    differences = []
    host = sim_root('a100_40gb_mig', driver='590.48.01')
    host.smi('mig', '-cgi', '9,14,19', '-C')
    outputs = [host.smi('-L').stdout] + [sim(p, d, '-L')[1] for p in GPU_PROFILES for d in DRIVERS]
    for text in outputs:
        differences += ['sim line shape %r is in no capture' % shape
                        for shape in set(list_shape(line) for line in text.splitlines()) if shape not in real]
    check('list', differences)


# --- topo -m -------------------------------------------------------------------

RELATION = r'(?: X |NV\d+|PIX|PXB|PHB|NODE|SYS)'


def topo_shape(line):
    if re.match(r'^\t\x1b\[4m(GPU\d+\t)+(NIC\d+\t)*CPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b\[0m$', line):
        return 'header: TAB ESC[4m names TAB-separated ESC[0m'
    cells = line.split('\t')
    if re.match(r'^GPU\d+$', cells[0]) and all(re.match('^%s$' % RELATION, c) for c in cells[1:-4]):
        tail = ['cpus' if re.match(r'^[\d,-]+$', c) else 'numa' if c.isdigit() else c for c in cells[-4:]]
        return 'GPU row: relations, then %r' % tail
    if re.match(r'^NIC\d+$', cells[0]) and all(re.match('^%s$' % RELATION, c) for c in cells[1:-4]):
        return 'NIC row: relations, then %r' % cells[-4:]
    if re.match(r'^  NIC\d+: \S+$', line):
        return 'NIC legend line'
    return line


def topo_ending(text):
    return 'ends with a blank line' if text.endswith('\n\n') else 'ends after the last line'


def test_topo(sim):
    real = captures('topo', exclude=('whitespace-altered',))
    linux = [(e, t) for e, t in real if not e['file'].endswith('-win.txt')]
    shapes = set(topo_shape(line) for _e, text in real for line in text.splitlines())
    endings = {}
    for entry, text in linux:
        endings.setdefault(bool(entry['nics']), set()).add(topo_ending(text))
    differences = []
    for profile in GPU_PROFILES:
        for driver in DRIVERS:
            text = sim(profile, driver, 'topo', '-m')[1]
            differences += ['sim line %r is in no capture' % shape
                            for shape in set(topo_shape(line) for line in text.splitlines()) if shape not in shapes]
            nics = 'NIC0' in text
            if topo_ending(text) not in endings[nics]:
                differences.append('%s %s (NICs: %s)' % (profile, topo_ending(text), nics))
    check('topo', differences)


# --- nvlink -s -----------------------------------------------------------------

def nvlink_shape(line):
    if re.match(r'^GPU \d+: .+ \(UUID: GPU-[^)]+\)$', line):
        return 'GPU <n>: <name> (UUID: GPU-<uuid>)'
    match = re.match(r'^\t Link \d+: (.*)$', line)
    if match:
        value = match.group(1)
        return 'TAB SPACE Link <n>: ' + ('<%g-formatted> GB/s' if re.match(r'^\d+(\.\d{1,3})? GB/s$', value)
                                         else value)
    return line


def test_nvlink(sim):
    real = captures('nvlink', exclude=('whitespace-altered',))
    shapes = {}
    for entry, text in real:
        group = 'from 590' if (branch(entry['driver']) or 0) >= 590 else 'before 590'
        shapes.setdefault(group, set()).update(nvlink_shape(line) for line in text.splitlines())
    everything = set().union(*shapes.values())
    differences = []
    for profile in GPU_PROFILES:
        for driver in DRIVERS:
            group = 'from 590' if branch(driver) >= 590 else 'before 590'
            for shape in set(nvlink_shape(line) for line in sim(profile, driver, 'nvlink', '-s')[1].splitlines()):
                if shape not in shapes[group]:
                    where = 'in captures of other branches' if shape in everything else 'in no capture'
                    differences.append('%s: sim line %r is %s' % (group, shape, where))
    check('nvlink', differences)


# --- mig -lgip / -lgi ---------------------------------------------------------------

def mig_frame(text):
    """The lines of a MIG table that carry no values: rules and the column headers."""
    lines = text.splitlines()
    header_end = next(i for i, line in enumerate(lines) if line.startswith('|==='))
    return lines[:header_end + 1] + sorted(set(line for line in lines[header_end + 1:] if line.startswith('+')))


def mig_row_shape(line):
    line = re.sub(r'MIG [^ |]+ *', lambda m: '<name:%d>' % len(m.group(0)), line)
    line = re.sub(r'\d+[/:.]\d+ *', lambda m: '<left:%d>' % len(m.group(0)), line)
    return re.sub(r' *\d+', lambda m: '<right:%d>' % len(m.group(0)), line)


def test_mig_lgip(sim):
    real = captures('mig-lgip')
    frames = [mig_frame(text) for _e, text in real]
    differences = []
    for driver in DRIVERS:
        text = sim('a100_40gb_mig', driver, 'mig', '-lgip')[1]
        if mig_frame(text) not in frames:
            differences.append('%s: table frame is in no capture' % driver)
        if any(len(line) != len(text.splitlines()[0]) for line in text.splitlines()):
            differences.append('%s: a row is not as wide as the frame' % driver)
        # The same GPU model as a real capture: byte for byte.
        same_gpu = [t for e, t in real if e['gpu'] == 'a100-sxm4-40gb']
        if text not in same_gpu:
            differences.append('%s: A100-SXM4-40GB profiles differ from the real A100-SXM4-40GB table' % driver)
    check('mig-lgip', differences)


def test_mig_lgi(sim_root):
    real = captures('mig-lgi')
    frames = [mig_frame(text) for _e, text in real]
    rows = set(mig_row_shape(line) for _e, text in real for line in text.splitlines() if line.startswith('|   '))
    differences = []
    for driver in ('535.261.03', '590.48.01'):
        host = sim_root('a100_40gb_mig', driver=driver)
        for spec in ('19,19,19,19', '9,9', '14,5'):
            host.smi('mig', '-dci')
            host.smi('mig', '-dgi')
            assert host.smi('mig', '-cgi', spec).returncode == 0
            text = host.smi('mig', '-lgi').stdout
            if mig_frame(text) not in frames:
                differences.append('table frame is in no capture')
            differences += ['row shape %r is in no capture' % mig_row_shape(line)
                            for line in text.splitlines()
                            if line.startswith('|   ') and mig_row_shape(line) not in rows]
    check('mig-lgi', differences)


# --- -q -x ---------------------------------------------------------------------------

def xml_paths(text):
    """Element paths in document order (first occurrence), below <gpu>."""
    root = ElementTree.fromstring(text)
    seen = []

    def walk(element, path):
        for child in element:
            child_path = path + '/' + child.tag
            if child_path not in seen:
                seen.append(child_path)
            walk(child, child_path)

    walk(root, '')
    return seen


def doctype(text):
    match = re.search(r'<!DOCTYPE nvidia_smi_log SYSTEM "([^"]+)">', text)
    return match.group(1) if match else None


def _sim_xml(sim, sim_root, driver):
    texts = [sim(profile, driver, '-q', '-x')[1] for profile in GPU_PROFILES]
    host = sim_root('a100_40gb_mig', driver=driver)
    host.smi('mig', '-cgi', '9,14', '-C')
    host.start_workload('--gpu', '0', '--memory', '256')
    texts.append(host.smi('-q', '-x').stdout)
    other = sim_root('l40s_2gpu', driver=driver)
    other.start_workload('--gpu', '0', '--memory', '256')
    texts.append(other.smi('-q', '-x').stdout)
    return texts


def _order_conflicts(sim_order, real_order):
    """Pairs of sibling paths the two documents put in opposite order."""
    position = dict((path, i) for i, path in enumerate(sim_order))
    common = [path for path in real_order if path in position]
    conflicts = []
    for first, second in zip(common, common[1:]):
        if first.rsplit('/', 1)[0] == second.rsplit('/', 1)[0] and position[first] > position[second]:
            conflicts.append('%s before %s' % (first.rsplit('/', 1)[1], second))
    return conflicts


@pytest.mark.parametrize('driver', ['535.261.03', '570.195.03', '590.48.01'])
def test_query_xml(sim, sim_root, driver):
    real = [(e, t) for e, t in captures('q-x') if branch(e['driver']) == branch(driver)]
    assert len(real) >= 1
    texts = _sim_xml(sim, sim_root, driver)
    differences = []
    real_dtds = set(doctype(t) for _e, t in real)
    for text in texts:
        if doctype(text) not in real_dtds:
            differences.append('DOCTYPE %s, the captures of the branch name %s' % (doctype(text), sorted(real_dtds)))
    sim_paths = []
    for text in texts:
        sim_paths += [p for p in xml_paths(text) if p not in sim_paths]
    real_union = set(p for _e, t in real for p in xml_paths(t))
    complete = [xml_paths(t) for e, t in real if 'trimmed' not in e['fidelity']]
    real_common = set.intersection(*[set(paths) for paths in complete]) if complete else set()
    # A subtree the captures lack is one difference (its root), not one per element.
    extra = [p for p in sim_paths if p not in real_union]
    differences += ['sim prints %s, no capture of the branch does' % p for p in extra
                    if p.rsplit('/', 1)[0] not in extra]
    differences += ['every capture of the branch prints %s, the sim does not' % p
                    for p in sorted(real_common - set(sim_paths))]
    for paths in complete:
        differences += ['order: sim puts %s' % c for c in _order_conflicts(sim_paths, paths)]
    check('q-x', ['%s: %s' % (branch(driver), d) for d in differences], prefix='%s: ' % branch(driver))


# --- --query-gpu ---------------------------------------------------------------------

def read_csv(text):
    return list(csv.reader(io.StringIO(text), skipinitialspace=True))


def test_query_gpu(sim):
    real = captures('query-gpu', exclude=('mock-suspected',))
    differences = []
    for entry, text in real:
        rows = read_csv(text)
        header = rows[0]
        fields = [cell.split(' [')[0] for cell in header]
        # A 590-610 capture against the simulator at that very version; older ones against 535.
        driver = entry['driver'] if (branch(entry['driver']) or 0) >= 590 else '535.261.03'
        sim_fields = [f for f in fields if f in _accepted(driver)]
        differences += ['%s: field %s is refused' % (driver, f) for f in fields
                        if f not in sim_fields and driver == entry['driver']]
        nounits = 'nounits' in (entry['options'] or '')
        spellings = _real_spellings(rows, fields)
        for profile in GPU_PROFILES:
            fmt = '--format=csv,nounits' if nounits else '--format=csv'
            rc, out = sim(profile, driver, '--query-gpu=' + ','.join(sim_fields), fmt)
            assert rc == 0, out
            sim_rows = read_csv(out)
            real_header = dict(zip(fields, header))
            differences += ['%s: header %r, real %r' % (driver, cell, real_header[f])
                            for f, cell in zip(sim_fields, sim_rows[0]) if cell != real_header[f]]
            for row in sim_rows[1:]:
                for name, value in zip(sim_fields, row):
                    if value in UNAVAILABLE and spellings.get(name) and value not in spellings[name]:
                        differences.append('%s: %s is %r where the capture has %r'
                                           % (driver, name, value, sorted(spellings[name])))
                    if nounits and value.endswith(('MiB', ' %', ' W', 'MHz')):
                        differences.append('%s: nounits value %r keeps its unit' % (driver, value))
    differences += _mig_fields(sim)
    check('query-gpu', differences)


def _accepted(driver):
    """Field names (and aliases) the simulator accepts on a driver's branch (see also test_every_query_gpu_field_answers)."""
    query = nvsim_module('smi.query')
    return set(name for entry in query.fields_for(int(driver.split('.')[0])) for name in (entry[0],) + entry[1])


def _real_spellings(rows, fields):
    spellings = {}
    for row in rows[1:]:
        for name, value in zip(fields, row):
            if value in UNAVAILABLE:
                spellings.setdefault(name, set()).add(value)
    return spellings


def _mig_fields(sim):
    """Fields every MIG capture leaves [N/A] while the same GPU without MIG has a value."""
    by_gpu = {}
    for entry, text in captures('query-gpu', exclude=('mock-suspected',)):
        rows = read_csv(text)
        by_gpu.setdefault(entry['gpu'].replace('-mig', ''), {})[bool(entry['mig'])] = dict(
            zip([c.split(' [')[0] for c in rows[0]], rows[1]))
    mig_only = None
    for pair in by_gpu.values():
        if True in pair and False in pair:
            names = set(n for n, v in pair[True].items() if v == '[N/A]' and pair[False].get(n) not in UNAVAILABLE)
            mig_only = names if mig_only is None else mig_only & names
    differences = []
    rc, out = sim('a100_40gb_mig', '590.48.01', '--query-gpu=' + ','.join(sorted(mig_only)), '--format=csv,noheader')
    assert rc == 0, out
    for name, value in zip(sorted(mig_only), read_csv(out)[0]):
        if value != '[N/A]':
            differences.append('MIG mode: %s is %r, every MIG capture has [N/A]' % (name, value))
    return differences


# --- --query-compute-apps ------------------------------------------------------------

def test_query_compute_apps(sim_root):
    differences = []
    for entry, text in captures('query-compute-apps'):
        rows = read_csv(text)
        fields = [cell.split(' [')[0] for cell in rows[0]]
        driver = '590.48.01' if branch(entry['driver']) >= 590 else '535.261.03'
        host = sim_root('l40s_2gpu', driver=driver)
        if len(rows) > 1:
            host.start_workload('--gpu', '0', '--memory', '2194', '--name', rows[1][fields.index('process_name')])
        result = host.smi('--query-compute-apps=' + ','.join(fields), '--format=csv')
        sim_rows = read_csv(result.stdout)
        if sim_rows[0] != rows[0]:
            differences.append('header %r, real %r' % (sim_rows[0], rows[0]))
        if len(sim_rows) != min(len(rows), 2):
            differences.append('%d rows for %d processes' % (len(sim_rows) - 1, min(len(rows), 2) - 1))
        for real_row, sim_row in zip(rows[1:2], sim_rows[1:]):
            for name, real_value, value in zip(fields, real_row, sim_row):
                if re.sub(r'\d', '9', real_value).endswith(' MiB') != value.endswith(' MiB'):
                    differences.append('%s: %r, real %r' % (name, value, real_value))
    check('query-compute-apps', differences)


# --- error texts and exit codes -----------------------------------------------------

def test_errors(sim_root):
    differences = []
    for entry, text in captures('errors'):
        name = entry['file']
        if 'cgi-insufficient' in name:
            host = sim_root('a100_40gb_mig', driver='590.48.01')
            host.smi('mig', '-cgi', '20', '-C')  # the one 1g.5gb+me instance the A100 has
            result = host.smi('mig', '-cgi', '20', '-C')
        elif 'cgi-in-use' in name:
            differences.append('%s: no simulated state refuses -cgi as in use' % name)
            continue
        elif 'mismatch' in name:
            host = sim_root('l40s_2gpu', driver='570.172.08')
            host.install_driver('570.195.03')
            result = host.smi('-L')
        elif 'nvml-unknown' in name:
            host = sim_root('l40s_2gpu', driver='570.195.03')
            host.write('run/nvidia-sim/nvml-init-error', 'Unknown Error\n')
            result = host.smi('-L')
        elif name.endswith('-win-topo.txt'):
            differences.append('%s: Windows only (the simulator is Linux nvidia-smi)' % name)
            continue
        else:
            raise AssertionError('no simulator case for ' + name)
        sim_lines = [re.sub(r'\d+', '<n>', line) for line in result.stdout.splitlines()]
        real_lines = [re.sub(r'\d+', '<n>', line) for line in text.splitlines()]
        if sim_lines != real_lines:
            differences.append('%s: sim prints %r' % (name, result.stdout))
        if entry['exit_code'] is not None and result.returncode != entry['exit_code']:
            differences.append('%s: exit %d, real %d' % (name, result.returncode, entry['exit_code']))
    check('errors', differences)


# --- the corpus itself ------------------------------------------------------------------

def test_every_format_has_captures_and_a_comparison():
    counts = dict((fmt, len(captures(fmt))) for fmt in FORMATS)
    assert set(entry['format'] for entry in INDEX) <= set(FORMATS)
    # Fewer than three public captures with provenance exist only for these (SOURCES.md, "Gaps").
    assert [fmt for fmt, count in counts.items() if count < 3] == ['mig-lgi']
