import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

EXPECTED = {"data": {"badger_24.json": "badger_24.json: the quiet marble lifts 961\n", "nectar_15.json": "nectar_15.json: the eager saddle covers 969\n"}, "images": {"quartz_54.gif": "quartz_54.gif: the crisp delta builds 14\n"}, "other": {"otter_7.mkv": "otter_7.mkv: the noble walnut takes 939\n", "badger_58.iso": "badger_58.iso: the noble cedar starts 795\n", "canyon_36.mkv": "canyon_36.mkv: the young willow gathers 901\n"}}
EMPTY = []


def names_in(folder):
    d = APP / "sorted" / folder
    return sorted(p.name for p in d.iterdir() if p.is_file()) if d.is_dir() else []


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
