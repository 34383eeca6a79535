import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

TOOL = APP / "bin" / "scramble"


def run(*args, stdin=""):
    return subprocess.run([str(TOOL), *map(str, args)], input=stdin, capture_output=True, text=True, timeout=10)


def out(*args, stdin=""):
    r = run(*args, stdin=stdin)
    assert r.returncode == 0, r.stderr
    return r.stdout.rstrip("\n")


def test_tool_is_executable():
    "bin/scramble exists, is executable and starts with #!"
    assert TOOL.is_file()
    assert os.access(TOOL, os.X_OK)
    assert TOOL.read_bytes().startswith(b"#!")


def test_shifts_letters():
    "shifts letters by 1, keeping case"
    assert out(1, stdin="Watches kernel swift amber meadow velvet witty willow, 42.\nPillar turns feather wild.\n") == "Xbudift lfsofm txjgu bncfs nfbepx wfmwfu xjuuz xjmmpx, 42.\nQjmmbs uvsot gfbuifs xjme."


def test_keeps_other_characters():
    "digits, spaces and punctuation pass through unchanged"
    assert out(1, stdin="Collects amber glacier orbit cedar gentle! 750\n") == "Dpmmfdut bncfs hmbdjfs pscju dfebs hfoumf! 750"


def test_wraps_around():
    "z wraps around to a"
    assert out(1, stdin="xyz XYZ\n") == "yza YZA"


def test_negative_and_large_shifts():
    "negative shifts go backwards and shifts beyond 26 wrap"
    assert out(-7, stdin="Watches kernel swift amber meadow velvet witty willow, 42.\nPillar turns feather wild.\n") == "Ptmvaxl dxkgxe lpbym tfuxk fxtwhp oxeoxm pbmmr pbeehp, 42.\nIbeetk mnkgl yxtmaxk pbew."
    assert out(57, stdin="Collects amber glacier orbit cedar gentle! 750\n") == "Htqqjhyx frgjw lqfhnjw twgny hjifw ljsyqj! 750"


def test_decode_flag():
    "-d SHIFT undoes the shift"
    assert out("-d", 1, stdin="Xbudift lfsofm txjgu bncfs nfbepx wfmwfu xjuuz xjmmpx, 42.\nQjmmbs uvsot gfbuifs xjme.\n") == "Watches kernel swift amber meadow velvet witty willow, 42.\nPillar turns feather wild."


def test_bad_arguments_exit_with_usage():
    "bad arguments print a usage line on stderr and exit with status 2"
    for args in [[], ["x"], ["-d"], ["1", "2"]]:
        r = run(*args)
        assert r.returncode == 2, args
        assert "usage" in r.stderr.lower(), args
        assert r.stdout == "", args
