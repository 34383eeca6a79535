"""Puts the image's files back under the pristine directories of a stopped bwrap sandbox.

argv: UPPER LOWER PATTERNS_JSON. Run on the host, as root, while no process of the sandbox runs
and its overlay is not mounted anywhere: what the agent changed is exactly its upper layer, so
removing the upper layer's entries under a pristine directory brings the image's (lower) files
back. An ancestor of a pristine directory the agent replaced (a link or file where a directory
was, a whiteout) is removed too; one it emptied and made again (an opaque directory hides the
image's) gets the image's pristine directories copied in. Prints {"restored", "removed"}: the
paths the agent changed or deleted that the image has, and those it added.
"""

import json
import os
import re
import shutil
import stat
import sys

UPPER, LOWER, PATTERNS = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
OPAQUE = "trusted.overlay.opaque"


def component(pattern):
    return re.compile("^" + "[^/]*".join(re.escape(p) for p in pattern.split("*")) + "$")


COMPILED = [[component(c) for c in p.split("/") if c] for p in PATTERNS]


def place(parts):
    """'under' a pattern, 'ancestor' of one, or None."""
    found = None
    for pattern in COMPILED:
        n = min(len(parts), len(pattern))
        if all(pattern[i].match(parts[i]) for i in range(n)):
            if len(parts) >= len(pattern):
                return "under"
            found = "ancestor"
    return found


def is_whiteout(st):
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def opaque(path):
    try:
        return os.getxattr(path, OPAQUE, follow_symlinks=False) == b"y"
    except OSError:
        return False


def lower_of(parts):
    return os.path.join(LOWER, *parts)


def exists_lower(parts):
    return os.path.lexists(lower_of(parts))


restored, removed = [], []


def note(parts, st):
    shown = "/" + "/".join(parts)
    in_image = exists_lower(parts)
    if is_whiteout(st):
        if in_image:
            restored.append(shown)
        return
    if not in_image:
        removed.append(shown)
    elif not (stat.S_ISDIR(st.st_mode) and os.path.isdir(lower_of(parts)) and not opaque(os.path.join(UPPER, *parts))):
        restored.append(shown)


def collect(path, parts):
    """Every entry at and below path (in the upper layer), for the report."""
    st = os.lstat(path)
    note(parts, st)
    if stat.S_ISDIR(st.st_mode):
        for name in sorted(os.listdir(path)):
            collect(os.path.join(path, name), parts + [name])


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def copy_pristine_below(parts):
    """Copies the image's pristine directories below `parts` into the upper layer."""
    lower = lower_of(parts)
    if not os.path.isdir(lower) or os.path.islink(lower):
        return
    for name in sorted(os.listdir(lower)):
        child = parts + [name]
        where = place(child)
        if where is None:
            continue
        source = os.path.join(lower, name)
        target = os.path.join(UPPER, *child)
        if where == "under":
            if os.path.lexists(target):
                continue
            if os.path.isdir(source) and not os.path.islink(source):
                shutil.copytree(source, target, symlinks=True)
            else:
                shutil.copy2(source, target, follow_symlinks=False)
            restored.append("/" + "/".join(child))
        elif os.path.isdir(source) and not os.path.islink(source):
            if not os.path.lexists(target):
                os.mkdir(target)
                shutil.copystat(source, target)
                st = os.stat(source)
                os.chown(target, st.st_uid, st.st_gid)
            copy_pristine_below(child)


def walk(parts):
    path = os.path.join(UPPER, *parts)
    for name in sorted(os.listdir(path)):
        child = parts + [name]
        where = place(child)
        if where is None:
            continue
        full = os.path.join(path, name)
        st = os.lstat(full)
        if where == "under":
            collect(full, child)
            remove(full)
        elif not stat.S_ISDIR(st.st_mode):
            # A link, a file or a whiteout where the image has a directory above the pristine
            # ones: the image's directory comes back whole.
            note(child, st)
            remove(full)
        else:
            walk(child)
            if opaque(full):
                copy_pristine_below(child)


walk([])
print(json.dumps({"restored": sorted(set(restored)), "removed": sorted(set(removed))}))
