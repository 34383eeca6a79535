"""Builds t1's verifier toolchain into OUT (argv[1], mounted at /.t1v), as root in the base image.

The toolchain is what the verifier runs tests with, mounted read-only into every docker sandbox:
the base image's bash, coreutils, grep, sed, findutils, diffutils, python3 and pytest, each
executable's ELF interpreter pointed at a private copy of the dynamic loader that reads no
/etc/ld.so.preload, no /etc/ld.so.cache and searches only the toolchain's own libraries. Nothing
the agent can write (the sandbox's /usr, /lib, /etc, site-packages) is loaded by it.
"""
import os
import shutil
import stat
import struct
import subprocess
import sys

OUT = sys.argv[1]
ROOT = "/.t1v"  # where the sandbox sees OUT; every patched path below lies under it
LOADER = ROOT + "/lib/ld.so"
PY = "python3.11"

PACKAGES = ["bash", "coreutils", "grep", "sed", "findutils", "diffutils", "mawk", "gzip", "tar"]
PYTEST_MODULES = [
    "pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py.py", "py", "exceptiongroup",
    "attr", "attrs", "tomli", "more_itertools", "importlib_metadata", "zipp.py",
    "typing_extensions.py",
]


def patch_bytes(data, old, new):
    if len(new) > len(old):
        raise SystemExit(f"{new!r} is longer than {old!r}")
    count = data.count(old + b"\0")
    if count == 0:
        raise SystemExit(f"{old!r} not found where the toolchain patches it")
    return data.replace(old + b"\0", new + b"\0" * (len(old) - len(new) + 1))


def padded(prefix, length):
    if len(prefix) > length:
        raise SystemExit(f"{prefix!r} does not fit in {length} bytes")
    return prefix + b"/" * (length - len(prefix))


def build_loader():
    real = os.path.realpath("/lib64/ld-linux-x86-64.so.2")
    data = open(real, "rb").read()
    data = patch_bytes(data, b"/etc/ld.so.preload", b"/.t1v/nopreload/xx")
    data = patch_bytes(data, b"/etc/ld.so.cache", b"/.t1v/nocache/xx")
    # The default search list is one block of paths; its first entry becomes the toolchain's
    # libraries (padded with slashes to the same length), so every library the toolchain has is
    # found there first. Libraries it lacks (those of the sandbox's own Python extensions, say
    # numpy's BLAS) are still found in the sandbox's /usr/lib/x86_64-linux-gnu.
    block = b"/lib/x86_64-linux-gnu/\0/usr/lib/x86_64-linux-gnu/\0/lib/\0/usr/lib/\0"
    if data.count(block) == 0:
        raise SystemExit("the loader's default library paths were not found")
    first = padded(b"/.t1v/lib/", len(b"/lib/x86_64-linux-gnu/"))
    data = data.replace(block, first + block[len(first) :])
    path = OUT + "/lib/ld.so"
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o755)


def patch_file(path, pairs):
    with open(path, "rb") as f:
        data = f.read()
    for old, new in pairs:
        data = patch_bytes(data, old, new)
    with open(path, "wb") as f:
        f.write(data)


# Every database glibc's NSS reads; each is served by `files`, built into libc since 2.34.
NSSWITCH = "".join(name + ": files\n" for name in (
    "passwd", "group", "shadow", "gshadow", "hosts", "networks", "protocols", "services",
    "ethers", "rpc", "netgroup", "aliases", "publickey", "initgroups"))


def close_configured_loading():
    """glibc and OpenSSL load code that files of the sandbox name: NSS modules listed in
    /etc/nsswitch.conf (bash and Python look users up), gconv modules, OpenSSL providers and
    engines named in openssl.cnf (Python's hashlib reads it). The toolchain's own copies of libc
    and libcrypto are patched to read those files and directories under ROOT instead, where
    the agent cannot write."""
    gconv = b"/usr/lib/x86_64-linux-gnu/gconv"
    patch_file(OUT + "/lib/libc.so.6", [
        (b"/etc/nsswitch.conf", b"/.t1v/nsswitch.cnf"),
        (gconv + b"/gconv-modules.cache", b"/.t1v/nogconv/gconv-modules.cache"),
        (gconv, b"/.t1v/nogconv"),
    ])
    with open(OUT + "/nsswitch.cnf", "w") as f:
        f.write(NSSWITCH)
    crypto = OUT + "/lib/libcrypto.so.3"
    if os.path.exists(crypto):
        patch_file(crypto, [
            (b"/usr/lib/ssl", b"/.t1v/nossl"),
            (b"/usr/lib/x86_64-linux-gnu/ossl-modules", b"/.t1v/nomodules"),
            (b"/usr/lib/x86_64-linux-gnu/engines-3", b"/.t1v/noengines"),
        ])


def set_interpreter(path):
    with open(path, "r+b") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        phoff = struct.unpack_from("<Q", head, 0x20)[0]
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            ph = f.read(phentsize)
            p_type = struct.unpack_from("<I", ph, 0)[0]
            if p_type != 3:  # PT_INTERP
                continue
            offset = struct.unpack_from("<Q", ph, 8)[0]
            size = struct.unpack_from("<Q", ph, 32)[0]
            new = LOADER.encode()
            if len(new) + 1 > size:
                raise SystemExit(f"{path}: interpreter field of {size} bytes is too short")
            f.seek(offset)
            f.write(new + b"\0" * (size - len(new)))
            return True
    return False


def needed_libraries(path, seen):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split("=>")
        target = (parts[1] if len(parts) == 2 else parts[0]).strip().split(" (")[0].strip()
        if target.startswith("/") and "ld-linux" not in target and target not in seen:
            seen.add(target)
            shutil.copy2(os.path.realpath(target), OUT + "/lib/" + os.path.basename(target))


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def main():
    if os.path.exists(OUT + "/.complete"):
        return
    # A build that stopped half-way left some of the files: start again from nothing.
    for name in os.listdir(OUT):
        path = os.path.join(OUT, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    for d in ("bin", "lib", "t1"):
        os.makedirs(OUT + "/" + d, exist_ok=True)
    build_loader()
    seen = set()
    binaries = []
    for package in PACKAGES:
        files = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True).stdout
        for f in files.splitlines():
            if not (f.startswith("/bin/") or f.startswith("/usr/bin/")):
                continue
            if not os.path.isfile(f) or not os.access(f, os.X_OK):
                continue
            name = os.path.basename(f)
            real = os.path.realpath(f)
            if not is_elf(real):
                continue
            shutil.copy2(real, OUT + "/bin/" + name)
            binaries.append(OUT + "/bin/" + name)
    shutil.copy2(os.path.realpath("/usr/bin/" + PY), OUT + "/bin/" + PY)
    binaries.append(OUT + "/bin/" + PY)
    stdlib = OUT + "/lib/" + PY
    shutil.copytree("/usr/lib/" + PY, stdlib, symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "test", "tests", "idlelib",
                                                  "tkinter", "turtledemo", "ensurepip"))
    # Debian's sysconfig data lives beside the stdlib under a multiarch name: already copied.
    for module in PYTEST_MODULES:
        src = "/usr/lib/python3/dist-packages/" + module
        if os.path.isdir(src):
            shutil.copytree(src, stdlib + "/" + module, ignore=shutil.ignore_patterns("__pycache__"))
        elif os.path.isfile(src):
            shutil.copy2(src, stdlib + "/" + module)
    for b in binaries:
        needed_libraries(b, seen)
        set_interpreter(b)
    for root, _, names in os.walk(stdlib + "/lib-dynload"):
        for n in names:
            if n.endswith(".so"):
                needed_libraries(os.path.join(root, n), seen)
    close_configured_loading()
    # t1's own python3 launcher comes in the environment (the build runs from `python3 -c`).
    with open(OUT + "/bin/python3", "w") as f:
        f.write(os.environ["T1V_PYTHON3"])
    os.chmod(OUT + "/bin/python3", 0o755)
    # Test scripts written for python:* images call `python`.
    os.symlink("python3", OUT + "/bin/python")
    subprocess.run([OUT + "/bin/" + PY, "-ISB", "-c", "import compileall, sys; "
                    f"compileall.compile_dir({stdlib!r}, quiet=1)"], check=False,
                   env={"PATH": "/usr/bin:/bin"})
    for root, dirs, names in os.walk(OUT):
        for n in dirs + names:
            p = os.path.join(root, n)
            if not os.path.islink(p):
                mode = os.stat(p).st_mode
                os.chmod(p, (mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH) & ~0o022)
    open(OUT + "/.complete", "w").write("ok\n")


main()
