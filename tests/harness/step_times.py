# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Copy a Molecule run's output and time its steps.

    molecule test -s S 2>&1 | python3 step_times.py > S.log

Molecule prints no clock. This filter passes every line through and, after
the last one, appends one line with the seconds each step took (a step that
runs twice, such as destroy, is summed):

    step seconds: destroy 4, syntax 2, create 11, prepare 35, converge 160, ...

tests/harness/molecule.sh prints it with the scenario's result, so a run's
log says where each scenario's time went (docs/testing.md records them).
"""
import re
import sys
import time

STEP = re.compile(r'\[[^\]>]+ > ([a-z_]+)\] (Executing|Executed)\b')


def main():
    order, seconds = [], {}
    current, started = None, None
    out = sys.stdout
    for line in sys.stdin:
        out.write(line)
        out.flush()
        match = STEP.search(line)
        if not match:
            continue
        step, what = match.groups()
        now = time.monotonic()
        # "Executing Testinfra tests" follows "Executing" within the same step.
        if what == 'Executing' and current != step:
            if current is not None:
                seconds[current] = seconds.get(current, 0) + now - started
            current, started = step, now
            if step not in order:
                order.append(step)
        elif what == 'Executed' and current == step:
            seconds[step] = seconds.get(step, 0) + now - started
            current = None
    if current is not None:
        seconds[current] = seconds.get(current, 0) + time.monotonic() - started
    if order:
        out.write('step seconds: %s\n' % ', '.join('%s %d' % (s, round(seconds.get(s, 0))) for s in order))
    return 0


if __name__ == '__main__':
    sys.exit(main())
