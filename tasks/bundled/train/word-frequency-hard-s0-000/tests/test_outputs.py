import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

TOP = ["17 coral", "15 anchor", "15 pillar", "13 ribbon", "11 timber", "10 young"]
STATS = {"lines": 27, "words": 219, "unique": 28}


def top_lines():
    return [" ".join(l.split()) for l in (APP / "top.txt").read_text().splitlines() if l.strip()]


def stat(key):
    for line in (APP / "stats.txt").read_text().splitlines():
        k, _, v = line.strip().partition("=")
        if k.strip() == key:
            return int(v.strip())
    raise AssertionError(f"no {key}= line")


def test_top_has_the_right_words():
    "top.txt names the 6 most frequent words"
    got = {l.split()[-1] for l in top_lines()}
    assert got == {l.split()[1] for l in TOP}


def test_top_counts_are_right():
    "each line of top.txt has the word's true count"
    want = {l.split()[1]: l.split()[0] for l in TOP}
    got = top_lines()
    assert len(got) > 0
    for line in got:
        count, word = line.split()
        assert want.get(word) == count, line


def test_top_is_ordered():
    "top.txt is most frequent first, ties alphabetical, in the `<count> <word>` form"
    assert top_lines() == TOP


def test_stats_lines():
    "stats.txt has the number of lines"
    assert stat("lines") == STATS["lines"]


def test_stats_words():
    "stats.txt has the number of words"
    assert stat("words") == STATS["words"]


def test_stats_unique():
    "stats.txt has the number of distinct words"
    assert stat("unique") == STATS["unique"]


def test_stopwords_are_left_out():
    "no stop word appears in top.txt"
    stop = ["the", "in", "to", "is"]
    got = top_lines()
    assert len(got) > 0
    assert not any(l.split()[-1] in stop for l in got)
