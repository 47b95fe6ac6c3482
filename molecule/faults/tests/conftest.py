"""The fault suite's closing line, as the bad-input table has its own:
"fault suite: N passed, N failed" over the cases of tests/test_faults.py."""


def pytest_terminal_summary(terminalreporter):
    cases, failed = set(), set()
    for outcome in ("passed", "failed", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if nodeid.split("::")[0].endswith("test_faults.py"):
                cases.add(nodeid)
                # A case whose setup or teardown failed counts once, as failed.
                if report.outcome != "passed":
                    failed.add(nodeid)
    terminalreporter.write_line("fault suite: %d passed, %d failed" % (len(cases - failed), len(failed)))
