"""A bytecode cache for Ansible's module payloads, on the Molecule test hosts only.

Installed by molecule/_shared/prepare.yml when gpufleet_test_pyc_cache is true
(.config/molecule/config.yml sets it; the demo fleet and the benchmark's hosts
do not get it), with a .pth line that imports this module at interpreter start.

Every module execution unpacks Ansible's payload zip and imports
ansible.module_utils and the collection's module_utils from it; zipimport
compiles each source file again, every time (a zip without .pyc entries has
nowhere to keep them). This keeps the compiled code by the SHA-256 of the
source and the interpreter's cache tag, as ccache keeps the DKMS builds'
objects (molecule/nvidia_driver_distribution/prepare.yml), and gives it the
file name zipimport would have given it, so that tracebacks read the same.
Same source, same code: what a module does is unchanged; only the compile
is skipped. Measured in a Debian 12 test container: a ping module execution
0.26-0.28 s of CPU without it, 0.19-0.21 s with it (benchmarks/README.md).

Any error here falls back to zipimport's own compile.
"""

import sys
import zipimport

CACHE_DIR = '/var/cache/gpufleet-test-pyc'
# zipimport's own compile (Python 3.11 to 3.13 call it by this module-level name).
_compile_source = getattr(zipimport, '_compile_source', None)


def _renamed(code, filename):
    """code and the code objects it holds (functions, classes), with their file name set."""
    consts = tuple(_renamed(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _cached_compile(pathname, source):
    try:
        import hashlib
        import marshal
        import os

        key = hashlib.sha256(source).hexdigest()
        path = os.path.join(CACHE_DIR, sys.implementation.cache_tag, key[:2], key)
        try:
            with open(path, 'rb') as handle:
                return _renamed(marshal.loads(handle.read()), pathname)
        except OSError:
            pass
        code = _compile_source(pathname, source)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            partial = '%s.%d' % (path, os.getpid())
            with open(partial, 'wb') as handle:
                handle.write(marshal.dumps(code))
            os.replace(partial, path)
        except OSError:
            pass
        return code
    except Exception:  # pylint: disable=broad-except
        return _compile_source(pathname, source)


if callable(_compile_source):
    zipimport._compile_source = _cached_compile
