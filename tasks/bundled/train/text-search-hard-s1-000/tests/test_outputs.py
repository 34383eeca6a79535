import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

MATCHES = ["canyon.txt:ember OTTER covers near walnut", "canyon.txt:otter harbor holds summit pepper badger", "canyon.txt:nectar checks shapes silent lemon OTTER.", "canyon.txt:garden dusty otter golden young timber quartz", "canyon.txt:OTTER covers wild bold harbor cipher rapid river", "copper.txt:young delta mellow OTTER forest pepper keeps shows zephyr", "copper.txt:OTTER cipher cedar hazel marks lucky turns silver lucky.", "copper.txt:lantern fjord OTTER velvet delta shapes hidden.", "copper.txt:velvet lemon comet holds thistle carries Otter.", "fjord.txt:basalt jasper shows with OTTER carries carries.", "meteor.txt:amber young hazel lemon golden otter copper river.", "meteor.txt:brisk lantern quartz zephyr OTTER lemon marks", "meteor.txt:vivid marble noble turns clever harbor Otter the.", "meteor.txt:young fjord raven otter anchor forest", "quartz.txt:wild cedar jasper quiet anchor otter", "quartz.txt:bridge shapes cipher OTTER takes.", "quartz.txt:otter draws gathers a eager finds saddle fancy", "quartz.txt:shapes otter harbor follows plain jasper golden gathers", "quartz.txt:bridge zephyr fancy lucky lucky walnut otter bold finds.", "quartz.txt:comet thistle the comet pebble shapes swift beacon otter."]
NO_MATCH = ["harbor.txt", "velvet.txt"]


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
    want = ["canyon.txt:ember OTTER covers near walnut", "canyon.txt:nectar checks shapes silent lemon OTTER.", "canyon.txt:OTTER covers wild bold harbor cipher rapid river", "copper.txt:young delta mellow OTTER forest pepper keeps shows zephyr", "copper.txt:OTTER cipher cedar hazel marks lucky turns silver lucky.", "copper.txt:lantern fjord OTTER velvet delta shapes hidden.", "copper.txt:velvet lemon comet holds thistle carries Otter.", "fjord.txt:basalt jasper shows with OTTER carries carries.", "meteor.txt:brisk lantern quartz zephyr OTTER lemon marks", "meteor.txt:vivid marble noble turns clever harbor Otter the.", "quartz.txt:bridge shapes cipher OTTER takes."]
    got = set(lines_of("matches.txt"))
    assert all(l in got for l in want)


def test_partial_words_and_comments_are_skipped():
    "lines where the word is only part of a longer word, or commented out, are not matches"
    skipped = ["canyon.txt:delta finds reads otters timber anchor.", "canyon.txt:subotter clever lucky walnut crisp young fancy garden.", "canyon.txt:# quartz otter steady shapes finds garden beacon lantern.", "copper.txt:# thistle otter crisp moves young raven", "fjord.txt:# golden beacon a Otter raven builds saddle", "fjord.txt:# opens vivid cedar island otter the witty", "fjord.txt:otter_id delta humble sunny coral lucky keeps", "harbor.txt:# noble thistle takes otter crystal witty quiet timber island", "meteor.txt:paints eager subotter collects holds follows falcon nectar comet.", "meteor.txt:delta otters delta badger basalt marble", "meteor.txt:otter2 bold basalt glacier pillar island.", "quartz.txt:raven fjord tidy tidy otter2 lemon sends", "quartz.txt:summit carries proud shapes cedar otters lively", "velvet.txt:# otter with ember keeps reads orbit vivid"]
    got = set(lines_of("matches.txt"))
    assert len(got) > 0
    assert not any(l in got for l in skipped)


def test_per_file_counts():
    "per_file.txt gives the number of matching lines of each file"
    assert lines_of("per_file.txt") == ["canyon.txt 5", "copper.txt 4", "fjord.txt 1", "meteor.txt 4", "quartz.txt 6"]
