import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

import hashlib

MANIFEST = {"files/anchor.dat": "13ea3972d5e5162334d4cf33d3f677313cec450628ecc1fdb6d6172a024f0612", "files/docs/falcon.csv": "9b4fc425d45e7cc4aea628f0ac1356361a3a9098ee7895c69a6c94daf717f454", "files/docs/pillar.dat": "963bec61b702feae47c432bd5722bca8072fe3fe0d97581523a3bc326acea1e6", "files/kernel.csv": "08c584378aa50c8b7d6dde1372cd58dd4487bbe385bdd01b957b3c7217db0a6b", "files/meteor.dat": "775f1887bce949a056777bd6361aa0e66599ab64716ebe47ffed8d299291b6de", "files/planet.dat": "3110578c33d4401e50ce43d7bc3887c23fe0161e9684a7fd925550e40e1dc509", "files/raw/2024/cipher.dat": "fb669f8ea2dc778ceaaacdc1a0a5d0baf9ad332f2c693f6a879aa3b6be616fb9", "files/raw/2024/otter.csv": "b5d11abfab3851fdaa9bcbb1672959dc0a13cd090b6a5bfdf0eeea3b30578703", "files/raw/2024/quartz.dat": "dcaab7301e14569522dfa0de155e40b0dec08e0719932d02417eba742b2291c2", "files/raw/basalt.txt": "a100b1e3ae4f2a0ba2e76936f50e654a282ae8b38f67effeb65735641f0c06d0", "files/raw/maple.csv": "c3597df0a9f7215fa90464e91b1383a700701515157a4198d976b1f312bc6e4b", "files/raw/ribbon.txt": "0144537bcb26b1d2b211c1644bc1846195b9faebbcd80367c1dbe4f468ed5fe8", "files/tundra.txt": "c12e68d49a7f13b810c8c30a9176778f76fba28a6f4f57312f2debe166eccff1", "files/zephyr.txt": "af3d462f199f930ad13051c473a3ce2e4ca623ec20a4a6438fa0692ee7c6f0cf"}


def listed(name):
    return [l.strip() for l in (APP / "audit" / name).read_text().splitlines() if l.strip()]


def test_corrupted_list():
    "audit/corrupted.txt lists the files whose checksum does not match"
    assert listed("corrupted.txt") == ["files/planet.dat", "files/tundra.txt", "files/zephyr.txt"]


def test_missing_list():
    "audit/missing.txt lists the files that are gone"
    assert listed("missing.txt") == ["files/meteor.dat", "files/raw/ribbon.txt"]


def test_summary_ok_count():
    "audit/summary.txt counts the files that match"
    got = dict(l.replace(" ", "").split("=", 1) for l in listed("summary.txt"))
    assert got.get("ok") == "9"


def test_summary_problem_counts():
    "audit/summary.txt counts the corrupted and missing files"
    got = dict(l.replace(" ", "").split("=", 1) for l in listed("summary.txt"))
    assert [got.get("corrupted"), got.get("missing")] == ["3", "2"]


def test_untracked_list():
    "audit/untracked.txt lists the files the manifest does not know"
    assert listed("untracked.txt") == ["files/raw/2024/cedar.dat", "files/raw/2024/raven.dat", "files/walnut.txt"]


def test_manifest_verifies():
    "every listed file exists with its listed checksum"
    for path, digest in MANIFEST.items():
        assert hashlib.sha256((APP / path).read_bytes()).hexdigest() == digest, path


def test_untracked_quarantined():
    "untracked files moved to quarantine/, keeping their relative paths"
    for path, content in {"files/raw/2024/cedar.dat": "basalt shapes 97563\njasper marks 52734\nmarble starts 26967\nfalcon reads 9353\n", "files/walnut.txt": "falcon sends 51649\nsummit paints 92166\n", "files/raw/2024/raven.dat": "forest finds 52090\nmeadow moves 72417\n"}.items():
        rel = path.removeprefix("files/")
        assert not (APP / path).exists(), path
        assert (APP / "quarantine" / rel).read_text() == content, rel
