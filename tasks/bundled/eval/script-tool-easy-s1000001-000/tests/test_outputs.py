import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

TOOL = APP / "bin" / "countoff"


def run(*args, stdin=""):
    return subprocess.run([str(TOOL), *map(str, args)], input=stdin, capture_output=True, text=True, timeout=10)


def out(*args, stdin=""):
    r = run(*args, stdin=stdin)
    assert r.returncode == 0, r.stderr
    return r.stdout.rstrip("\n")


def test_tool_is_executable():
    "bin/countoff exists, is executable and starts with #!"
    assert TOOL.is_file()
    assert os.access(TOOL, os.X_OK)
    assert TOOL.read_bytes().startswith(b"#!")


def test_counts_to_n():
    "prints 1..N with multiples of 2 and 5 replaced"
    assert out(10) == "1\nwalnut\n3\nwalnut\nplanet\nwalnut\n7\nwalnut\n9\nwalnutplanet"


def test_longer_run():
    "works for a larger N"
    assert out(24) == "1\nwalnut\n3\nwalnut\nplanet\nwalnut\n7\nwalnut\n9\nwalnutplanet\n11\nwalnut\n13\nwalnut\nplanet\nwalnut\n17\nwalnut\n19\nwalnutplanet\n21\nwalnut\n23\nwalnut"


def test_multiples_of_both():
    "a multiple of both 2 and 5 prints walnutplanet"
    lines = out(10).splitlines()
    assert lines[-1] == "walnutplanet"
    assert len(lines) == 10
