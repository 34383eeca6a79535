import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

EXPECTED = {"code": {"badger_62.py": "badger_62.py: the silent walnut gathers 226\n"}, "data": {"planet_77.json": "planet_77.json: the humble kernel sends 390\n", "coral_19.json": "coral_19.json: the quiet zephyr moves 72\n"}, "images": {"cipher_53.jpg": "cipher_53.jpg: the rusty fjord shows 368\n", "nectar_85.png": "nectar_85.png: the amber fjord watches 443\n", "coral_82.jpg": "coral_82.jpg: the wild canyon follows 684\n", "nectar_19.jpg": "nectar_19.jpg: the swift willow writes 524\n"}, "other": {"pillar_75.bin": "pillar_75.bin: the sunny comet holds 828\n", "glacier_88.txt": "glacier_88.txt: the noble zephyr draws 734\n", "glacier_89.txt": "glacier_89.txt: the rapid badger checks 465\n"}}
EMPTY = ["tundra_74.csv", "walnut_18.py"]


def names_in(folder):
    d = APP / "sorted" / folder
    return sorted(p.name for p in d.iterdir() if p.is_file()) if d.is_dir() else []


def test_code_folder_holds_its_files():
    "sorted/code/ holds exactly the files that belong there"
    got = [n for n in names_in("code") if n != "manifest.txt"]
    assert got == sorted(EXPECTED["code"])


def test_data_folder_holds_its_files():
    "sorted/data/ holds exactly the files that belong there"
    got = [n for n in names_in("data") if n != "manifest.txt"]
    assert got == sorted(EXPECTED["data"])


def test_images_folder_holds_its_files():
    "sorted/images/ holds exactly the files that belong there"
    got = [n for n in names_in("images") if n != "manifest.txt"]
    assert got == sorted(EXPECTED["images"])


def test_other_folder_holds_its_files():
    "sorted/other/ holds exactly the files that belong there"
    got = [n for n in names_in("other") if n != "manifest.txt"]
    assert got == sorted(EXPECTED["other"])


def test_incoming_is_empty():
    "no regular file is left under incoming/"
    left = [str(p) for p in (APP / "incoming").rglob("*") if p.is_file()]
    assert left == []


def test_contents_are_preserved():
    "every sorted file has its original content"
    for folder, files in EXPECTED.items():
        for name, content in files.items():
            assert (APP / "sorted" / folder / name).read_text() == content, name


def test_empty_files_are_deleted():
    "the zero-byte files are gone, neither left in incoming/ nor sorted"
    everywhere = [p.name for p in APP.rglob("*") if p.is_file()]
    for name in EMPTY:
        assert name not in everywhere, name


def test_manifest_lists_sorted_files():
    "sorted/manifest.txt lists every sorted file as folder/name in byte order"
    lines = (APP / "sorted" / "manifest.txt").read_text().splitlines()
    want = sorted(f"{folder}/{name}" for folder, files in EXPECTED.items() for name in files)
    assert [l for l in lines if l.strip()] == want
