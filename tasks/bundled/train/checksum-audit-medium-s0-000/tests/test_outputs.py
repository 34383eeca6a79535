import json
import os
import stat
import subprocess
from pathlib import Path

APP = Path("/app")

import hashlib

MANIFEST = {"files/coral.csv": "1b9ad025c37768d08cf230aa8d6243b26929de72c5aa533a31f8cb04e3399c7d", "files/ember.dat": "747edf14048550a841e4a2c54cf968e4765602ef7e9d367118ec00ef850dd8e4", "files/glacier.csv": "6547d4bc99f4cc73b2cc32801fa9779df0faf9442505f6b5298fa511d9df155e", "files/kernel.txt": "b66717cae12ebb7838edf2dbf3390fdf5ccb3b5151b2211c0088ac4cca88be6b", "files/nectar.dat": "c2f95c58ab83e979c3c0d4608b09bc28eee8e7a956e9f01ae93e066926f51a76", "files/pepper.csv": "83de843236c629f10aa6487568f8e1cdb7cc5602bbe0ac727d1dc936f52a7638", "files/planet.txt": "39f976b08a5ca6338cdd390bcbe75a0fa8c0695b08017b656c2c737ad44c70b5", "files/ribbon.dat": "970f54dac595d79307b81fd23d17605eff019c8cf70e0e79e9ba8b02a78c476e", "files/timber.dat": "aa7a31037691efcf38ef7657d8f35e90205dbd8eda0dff2822394e9e248e517e", "files/tundra.txt": "ee025fc7a3ba7d2d03d0c90f1a8551e85d3e62ab14c4a628c1f34a7e76a9b3ea"}


def listed(name):
    return [l.strip() for l in (APP / "audit" / name).read_text().splitlines() if l.strip()]


def test_corrupted_list():
    "audit/corrupted.txt lists the files whose checksum does not match"
    assert listed("corrupted.txt") == ["files/coral.csv", "files/planet.txt"]


def test_missing_list():
    "audit/missing.txt lists the files that are gone"
    assert listed("missing.txt") == ["files/ribbon.dat", "files/tundra.txt"]


def test_summary_ok_count():
    "audit/summary.txt counts the files that match"
    got = dict(l.replace(" ", "").split("=", 1) for l in listed("summary.txt"))
    assert got.get("ok") == "6"


def test_summary_problem_counts():
    "audit/summary.txt counts the corrupted and missing files"
    got = dict(l.replace(" ", "").split("=", 1) for l in listed("summary.txt"))
    assert [got.get("corrupted"), got.get("missing")] == ["2", "2"]


def test_untracked_list():
    "audit/untracked.txt lists the files the manifest does not know"
    assert listed("untracked.txt") == ["files/hazel.dat", "files/saddle.dat"]


def test_manifest_verifies():
    "every listed file exists with its listed checksum"
    for path, digest in MANIFEST.items():
        assert hashlib.sha256((APP / path).read_bytes()).hexdigest() == digest, path
