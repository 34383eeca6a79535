/*
 * Starts a bwrap sandbox from the host, as root, in one process: what the driver's shell chain
 * (nsenter, unshare -m, sh, mount, setpriv) does, without its program starts. In order: the
 * sandbox's network namespace when it has one (NETNS, else ""); a private mount namespace; this process into the sandbox's cgroups; the overlay (the image's files
 * under the sandbox's upper layer) at MERGED; the seccomp filter open on descriptor 9; the
 * sandbox's host uid and gid, no supplementary groups; then bwrap with the rest of argv.
 *
 *   launcher UID NETNS N PROCS... OVERLAY_OPTIONS MERGED SECCOMP BWRAP ARGS...
 *
 * Exits 125 with a message when a step fails (the driver reports it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

static void fail(const char *what) {
  fprintf(stderr, "t1 bwrap launcher: %s: %s\n", what, strerror(errno));
  exit(125);
}

int main(int argc, char **argv) {
  if (argc < 9) {
    fprintf(stderr, "t1 bwrap launcher: too few arguments\n");
    return 125;
  }
  int at = 1;
  uid_t uid = (uid_t)atol(argv[at++]);
  const char *netns = argv[at++];
  if (netns[0] != '\0') {
    int fd = open(netns, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(netns);
    if (setns(fd, CLONE_NEWNET) < 0) fail("join the network namespace");
    close(fd);
  }
  int procs = atoi(argv[at++]);
  if (procs < 0 || at + procs + 4 > argc) {
    fprintf(stderr, "t1 bwrap launcher: bad arguments\n");
    return 125;
  }
  if (unshare(CLONE_NEWNS) < 0) fail("unshare");
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) fail("make mounts private");
  char pid[32];
  int pid_len = snprintf(pid, sizeof pid, "%d\n", getpid());
  for (int i = 0; i < procs; i++) {
    int fd = open(argv[at + i], O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, pid, (size_t)pid_len) != pid_len) fail(argv[at + i]);
    close(fd);
  }
  at += procs;
  const char *options = argv[at++];
  const char *merged = argv[at++];
  const char *seccomp = argv[at++];
  if (mount("t1-sandbox", merged, "overlay", 0, options) < 0) fail("mount the overlay");
  int fd = open(seccomp, O_RDONLY);
  if (fd < 0) fail(seccomp);
  if (fd != 9) {
    if (dup2(fd, 9) < 0) fail("dup2");
    close(fd);
  }
  if (setgroups(0, NULL) < 0) fail("setgroups");
  if (setresgid(uid, uid, uid) < 0) fail("setresgid");
  if (setresuid(uid, uid, uid) < 0) fail("setresuid");
  execv(argv[at], &argv[at]);
  fail(argv[at]);
  return 125;
}
