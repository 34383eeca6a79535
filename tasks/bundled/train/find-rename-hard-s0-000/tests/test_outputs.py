import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

FINAL = {"photos/2023/brisk_planet_78.jpg": 58081, "photos/2023/calm_valley_56.gif": "calm valley 56.gif comet 9992\n", "photos/2023/dusty_island_69.jpg": "dusty_island_69.jpg otter 6290\n", "photos/2023/gentle_raven_43.jpg": "GENTLE RAVEN 43.JPEG orbit 9965\n", "photos/2023/img_3263.jpg": "IMG_3263.jpeg forest 4800\n", "photos/2023/img_8196.jpg": "IMG_8196.jpeg glacier 5985\n", "photos/2023/rapid_garden_54.gif": "RAPID_GARDEN_54.gif timber 9579\n", "photos/garden/bold_hazel_29.jpg": 46640, "photos/garden/brisk_garden_71.jpg": "BRISK_GARDEN_71.jpeg willow 405\n", "photos/garden/gentle_river_27.jpg": 15663, "photos/garden/img_1419.gif": 35234, "photos/img_9008.jpg": "IMG_9008.JPEG beacon 6483\n", "photos/nectar/proud/brisk_quartz_68.png": "BRISK_QUARTZ_68.png falcon 3548\n", "photos/nectar/proud/crisp_cedar_93.jpg": "crisp_cedar_93.JPEG badger 4449\n", "photos/noble_cipher_56.gif": "NOBLE_CIPHER_56.gif nectar 5959\n", "photos/swift_glacier_47.jpg": "swift_glacier_47.jpeg meteor 5363\n"}
OLD_TMP = ["photos/nectar/proud/cache-old-0-feather.tmp", "photos/garden/cache-old-1-fjord.tmp"]
NEW_TMP = ["photos/nectar/proud/cache-new-0-pillar.tmp"]


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


def test_no_spaces_in_names():
    "no file name contains a space"
    files = all_files()
    assert len(files) > 0
    assert [f for f in files if " " in f] == []
    assert all((APP / p).exists() for p in FINAL)


def test_names_are_lower_case():
    "every file name is lower case"
    files = all_files()
    assert [f for f in files if f != f.lower()] == []
    assert all((APP / p).exists() for p in FINAL)


def test_large_files_listed():
    "large_files.txt lists the files over 10240 bytes"
    lines = [l.strip().removeprefix("./") for l in (APP / "large_files.txt").read_text().splitlines() if l.strip()]
    assert lines == ["photos/2023/brisk_planet_78.jpg", "photos/garden/bold_hazel_29.jpg", "photos/garden/gentle_river_27.jpg", "photos/garden/img_1419.gif"]
