import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

FINAL = {"photos/brisk_velvet_10.gif": "brisk_velvet_10.gif forest 4963\n", "photos/garden/lucky/humble_ledger_21.jpg": "humble_ledger_21.JPEG quartz 1853\n", "photos/garden/lucky/vivid_badger_20.jpg": "vivid_badger_20.JPEG willow 8177\n", "photos/saddle/amber_valley_92.jpg": "amber_valley_92.JPEG island 1004\n", "photos/saddle/clever_copper_81.jpg": "clever_copper_81.jpg zephyr 2446\n", "photos/saddle/lively_thistle_57.jpg": "lively_thistle_57.JPEG lantern 1547\n", "photos/saddle/rusty_velvet_25.jpg": "rusty_velvet_25.jpg quartz 1129\n", "photos/sunny_delta_31.jpg": "sunny_delta_31.JPEG delta 184\n"}
OLD_TMP = ["photos/2024/cache-old-0-hazel.tmp", "photos/cache-old-1-timber.tmp"]
NEW_TMP = ["photos/cache-new-0-kernel.tmp", "photos/2024/cache-new-1-meadow.tmp"]


def all_files():
    return [str(p.relative_to(APP)) for p in (APP / "photos").rglob("*") if p.is_file()]


def test_no_jpeg_left():
    "no file name ends in .jpeg in any case"
    files = all_files()
    assert len(files) > 0
    assert [f for f in files if f.lower().endswith(".jpeg")] == []


def test_photos_at_their_new_names():
    "every photo is at its expected final path with its content intact"
    for path, want in FINAL.items():
        p = APP / path
        if isinstance(want, int):
            assert p.stat().st_size == want, path
        else:
            assert p.read_text() == want, path


def test_nothing_else_in_the_tree():
    "the tree holds exactly the renamed photos and the recent .tmp files"
    assert sorted(all_files()) == sorted(list(FINAL) + NEW_TMP)


def test_old_tmp_files_deleted():
    "the .tmp files older than 30 days are gone, the recent ones kept"
    for path in OLD_TMP:
        assert not (APP / path).exists(), path
    for path in NEW_TMP:
        assert (APP / path).exists(), path
