/*
 * The keeper of keeper.py, in C: the same protocol and behaviour (see keeper.py), for where a C
 * compiler and a static libc are at hand (rootfs.ts builds it once per image, statically linked,
 * so nothing of the sandbox's own libraries is loaded). It starts in about a millisecond, where
 * the toolchain's Python took most of a sandbox's creation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

enum { SPAWN = 1, INPUT = 2, CLOSE = 3, SIGNAL = 4, PING = 5 };
enum { STARTED = 101, OUTPUT = 102, END = 103, EXIT = 104, PONG = 105, SIGNALED = 106 };

#define MAX_CHILDREN 4096

struct child {
  int used;
  uint32_t id;
  pid_t pid; /* 0 once reaped */
  int in, out;
  char *pending;
  size_t pending_len;
  int closing;
};

static struct child children[MAX_CHILDREN];
static int wake[2];
extern char **environ;

static void write_all(const void *data, size_t n) {
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(1, p, n);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      _exit(0);
    }
    p += w;
    n -= (size_t)w;
  }
}

static void send_frame(uint8_t kind, uint32_t id, const void *payload, uint32_t n) {
  unsigned char header[9];
  header[0] = kind;
  memcpy(header + 1, &id, 4);
  memcpy(header + 5, &n, 4);
  if (n <= 65536) {
    static unsigned char buf[9 + 65536];
    memcpy(buf, header, 9);
    if (n > 0) memcpy(buf + 9, payload, n);
    write_all(buf, 9 + n);
  } else {
    write_all(header, 9);
    write_all(payload, n);
  }
}

static void send_text(uint8_t kind, uint32_t id, const char *text) {
  send_frame(kind, id, text, (uint32_t)strlen(text));
}

static struct child *by_id(uint32_t id) {
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (children[i].used && children[i].id == id) return &children[i];
  return NULL;
}

static void forget(struct child *c) {
  if (c->in >= 0) close(c->in);
  free(c->pending);
  memset(c, 0, sizeof *c);
}

static void on_chld(int sig) {
  (void)sig;
  int saved = errno;
  char b = 0;
  (void)!write(wake[1], &b, 1);
  errno = saved;
}

static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (int i = 0; i < MAX_CHILDREN; i++) {
      struct child *c = &children[i];
      if (!c->used || c->pid != pid) continue;
      char text[64];
      if (WIFSIGNALED(status)) {
        const char *name = sigabbrev_np(WTERMSIG(status));
        snprintf(text, sizeof text, "s SIG%s", name ? name : "UNKNOWN");
      } else {
        snprintf(text, sizeof text, "c %d", WEXITSTATUS(status));
      }
      send_text(EXIT, c->id, text);
      c->pid = 0;
      if (c->out < 0) forget(c);
      break;
    }
  }
}

static void flush(struct child *c) {
  while (c->pending_len > 0) {
    ssize_t w = write(c->in, c->pending, c->pending_len);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      c->pending_len = 0;
      break;
    }
    memmove(c->pending, c->pending + w, c->pending_len - (size_t)w);
    c->pending_len -= (size_t)w;
  }
  if (c->closing && c->in >= 0) {
    close(c->in);
    c->in = -1;
  }
}

static void start(uint32_t id, char *payload, uint32_t n) {
  /* Fields separated by NUL: cwd, stdin flag, argc, argv..., env... (payload is NUL-ended). */
  char *fields[8192];
  int count = 0;
  for (char *p = payload; p < payload + n + 1 && count < 8190;) {
    fields[count++] = p;
    p += strlen(p) + 1;
  }
  if (count < 4) {
    send_text(STARTED, id, "!bad spawn request");
    return;
  }
  const char *cwd = fields[0];
  int want_stdin = strcmp(fields[1], "1") == 0;
  int argc = atoi(fields[2]);
  if (argc < 1 || 3 + argc > count) {
    send_text(STARTED, id, "!bad spawn request");
    return;
  }
  char **argv = &fields[3];
  char *saved = argv[argc];
  argv[argc] = NULL;
  char *envp[4096];
  int envc = 0;
  if (saved != NULL && 3 + argc < count) {
    envp[envc++] = saved;
    for (int i = 4 + argc; i < count && envc < 4095; i++)
      if (fields[i][0] != '\0') envp[envc++] = fields[i];
  }
  envp[envc] = NULL;

  struct child *slot = NULL;
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (!children[i].used) {
      slot = &children[i];
      break;
    }
  if (slot == NULL) {
    send_text(STARTED, id, "!too many processes");
    return;
  }
  int out[2], in[2] = {-1, -1}, report[2];
  if (pipe2(out, O_CLOEXEC) < 0) goto failed;
  if (want_stdin) {
    if (pipe2(in, O_CLOEXEC) < 0) goto failed;
  } else {
    in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  if (pipe2(report, O_CLOEXEC) < 0) goto failed;
  pid_t pid = fork();
  if (pid < 0) {
    close(report[0]);
    close(report[1]);
    goto failed;
  }
  if (pid == 0) {
    setsid();
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (chdir(cwd) < 0) (void)!chdir("/");
    environ = envp;
    execvpe(argv[0], argv, envp);
    char message[256];
    snprintf(message, sizeof message, "%d %s", errno, strerror(errno));
    (void)!write(report[1], message, strlen(message));
    _exit(127);
  }
  close(report[1]);
  close(out[1]);
  close(in[0]);
  char said[512];
  size_t got = 0;
  for (;;) {
    ssize_t r = read(report[0], said + got, sizeof said - 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(report[0]);
  if (got > 0) {
    said[got] = '\0';
    close(out[0]);
    if (in[1] >= 0) close(in[1]);
    waitpid(pid, NULL, 0);
    char text[600];
    snprintf(text, sizeof text, "!%s", said);
    send_text(STARTED, id, text);
    return;
  }
  slot->used = 1;
  slot->id = id;
  slot->pid = pid;
  slot->in = in[1];
  slot->out = out[0];
  if (slot->in >= 0) fcntl(slot->in, F_SETFL, O_NONBLOCK);
  char started[32];
  snprintf(started, sizeof started, "%d", pid);
  send_text(STARTED, id, started);
  return;
failed:;
  char why[256];
  snprintf(why, sizeof why, "!%s", strerror(errno));
  send_text(STARTED, id, why);
}

static void kill_group(const char *payload) {
  long pgid = 0, number = 0, repeat = 0;
  if (sscanf(payload, "%ld %ld %ld", &pgid, &number, &repeat) != 3 || pgid <= 1) return;
  int rounds = repeat ? 50 : 1;
  for (int i = 0; i < rounds; i++) {
    if (kill(-(pid_t)pgid, (int)number) < 0) return;
    if (i + 1 < rounds) {
      reap();
      usleep(i < 5 ? 2000 : 20000);
    }
  }
}

static void handle(uint8_t kind, uint32_t id, char *payload, uint32_t n) {
  struct child *c;
  switch (kind) {
    case SPAWN:
      start(id, payload, n);
      break;
    case INPUT:
      c = by_id(id);
      if (c != NULL && c->in >= 0) {
        c->pending = realloc(c->pending, c->pending_len + n);
        memcpy(c->pending + c->pending_len, payload, n);
        c->pending_len += n;
        flush(c);
      }
      break;
    case CLOSE:
      c = by_id(id);
      if (c != NULL && c->in >= 0) {
        c->closing = 1;
        flush(c);
      }
      break;
    case SIGNAL:
      kill_group(payload);
      send_frame(SIGNALED, id, NULL, 0);
      break;
    case PING:
      send_frame(PONG, id, NULL, 0);
      break;
  }
}

int main(void) {
  /* Not dumpable: the agent cannot ptrace it or write its memory through /proc. */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (pipe2(wake, O_NONBLOCK | O_CLOEXEC) < 0) return 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_chld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  send_frame(PONG, 0, NULL, 0);

  size_t cap = 1 << 16, len = 0;
  char *buffer = malloc(cap);
  static struct pollfd fds[2 + 2 * MAX_CHILDREN];
  static struct child *owner[2 + 2 * MAX_CHILDREN];
  static char chunk[65536];
  for (;;) {
    int n = 0;
    fds[n] = (struct pollfd){.fd = 0, .events = POLLIN};
    owner[n++] = NULL;
    fds[n] = (struct pollfd){.fd = wake[0], .events = POLLIN};
    owner[n++] = NULL;
    for (int i = 0; i < MAX_CHILDREN; i++) {
      struct child *c = &children[i];
      if (!c->used) continue;
      if (c->out >= 0) {
        fds[n] = (struct pollfd){.fd = c->out, .events = POLLIN};
        owner[n++] = c;
      }
      if (c->in >= 0 && c->pending_len > 0) {
        fds[n] = (struct pollfd){.fd = c->in, .events = POLLOUT};
        owner[n++] = c;
      }
    }
    if (poll(fds, (nfds_t)n, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (fds[1].revents) {
      char drain[256];
      while (read(wake[0], drain, sizeof drain) > 0) {
      }
      reap();
    }
    for (int k = 2; k < n; k++) {
      struct child *c = owner[k];
      if (!fds[k].revents || c == NULL || !c->used) continue;
      if (fds[k].events & POLLOUT) {
        if (fds[k].fd == c->in) flush(c);
        continue;
      }
      if (fds[k].fd != c->out) continue;
      ssize_t r = read(c->out, chunk, sizeof chunk);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r > 0) {
        send_frame(OUTPUT, c->id, chunk, (uint32_t)r);
        continue;
      }
      close(c->out);
      c->out = -1;
      send_frame(END, c->id, NULL, 0);
      if (c->pid == 0) forget(c);
    }
    if (fds[0].revents) {
      if (len == cap) buffer = realloc(buffer, cap *= 2);
      ssize_t r = read(0, buffer + len, cap - len);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return 0;
      len += (size_t)r;
      size_t at = 0;
      while (len - at >= 9) {
        uint8_t kind = (uint8_t)buffer[at];
        uint32_t id, size;
        memcpy(&id, buffer + at + 1, 4);
        memcpy(&size, buffer + at + 5, 4);
        if (len - at < 9 + (size_t)size) {
          if (9 + (size_t)size > cap) {
            memmove(buffer, buffer + at, len - at);
            len -= at;
            at = 0;
            while (cap < 9 + (size_t)size + 1) cap *= 2;
            buffer = realloc(buffer, cap);
          }
          break;
        }
        char *payload = malloc((size_t)size + 1);
        memcpy(payload, buffer + at + 9, size);
        payload[size] = '\0';
        at += 9 + (size_t)size;
        handle(kind, id, payload, size);
        free(payload);
      }
      memmove(buffer, buffer + at, len - at);
      len -= at;
    }
  }
}
