/**
 * The agent's helper module, forging: imported by the tests, it rewrites every report pytest
 * makes from then on into a pass, inside pytest's own process (no conftest, no plugin, no file of
 * pytest's touched). Shared by the verifier's tests that show such a run is forged.
 */
export const FORGING_HELPER = `import _pytest.reports

_made = _pytest.reports.TestReport.__init__

def _passed(self, *args, **kwargs):
    _made(self, *args, **kwargs)
    self.outcome = "passed"
    self.longrepr = None

_pytest.reports.TestReport.__init__ = _passed

def answer():
    return 0
`
