"""The keeper: the one long-lived process of a bwrap sandbox, run by the toolchain's Python.

Every process of the sandbox (each shell, each verifier command) is its child, so all of them
inherit what bwrap set up for it: the namespaces, the seccomp filter, the dropped capabilities,
no new privileges. The driver (keeper.ts) speaks to it over its stdin and stdout in frames of
`<type u8> <id u32> <length u32> <payload>` (little-endian):

  driver -> keeper                           keeper -> driver
  1 SPAWN  cwd, stdin, argc, argv, env      101 STARTED "<pid>" | "!<error>"
  2 INPUT  bytes for the child's stdin       102 OUTPUT  the child's stdout and stderr
  3 CLOSE  end the child's stdin             103 EOF     its output ended
  4 SIGNAL "<pgid> <signal> <repeat 0|1>"    104 EXIT    "c <code>" | "s <signal name>"
  5 PING                                     105 PONG, 106 SIGNALED (id of the request)

A SPAWN's fields are separated by NUL bytes (none can hold one); env entries are NAME=VALUE.
No json: importing it (and the re module it needs) was a third of the keeper's start.

Children start in a session of their own (pid = process group). A SIGKILL with `repeat` is
sent again until the group is empty, so a fork bomb's late children go too. It exits when its
stdin ends, and with it (bwrap's init dies with its one child) the whole sandbox.
"""

import fcntl
import os
import select
import signal
import struct
import sys

HEADER = struct.Struct("<BII")
SPAWN, INPUT, CLOSE, SIGNAL, PING = 1, 2, 3, 4, 5
STARTED, OUTPUT, EOF, EXIT, PONG, SIGNALED = 101, 102, 103, 104, 105, 106

libc = None

out = sys.stdout.buffer.raw
inp = sys.stdin.buffer.raw


def send(kind, ident, payload=b""):
    data = HEADER.pack(kind, ident, len(payload)) + payload
    view = memoryview(data)
    while view:
        try:
            n = os.write(1, view)
        except InterruptedError:
            continue
        view = view[n:]


def send_text(kind, ident, text):
    send(kind, ident, text.encode(errors="replace"))


class Child:
    __slots__ = ("ident", "pid", "stdin", "output", "pending", "closing")

    def __init__(self, ident, pid, stdin, output):
        self.ident = ident
        self.pid = pid
        self.stdin = stdin
        self.output = output
        self.pending = bytearray()
        self.closing = False


children = {}  # ident -> Child
by_pid = {}  # pid -> ident
by_output = {}  # fd -> Child
writers = {}  # fd -> Child


def start(ident, payload):
    fields = payload.split(b"\0")
    cwd = fields[0]
    want_stdin = fields[1] == b"1"
    argc = int(fields[2])
    argv = fields[3 : 3 + argc]
    env = {}
    for entry in fields[3 + argc :]:
        name, _, value = entry.partition(b"=")
        if name:
            env[name] = value
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    if want_stdin:
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
    else:
        in_r, in_w = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC), -1
    report_r, report_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.dup2(in_r, 0)
            os.dup2(out_w, 1)
            os.dup2(out_w, 2)
            for number in (signal.SIGPIPE, signal.SIGINT, signal.SIGCHLD, signal.SIGTERM):
                signal.signal(number, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            # bwrap raises the capabilities it keeps as ambient ones too: a child is given them
            # the way Docker gives a root exec, through its uid, not as ambient capabilities.
            libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
            try:
                os.chdir(cwd)
            except OSError:
                os.chdir("/")
            os.execvpe(argv[0], argv, env)
        except OSError as e:
            os.write(report_w, ("%d %s" % (e.errno or 0, e.strerror or e)).encode())
        except BaseException as e:  # noqa: BLE001 - anything, as long as the child ends
            os.write(report_w, ("0 %s" % e).encode())
        os._exit(127)
    os.close(report_w)
    os.close(out_w)
    os.close(in_r)
    said = b""
    while True:
        try:
            chunk = os.read(report_r, 512)
        except InterruptedError:
            continue
        if not chunk:
            break
        said += chunk
    os.close(report_r)
    if said:
        os.close(out_r)
        if in_w >= 0:
            os.close(in_w)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        send_text(STARTED, ident, "!" + said.decode(errors="replace"))
        return
    child = Child(ident, pid, in_w, out_r)
    if in_w >= 0:
        fcntl.fcntl(in_w, fcntl.F_SETFL, os.O_NONBLOCK)
    children[ident] = child
    by_pid[pid] = ident
    by_output[out_r] = child
    send_text(STARTED, ident, str(pid))


def flush(child):
    while child.pending:
        try:
            n = os.write(child.stdin, child.pending)
        except BlockingIOError:
            writers[child.stdin] = child
            return
        except OSError:
            child.pending.clear()
            break
        del child.pending[:n]
    writers.pop(child.stdin, None)
    if child.closing and child.stdin >= 0:
        os.close(child.stdin)
        child.stdin = -1


def kill_group(payload):
    pgid, number, repeat = (int(x) for x in payload.split())
    if pgid <= 1:
        return
    rounds = 50 if repeat else 1
    for i in range(rounds):
        try:
            os.killpg(pgid, number)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        if i + 1 < rounds:
            reap()
            select.select([], [], [], 0.002 if i < 5 else 0.02)


def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        ident = by_pid.pop(pid, None)
        if ident is None:
            continue
        if os.WIFSIGNALED(status):
            send_text(EXIT, ident, "s " + signal.Signals(os.WTERMSIG(status)).name)
        else:
            send_text(EXIT, ident, "c %d" % os.waitstatus_to_exitcode(status))
        child = children.get(ident)
        if child is not None and child.output < 0:
            forget(child)


def forget(child):
    children.pop(child.ident, None)
    if child.stdin >= 0:
        writers.pop(child.stdin, None)
        os.close(child.stdin)
        child.stdin = -1


def handle(kind, ident, payload):
    if kind == SPAWN:
        start(ident, payload)
    elif kind == INPUT:
        child = children.get(ident)
        if child is not None and child.stdin >= 0:
            child.pending += payload
            flush(child)
    elif kind == CLOSE:
        child = children.get(ident)
        if child is not None and child.stdin >= 0:
            child.closing = True
            flush(child)
    elif kind == SIGNAL:
        kill_group(payload)
        send(SIGNALED, ident)
    elif kind == PING:
        send(PONG, ident)


def main():
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    buffered = bytearray()
    send(PONG, 0)
    # After saying it runs (the driver's next steps overlap this), before any child exists.
    global libc
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    # Not dumpable: the agent, root in the sandbox, can neither ptrace this process nor write
    # its memory through /proc (it has no CAP_SYS_PTRACE).
    libc.prctl(4, 0, 0, 0, 0)
    while True:
        try:
            readable, writable, _ = select.select(
                [inp, wake_r, *by_output.keys()], list(writers.keys()), []
            )
        except InterruptedError:
            continue
        if wake_r in readable:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            reap()
        for fd in writable:
            child = writers.get(fd)
            if child is not None:
                flush(child)
        for fd in readable:
            child = by_output.get(fd)
            if child is None:
                continue
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if chunk:
                send(OUTPUT, child.ident, chunk)
                continue
            del by_output[fd]
            os.close(fd)
            child.output = -1
            send(EOF, child.ident)
            if child.pid not in by_pid:
                forget(child)
        if inp in readable:
            try:
                chunk = os.read(0, 1 << 16)
            except InterruptedError:
                continue
            if not chunk:
                return
            buffered += chunk
            while len(buffered) >= HEADER.size:
                kind, ident, length = HEADER.unpack_from(buffered)
                if len(buffered) < HEADER.size + length:
                    break
                payload = bytes(buffered[HEADER.size : HEADER.size + length])
                del buffered[: HEADER.size + length]
                handle(kind, ident, payload)


main()
