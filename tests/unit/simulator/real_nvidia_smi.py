# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The real ``nvidia-smi`` of Debian's archive, unpacked where it can run without a GPU.

``fetch(suite)`` downloads (once; cached under
``$GPUFLEET_STATE_DIR/debs/<suite>``) the Debian packages ``nvidia-smi``,
``libnvidia-ml1`` and ``nvidia-alternative`` of a suite from
deb.debian.org (contrib, non-free) with a private apt configuration, unpacks
them with ``dpkg-deb -x`` and returns a ``RealSmi``.  Without a loaded NVIDIA
kernel module the binary can still say what it says then: with the unpacked
NVML library on ``LD_LIBRARY_PATH`` "driver not loaded" (exit 9), without it
"NVML missing" (exit 12), and ``-h``.  Besides running it, the binary is read:
the DTD it embeds (``--dtd``), its printf format strings and the field names
of its ``--query-*`` switches.

Nothing of NVIDIA's is committed: the packages stay in the cache directory.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import fcntl
import os
import re
import shutil
import subprocess
import tempfile

PACKAGES = ('nvidia-smi', 'libnvidia-ml1', 'nvidia-alternative')
# Suite -> driver branch the simulator is compared on (the suite's version is
# whatever the archive has now; in 2026: bookworm 535.261.03, trixie 550.163.01).
SUITES = {'bookworm': '535', 'trixie': '550'}
ARCHIVE = 'http://deb.debian.org/debian'
KEYRING = '/usr/share/keyrings/debian-archive-keyring.gpg'
BINARY = 'usr/lib/nvidia/current/nvidia-smi'
LIBRARY_DIR = 'usr/lib/x86_64-linux-gnu/nvidia/current'


class FetchError(Exception):
    """The packages could not be obtained; str() says why and what to do."""


def state_dir():
    return os.environ.get('GPUFLEET_STATE_DIR') or '/var/tmp/gpufleet-harness'


def _apt(base, *args):
    options = ['-o', 'Dir::State=%s' % os.path.join(base, 'apt', 'state'),
               '-o', 'Dir::State::status=%s' % os.path.join(base, 'apt', 'state', 'status'),
               '-o', 'Dir::Cache=%s' % os.path.join(base, 'apt', 'cache'),
               '-o', 'Dir::Etc::SourceList=%s' % os.path.join(base, 'apt', 'sources.list'),
               '-o', 'Dir::Etc::SourceParts=/dev/null',
               '-o', 'Dir::Etc::Preferences=/dev/null', '-o', 'Dir::Etc::PreferencesParts=/dev/null',
               '-o', 'APT::Architecture=amd64', '-o', 'APT::Sandbox::User=root',
               '-o', 'Acquire::Retries=2', '-o', 'Debug::NoLocking=1']
    return subprocess.run(['apt-get'] + options + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, cwd=os.path.join(base, 'download'), timeout=600, check=False)


def _download(base, suite):
    if not os.path.isfile(KEYRING):
        raise FetchError('%s is missing: install debian-archive-keyring to verify the Debian archive' % KEYRING)
    for sub in ('apt/state/lists/partial', 'apt/cache/archives/partial', 'download'):
        os.makedirs(os.path.join(base, sub), exist_ok=True)
    open(os.path.join(base, 'apt', 'state', 'status'), 'a').close()
    with open(os.path.join(base, 'apt', 'sources.list'), 'w') as handle:
        handle.write('deb [signed-by=%s] %s %s contrib non-free\n' % (KEYRING, ARCHIVE, suite))
    for args in (('update',), ('download',) + PACKAGES):
        result = _apt(base, *args)
        if result.returncode != 0:
            raise FetchError('apt-get %s for Debian %s failed (exit %d); is %s reachable?\n%s'
                             % (args[0], suite, result.returncode, ARCHIVE, result.stdout[-3000:]))


def _debs(directory):
    found = {}
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        match = re.match(r'^([a-z0-9.+-]+)_([^_]+)_amd64\.deb$', name)
        if match and match.group(1) in PACKAGES:
            found[match.group(1)] = (match.group(2), os.path.join(directory, name))
    return found


class RealSmi(object):
    """One unpacked real nvidia-smi."""

    def __init__(self, suite, root, version):
        self.suite = suite
        self.root = root
        self.version = version
        self.branch = version.split('.')[0]
        self.binary = os.path.join(root, BINARY)
        self.library_dir = os.path.join(root, LIBRARY_DIR)
        with open(self.binary, 'rb') as handle:
            self.image = handle.read()

    def run(self, args, nvml=True):
        """(rc, stdout, stderr) of the real binary; nvml=False hides libnvidia-ml.so.1."""
        env = dict((k, v) for k, v in os.environ.items() if k != 'LD_LIBRARY_PATH')
        env['LC_ALL'] = 'C'
        if nvml:
            env['LD_LIBRARY_PATH'] = self.library_dir
        result = subprocess.run([self.binary] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, timeout=60, check=False)
        return result.returncode, result.stdout.decode('utf-8'), result.stderr.decode('utf-8')

    def strings(self, minimum=4):
        """Every NUL-terminated printable string of the binary (what strings(1) shows)."""
        return [s.decode('ascii') for s in re.findall(rb'[\t\n\x20-\x7e]{%d,}(?=\0)' % minimum, self.image)]

    def has_string(self, text):
        """text ends a NUL-terminated string of the binary (the linker merges
        string tails, so "name" may only exist inside "gpu_name")."""
        return (text.encode('ascii') + b'\0') in self.image

    def dtd(self):
        """The DTD the binary prints with --dtd (nvsmi_device_vNN.dtd)."""
        start = self.image.find(b'<!-- nvsmi_device_v')
        if start < 0:
            raise AssertionError('no DTD in %s' % self.binary)
        start = self.image.rfind(b'\0', 0, start) + 1
        return self.image[start:self.image.find(b'\0', start)].decode('ascii')


def fetch(suite):
    """The real nvidia-smi of a Debian suite (downloaded and unpacked once)."""
    base = os.path.join(state_dir(), 'debs', suite)
    os.makedirs(base, exist_ok=True)
    with open(os.path.join(base, '.lock'), 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        debs = _debs(os.path.join(base, 'download'))
        if set(debs) != set(PACKAGES) or len(set(v for v, _p in debs.values())) != 1:
            shutil.rmtree(os.path.join(base, 'download'), ignore_errors=True)
            _download(base, suite)
            debs = _debs(os.path.join(base, 'download'))
            if set(debs) != set(PACKAGES):
                raise FetchError('Debian %s did not provide %s' % (suite, ', '.join(sorted(set(PACKAGES) - set(debs)))))
        version = debs['nvidia-smi'][0].split('-')[0]
        root = os.path.join(base, 'root-' + version)
        if not os.path.isfile(os.path.join(root, BINARY)):
            staging = tempfile.mkdtemp(prefix='.root-', dir=base)
            for _version, path in debs.values():
                subprocess.run(['dpkg-deb', '-x', path, staging], check=True)
            shutil.rmtree(root, ignore_errors=True)
            os.rename(staging, root)
    return RealSmi(suite, root, version)


# --- reading what the binary says -------------------------------------------

def help_options(text):
    """({option form: takes a value}, [sub-commands]) of an ``nvidia-smi -h`` text."""
    options = {}
    for line in text.splitlines():
        stripped = line.strip()
        if line.startswith(' ') and stripped.startswith('-'):
            left = []
            for chunk in re.split(r'\s{2,}', stripped):
                if not chunk.startswith('-'):
                    break
                left.append(chunk)
            names = re.findall(r'--?[A-Za-z][\w-]*=?', ' '.join(left))
            takes = any(name.endswith('=') for name in names)
            for name in names:
                options[name.rstrip('=')] = options.get(name.rstrip('='), False) or takes
        for name in re.findall(r'Call (--help-query-[\w-]+)', stripped):
            options.setdefault(name, False)
    return options, sorted(set(re.findall(r'"nvidia-smi ([a-z][\w-]*) -h"', text)))


FORMAT_SPEC = re.compile(r'(%[-+ #0]*\d*(?:\.\d+)?(?:ll|l|h|z)?[a-zA-Z%])')


def format_pattern(fmt):
    """A regex matching what printf would make of a format string."""
    out = []
    for piece in FORMAT_SPEC.split(fmt):
        if not piece.startswith('%') or len(piece) < 2:
            out.append(re.escape(piece))
        elif piece == '%%':
            out.append('%')
        elif piece[-1] in 'sc':
            out.append('.*')
        else:
            out.append(r'\s*[-+]?[0-9A-Fa-fx.]+')
    return re.compile('^' + ''.join(out) + '$')


# --- DTD content models ------------------------------------------------------

def _children_regex(model):
    """'(a, b?, (c|d)*)' -> regex over 'a,b,c,' sequences."""
    tokens = re.findall(r'[A-Za-z_][\w.-]*|[(),|?*+]', model)
    out = []
    for token in tokens:
        if token == ',':
            continue
        out.append('(?:%s,)' % re.escape(token) if token not in '()|?*+' else token)
    return re.compile('^' + ''.join(out) + '$')


def dtd_violations(document, text):
    """Elements of an ElementTree document whose children break the DTD: [(path, children, model)]."""
    models = {}
    for name, model in re.findall(r'<!ELEMENT\s+(\S+)\s+(.*?)>', text, re.S):
        model = ' '.join(model.split())
        if model in ('EMPTY', 'ANY') or model.startswith('(#PCDATA'):
            allowed = set(re.findall(r'[A-Za-z_][\w.-]*', model.replace('#PCDATA', '')))
            models[name] = (model, allowed)
        else:
            models[name] = (model, _children_regex(model))
    found = []

    def walk(element, path):
        children = [child.tag for child in element]
        model = models.get(element.tag)
        if model is None:
            found.append((path, children, 'not declared'))
        elif isinstance(model[1], set):
            if model[0] != 'ANY' and any(tag not in model[1] for tag in children):
                found.append((path, children, model[0]))
        elif not model[1].match(''.join(tag + ',' for tag in children)):
            found.append((path, children, model[0]))
        for child in element:
            walk(child, path + '/' + child.tag)

    walk(document, '/' + document.tag)
    return found
