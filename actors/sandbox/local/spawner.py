"""Starts processes for the local sandbox driver (spawner.ts), so that its Node process never forks.

A fork copies the parent's page tables and write-protects its memory: from a Node process holding
a model (~600 MB) each fork blocked the event loop ~35 ms and its writes page-faulted after. This
small process forks instead.

Protocol. argv[1] is a Unix socket path it listens on. Requests arrive on stdin, one JSON object a
line: {"id", "file", "args" (argv, args[0] included), "cwd", "env"}. For each request the client
also connects to the socket three times, writing "<id> <k>\\n" first on each (k = 0, 1, 2: stdin,
stdout, stderr); the connection is the child's descriptor k. Replies go to stdout, one JSON object
a line: {"ready": true} once it listens, {"id", "pid"} once the child has exec'd, {"id", "error", "code"} when it could not, and
{"exit": pid, "code", "signal"} when a child ends. It exits when stdin ends.
"""

import errno
import json
import os
import select
import signal
import socket
import sys

MAX_FD = os.sysconf("SC_OPEN_MAX")


def reply(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def start(request, fds):
    """Forks and execs the request with fds as 0, 1, 2; returns the pid or raises OSError."""
    report_r, report_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(report_r)
            for k, fd in enumerate(fds):
                os.dup2(fd, k, inheritable=True)
            os.closerange(3, report_w)
            os.closerange(report_w + 1, MAX_FD)
            # An ignored signal stays ignored across exec: Python ignores SIGPIPE and SIGXFSZ,
            # this helper SIGINT. The child starts with every signal at its default, as node's
            # spawn gives it.
            for number in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGCHLD):
                signal.signal(number, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            os.chdir(request["cwd"])
            os.execvpe(request["file"], request["args"], request["env"])
        except OSError as e:
            os.write(report_w, f"{e.errno} {e.strerror}".encode())
        except BaseException as e:  # noqa: BLE001 - anything, as long as the child ends
            os.write(report_w, f"0 {e}".encode())
        os._exit(127)
    os.close(report_w)
    said = b""
    while True:
        chunk = os.read(report_r, 512)
        if not chunk:
            break
        said += chunk
    os.close(report_r)
    if said:
        os.waitpid(pid, 0)
        number, _, message = said.decode(errors="replace").partition(" ")
        raise OSError(int(number), message)
    return pid


def main():
    path = sys.argv[1]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(128)
    listener.setblocking(False)
    reply({"ready": True})
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    requests = {}
    connections = {}  # id -> {k: socket}
    unnamed = []  # accepted connections that have not said which they are
    pending_input = b""
    stdin = sys.stdin.buffer.raw

    def try_start(rid):
        request = requests.get(rid)
        conns = connections.get(rid, {})
        if request is None or len(conns) < 3:
            return
        del requests[rid]
        del connections[rid]
        try:
            pid = start(request, [conns[k].fileno() for k in range(3)])
            reply({"id": rid, "pid": pid})
        except OSError as e:
            reply({"id": rid, "error": e.strerror or str(e), "code": errno.errorcode.get(e.errno, "")})
        finally:
            for c in conns.values():
                c.close()

    while True:
        readable, _, _ = select.select([stdin, listener, wake_r, *unnamed], [], [])
        if wake_r in readable:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if os.WIFSIGNALED(status):
                    reply({"exit": pid, "code": None, "signal": signal.Signals(os.WTERMSIG(status)).name})
                else:
                    reply({"exit": pid, "code": os.waitstatus_to_exitcode(status), "signal": None})
        if listener in readable:
            while True:
                try:
                    conn, _ = listener.accept()
                except BlockingIOError:
                    break
                conn.setblocking(True)
                unnamed.append(conn)
        for conn in [c for c in unnamed if c in readable]:
            # Only the name line is read: what follows it is the child's input.
            head = conn.recv(64, socket.MSG_PEEK)
            end = head.find(b"\n")
            if end < 0:
                if not head or len(head) >= 64:
                    unnamed.remove(conn)
                    conn.close()
                continue
            conn.recv(end + 1)
            unnamed.remove(conn)
            try:
                rid, k = (int(x) for x in head[:end].split())
            except ValueError:
                conn.close()
                continue
            connections.setdefault(rid, {})[k] = conn
            try_start(rid)
        if stdin in readable:
            chunk = os.read(stdin.fileno(), 1 << 16)
            if not chunk:
                os.unlink(path)
                return
            pending_input += chunk
            *lines, pending_input = pending_input.split(b"\n")
            for line in lines:
                if line.strip():
                    request = json.loads(line)
                    requests[request["id"]] = request
                    try_start(request["id"])


if __name__ == "__main__":
    main()
