import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

MATCHES = ["ribbon.txt:misty feather follows CANYON bridge draws bold glacier", "velvet.txt:canyon brisk humble crystal keeps.", "velvet.txt:timber badger falcon lively canyon velvet", "velvet.txt:eager lemon finds thistle Canyon", "velvet.txt:thistle holds canyon moves beacon shows delta shapes orbit", "velvet.txt:crisp opens shows canyon checks harbor copper", "velvet.txt:finds lifts young garden and CANYON writes", "zephyr.txt:young canyon collects plain delta summit", "zephyr.txt:pebble ribbon clever wild Canyon.", "zephyr.txt:canyon lifts kernel thistle velvet mellow"]
NO_MATCH = ["island.txt", "timber.txt"]


def lines_of(name):
    return [l for l in (APP / name).read_text().splitlines() if l.strip()]


def test_matches_are_complete():
    "matches.txt holds exactly the matching lines, in any order"
    assert sorted(lines_of("matches.txt")) == sorted(MATCHES)


def test_matches_are_ordered():
    "matches.txt is grouped by file name in byte order, lines in file order"
    assert lines_of("matches.txt") == MATCHES


def test_count_is_right():
    "count.txt holds the number of matching lines"
    assert (APP / "count.txt").read_text().strip() == str(len(MATCHES))


def test_files_without_match():
    "no_match.txt lists the files without a matching line"
    assert lines_of("no_match.txt") == NO_MATCH


def test_case_variants_are_found():
    "lines with the word in capitals are among the matches"
    want = ["ribbon.txt:misty feather follows CANYON bridge draws bold glacier", "velvet.txt:eager lemon finds thistle Canyon", "velvet.txt:finds lifts young garden and CANYON writes", "zephyr.txt:pebble ribbon clever wild Canyon."]
    got = set(lines_of("matches.txt"))
    assert all(l in got for l in want)
