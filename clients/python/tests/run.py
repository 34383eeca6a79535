"""Runs every test_* function of clients/python/tests/test_*.py without pytest (CI installs only
Debian's python3-torch, python3-grpcio and python3-protobuf); prints one line per test and exits
1 when any failed. `python3 -m pytest clients/python/tests` runs the same tests.

    python3 clients/python/tests/run.py
"""

import importlib
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.dirname(HERE))
    failed = passed = 0
    for file in sorted(f for f in os.listdir(HERE) if f.startswith("test_") and f.endswith(".py")):
        module = importlib.import_module(file[:-3])
        for name in sorted(n for n in dir(module) if n.startswith("test_") and callable(getattr(module, n))):
            started = time.monotonic()
            try:
                getattr(module, name)()
            except Exception:  # noqa: BLE001 - every failure is reported, then the next test runs
                failed += 1
                print(f"FAIL {file}::{name}\n{traceback.format_exc()}", flush=True)
            else:
                passed += 1
                print(f"ok   {file}::{name} ({time.monotonic() - started:.2f} s)", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
