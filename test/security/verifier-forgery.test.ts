/**
 * Reward forgery against the verifier itself: an agent that is root in its docker sandbox does
 * one honest thing (2 of 5 answers) and then tries to make the verifier report 5 of 5 — by
 * replacing the interpreter, patching pytest where it is installed, planting Python start-up
 * hooks (sitecustomize, usercustomize, a .pth file, an entry-point plugin), preloading a library
 * into every process through /etc/ld.so.preload, leaving processes behind that rewrite the tests
 * or the reports while the tests run (some that look dead in /proc, a chain that never stays
 * one process, PID 1 itself taken over through /proc/1/mem: attacks/outliving.ts), making the
 * verifier's own commands fail to start (attacks/exec-failure.ts), rewriting the reports from
 * code the tests import (attacks/in-process.ts), and having the verifier's own programs load the
 * agent's library through the sandbox's /etc/nsswitch.conf or openssl.cnf
 * (attacks/verifier-loads.ts).
 *
 * Each attack runs twice on the same kind of sandbox: verified as t1 verifies (sealed from
 * outside, the read-only toolchain, canaries, guard.ts), where the reward must stay the honest
 * part (or the outcome be forged or unverifiable); and verified with the sandbox's own programs
 * (no seal: the fallback, for a driver without separate processes), where the attack must work
 * (5 of 5): the positive control that shows the attack is real. Every forger passes only the
 * task's tests and leaves the verifier's canaries as pytest reports them, so the canaries alone
 * do not stop it there (but for one that shows the canaries at work). The file prints a table of
 * both results.
 */
import { execFileSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BwrapDriverLive } from "../../actors/sandbox/bwrap/index.ts"
import { connectDocker, DockerDriverLive } from "../../actors/sandbox/docker/index.ts"
import { SandboxDriver, sandboxSpec } from "../../actors/sandbox/driver.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "../../actors/sandbox/image/testing.ts"
import type { VerifierOutcome } from "../../actors/verifier/outcome.ts"
import { driverSandbox, VerifierSandbox } from "../../actors/verifier/port.ts"
import { verifyEpisode } from "../../actors/verifier/verify.ts"
import { singleFileTar } from "../../services/tar/index.ts"
import type { Attack } from "./attacks/attack.ts"
import { EXEC_FAILURE } from "./attacks/exec-failure.ts"
import {
  detachedPython,
  FLIP_SCRIPT_PATH,
  installFlipScript,
  q,
  replacePython,
  write,
} from "./attacks/forge.ts"
import { IN_PROCESS, RELEASE_HONEST, RELEASE_TESTS } from "./attacks/in-process.ts"
import { OUTLIVING } from "./attacks/outliving.ts"
import { FORGE_LIBRARY_C, verifierLoads } from "./attacks/verifier-loads.ts"

const TESTS = `from pathlib import Path

def check(i):
    assert Path(f"out{i}.txt").read_text().strip() == str(i), f"out{i}.txt is wrong"

def test_1(): check(1)
def test_2(): check(2)
def test_3(): check(3)
def test_4(): check(4)
def test_5(): check(5)
`

/** A pytest plugin that passes the task's tests (the canaries' file is another). */
const FORCE_PASS = `import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if item.nodeid.startswith("test_work.py::") and item.name in ("test_1", "test_2", "test_3", "test_4", "test_5"):
        report.outcome = "passed"
        report.longrepr = None
`

/** Sets PYTEST_PLUGINS to the plugin above, from whatever start-up hook runs it. */
const HOOK = `import os; os.environ["PYTEST_PLUGINS"] = "t1forcepass"`

const SITE = "/usr/local/lib/python3.11/dist-packages"
const plugin = `mkdir -p ${SITE} && ${write(`${SITE}/t1forcepass.py`, FORCE_PASS)}`

/**
 * A C library whose constructor, in a process with `--junitxml=PATH`, lets a child run pytest,
 * waits for it, and then has the report's task tests flipped to passed (the flip script).
 */
const PRELOAD_C = `#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
__attribute__((constructor)) static void forge(void) {
  static char buf[65536];
  int fd = open("/proc/self/cmdline", O_RDONLY);
  if (fd < 0) return;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return;
  buf[n] = 0;
  for (char *p = buf; p < buf + n; p += strlen(p) + 1) {
    if (strncmp(p, "--junitxml=", 11) == 0) {
      pid_t pid = fork();
      if (pid <= 0) return;
      int status = 0;
      waitpid(pid, &status, 0);
      execl("/usr/bin/python3.11", "python3.11", ${JSON.stringify(FLIP_SCRIPT_PATH)}, p + 11, (char *)0);
      _exit(1);
    }
  }
}
`

/**
 * Swaps the uploaded test_work.py for one whose tests all pass, and puts the original back as
 * soon as pytest has read it (its assertion-rewritten bytecode appears) or reported, before the
 * verifier reads the test files back; once (the file put back must stay as uploaded).
 */
const SWAP_TESTS = `PATH_ = "/tests/test_work.py"
def passing(text):
    # The task's checks made to pass; whatever else is in the file (canaries) left as it is.
    return text.replace("    assert Path(", "    assert True or Path(")
def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None
def put(text):
    with open("/tests/.t1swap", "w") as f:
        f.write(text)
    os.rename("/tests/.t1swap", PATH_)
def collected():
    try:
        if any(n.startswith("test_work.") for n in os.listdir("/tests/__pycache__")):
            return True
    except OSError:
        pass
    try:
        dirs = [d for d in os.listdir("/tmp") if d.startswith("t1-verify-")]
    except OSError:
        return False
    return any(os.path.exists("/tmp/%s/report.xml" % d) for d in dirs)
original = None
while True:
    if original is None:
        text = read(PATH_)
        time.sleep(0.0002)
        # Once the verifier has appended its canaries (a second upload): more tests than the task's 5.
        if text is not None and text.count("def test_") > 5 and "assert True or" not in text and read(PATH_) == text:
            original = text
            put(passing(text))
    elif collected():
        put(original)
        break
    time.sleep(0.0002)
`

let preloadLibrary: Uint8Array | undefined
let forgeLibrary: Uint8Array | undefined
const hostDir = mkdtempSync(join(tmpdir(), "t1-forgery-"))

const ATTACKS: ReadonlyArray<Attack> = [
  {
    name: "a wrapper in place of /usr/bin/python3 (and one earlier on PATH)",
    script: replacePython,
  },
  {
    name: "a patched _pytest in site-packages",
    script: [
      "F=/usr/lib/python3/dist-packages/_pytest/reports.py",
      `cat >> $F <<'EOF'\n_t1_original = TestReport.from_item_and_call.__func__\ndef _t1_forged(cls, item, call):\n    r = _t1_original(cls, item, call)\n    if item.nodeid.startswith("test_work.py::") and item.name in ("test_1", "test_2", "test_3", "test_4", "test_5"):\n        r.outcome = "passed"\n        r.longrepr = None\n    return r\nTestReport.from_item_and_call = classmethod(_t1_forged)\nEOF`,
      "rm -rf /usr/lib/python3/dist-packages/_pytest/__pycache__",
    ].join("\n"),
  },
  {
    name: "a sitecustomize.py",
    // Debian's own sitecustomize (in /etc/python3.11) is the one imported: the agent edits it.
    script: `${plugin} && F=$(python3 -c 'import os, sitecustomize; print(os.path.realpath(sitecustomize.__file__))') && printf '%s\\n' ${q(HOOK)} >> "$F"`,
  },
  {
    name: "a usercustomize.py",
    script: `${plugin} && mkdir -p /root/.local/lib/python3.11/site-packages && ${write("/root/.local/lib/python3.11/site-packages/usercustomize.py", HOOK)}`,
  },
  {
    name: "a .pth file",
    script: `${plugin} && ${write(`${SITE}/zz-t1.pth`, HOOK)}`,
  },
  {
    name: "a pytest plugin installed through an entry point",
    script: [
      plugin,
      `mkdir -p ${SITE}/t1forcepass-1.0.dist-info`,
      write(
        `${SITE}/t1forcepass-1.0.dist-info/METADATA`,
        "Metadata-Version: 2.1\nName: t1forcepass\nVersion: 1.0",
      ),
      write(
        `${SITE}/t1forcepass-1.0.dist-info/entry_points.txt`,
        "[pytest11]\nforce = t1forcepass",
      ),
    ].join(" && "),
  },
  {
    name: "a library in /etc/ld.so.preload",
    files: () => ({ "/usr/local/lib/libt1forge.so": preloadLibrary ?? new Uint8Array() }),
    script: `${installFlipScript}\necho /usr/local/lib/libt1forge.so > /etc/ld.so.preload`,
  },
  {
    name: "a background process that replaces the tests once they are uploaded (and puts them back)",
    script: detachedPython(SWAP_TESTS),
  },
  {
    name: "a background process that rewrites the reports while the tests run",
    script: detachedPython("while True:\n    forge_reports()\n    time.sleep(0.001)"),
  },
  ...OUTLIVING,
  ...EXEC_FAILURE,
  ...IN_PROCESS,
  ...verifierLoads(() => forgeLibrary ?? new Uint8Array()),
]

const docker = connectDocker()
/**
 * Every attack runs against each driver that seals: docker, and bwrap (namespaces over the same
 * image's files, the same toolchain at /.t1v).
 */
const DRIVERS = ["docker", "bwrap"] as const
type DriverName = (typeof DRIVERS)[number]
const runtimes = {
  docker: ManagedRuntime.make(
    DockerDriverLive({ ownerId: `forgery-${randomUUID().slice(0, 6)}`, docker }),
  ),
  bwrap: ManagedRuntime.make(BwrapDriverLive({ owner: `forgery-${randomUUID().slice(0, 6)}` })),
}

/** A pytest task whose tests are `files` (name → text), written under hostDir/`name`. */
const pytestTask = (name: string, files: Readonly<Record<string, string>>) => {
  const testsDir = join(hostDir, name)
  mkdirSync(testsDir)
  for (const [file, text] of Object.entries(files)) writeFileSync(join(testsDir, file), text)
  return {
    id: `forgery-${name}`,
    environment: { allowInternet: false, workdir: "/app" },
    verifier: {
      testsDir,
      testDir: "/tests",
      kind: "pytest" as const,
      script: undefined,
      scriptPath: undefined,
      parser: undefined,
      timeoutSec: 60,
      expectedTests: 5,
    },
  }
}

const HONEST = "for i in 1 2; do echo $i > /app/out$i.txt; done"

/** The tasks attacked: the honest work gets tests 1 and 2 right in each. */
const TASKS = {
  answers: {
    task: pytestTask("answers", { "test_work.py": TESTS }),
    honest: HONEST,
    file: "test_work.py",
  },
  release: {
    task: pytestTask("release", { "test_release.py": RELEASE_TESTS }),
    honest: RELEASE_HONEST,
    file: "test_release.py",
  },
}
const TASK = TASKS.answers.task

const quick = { timeoutMs: 30_000, maxOutputBytes: 64 * 1024 }

/**
 * A fresh sandbox: honest work, the attack, then verification: as t1 verifies (`guarded`), or
 * with the sandbox's own programs (the sandbox seen as one that can neither seal nor run
 * processes of its own: the positive control).
 */
const attackThenVerify = (
  driverName: DriverName,
  attack: Attack,
  guarded: boolean,
): Promise<VerifierOutcome> =>
  runtimes[driverName].runPromise(
    Effect.gen(function* () {
      const driver = yield* SandboxDriver
      const { task, honest } = TASKS[attack.task ?? "answers"]
      const info = yield* driver.create(sandboxSpec({ cpus: 1, memoryMb: 512, ttlMs: 180_000 }))
      return yield* Effect.gen(function* () {
        for (const [path, bytes] of Object.entries(attack.files?.() ?? {})) {
          const slash = path.lastIndexOf("/")
          const tar = yield* Effect.promise(() => singleFileTar(path.slice(slash + 1), bytes))
          yield* driver.put(info.id, path.slice(0, slash), tar)
        }
        for (const step of [honest, attack.script]) {
          const r = yield* driver.exec(info.id, step, quick)
          if (r.exitCode !== 0)
            return yield* Effect.die(
              new Error(`the agent's step failed: ${new TextDecoder().decode(r.output)}`),
            )
        }
        const sandbox = driverSandbox(driver, info.id)
        return yield* verifyEpisode(task).pipe(
          Effect.provideService(
            VerifierSandbox,
            guarded
              ? sandbox
              : { exec: sandbox.exec, put: sandbox.put, maxPutBytes: sandbox.maxPutBytes },
          ),
        )
      }).pipe(Effect.ensuring(Effect.ignore(driver.destroy(info.id))))
    }),
  )

/** An outcome, or why the verification gave none. */
type Result = { readonly outcome: VerifierOutcome } | { readonly error: string }

const settle = (p: Promise<VerifierOutcome>): Promise<Result> =>
  p.then(
    (outcome) => ({ outcome }),
    (e: unknown) => ({ error: e instanceof Error ? e.message : String(e) }),
  )

const UNGUARDED = /could have replaced/

const show = (r: Result): string => {
  if ("error" in r) return `no outcome: ${r.error.replaceAll("\n", " ").slice(0, 100)}`
  const o = r.outcome
  // A string: the outcome kinds grow as the verifier does (forged, unverifiable).
  const kind: string = o.kind
  const count = `${o.passed}/${o.total}`
  if (kind === "scored")
    return `${count}${UNGUARDED.test(o.notes.join("\n")) ? " (unguarded)" : ""}`
  if (kind === "unverifiable") return `unverifiable: ${o.pathReason.slice(0, 90)}`
  return `${kind} (reward ${o.reward}): ${o.forgery.join("; ").slice(0, 90)}`
}

/** t1 held: the honest part at most, or no reward at all (forged, unverifiable). */
const held = (r: Result, honestAtMost: number): boolean => {
  if ("error" in r) return false
  const o = r.outcome
  const kind: string = o.kind
  if (kind === "forged" || kind === "unverifiable") return o.reward === 0 && !o.resolved
  return (
    kind === "scored" &&
    o.passed <= honestAtMost &&
    o.reward <= honestAtMost &&
    !o.resolved &&
    !UNGUARDED.test(o.notes.join("\n"))
  )
}

interface Row {
  readonly name: string
  readonly control: string
  readonly t1: string
  readonly held: boolean
}
const rows = new Map<string, Row>()

/** `source` built as a shared library on the host (the sandboxes have no compiler). */
const compile = (name: string, source: string): Uint8Array => {
  writeFileSync(join(hostDir, `${name}.c`), source)
  const library = join(hostDir, `${name}.so`)
  execFileSync("gcc", ["-shared", "-fPIC", "-O2", "-o", library, join(hostDir, `${name}.c`)])
  return new Uint8Array(readFileSync(library))
}

beforeAll(async () => {
  await ensureTestBaseImage()
  preloadLibrary = compile("forge", PRELOAD_C)
  forgeLibrary = compile("library", FORGE_LIBRARY_C)
  // The first create builds the verifier toolchain when the engine lacks it (~20 s), and
  // exports the image for bwrap.
  for (const name of DRIVERS)
    await runtimes[name].runPromise(
      Effect.gen(function* () {
        const driver = yield* SandboxDriver
        const info = yield* driver.create(sandboxSpec({ ttlMs: 60_000 }))
        yield* driver.destroy(info.id)
      }),
    )
}, BASE_IMAGE_TIMEOUT_MS)

afterAll(async () => {
  for (const name of DRIVERS) await runtimes[name].dispose()
  rmSync(hostDir, { recursive: true, force: true })
  if (rows.size === 0) return
  const lines = [...rows.entries()]
    .sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }))
    .map(([, r]) => `| ${r.name} | ${r.control} | ${r.t1} | ${r.held ? "held" : "NOT HELD"} |`)
  console.log(
    [
      "| driver: attack (root in the sandbox) | sandbox's own programs (the positive control) | t1's verifier | t1 |",
      "|---|---|---|---|",
      ...lines,
    ].join("\n"),
  )
})

const score = (o: VerifierOutcome) => [o.passed, o.total, o.reward, o.resolved]

for (const driverName of DRIVERS)
  describe(`the verifier cannot be forged from inside the sandbox (${driverName})`, () => {
    it("an honest agent is scored as before, through the toolchain", async () => {
      const tasks = ["answers", "release"] as const
      const outcomes = await Promise.all(
        tasks.map((task) =>
          attackThenVerify(driverName, { name: "honest", script: "true", task }, true),
        ),
      )
      for (const honest of outcomes) {
        expect(score(honest)).toEqual([2, 5, 2, false])
        expect(honest.notes.join("\n")).not.toMatch(UNGUARDED)
      }
    }, 60_000)

    // Only docker can make a sandbox without the toolchain: bwrap mounts it in every sandbox.
    it.runIf(driverName === "docker")(
      "a sandbox created without the toolchain is verified with its own programs, and says so",
      async () => {
        const bare = ManagedRuntime.make(
          DockerDriverLive({
            ownerId: `forgery-bare-${randomUUID().slice(0, 6)}`,
            docker,
            toolchainImage: false,
          }),
        )
        try {
          const outcome = await bare.runPromise(
            Effect.gen(function* () {
              const driver = yield* SandboxDriver
              const info = yield* driver.create(
                sandboxSpec({ cpus: 1, memoryMb: 512, ttlMs: 120_000 }),
              )
              yield* driver.exec(info.id, HONEST, quick)
              return yield* verifyEpisode(TASK).pipe(
                Effect.provideService(VerifierSandbox, driverSandbox(driver, info.id)),
                Effect.ensuring(Effect.ignore(driver.destroy(info.id))),
              )
            }),
          )
          expect(score(outcome)).toEqual([2, 5, 2, false])
          expect(outcome.notes.join("\n")).toMatch(/could have replaced.*no verifier toolchain/)
        } finally {
          await bare.dispose()
        }
      },
      60_000,
    )

    // Concurrently (vitest's maxConcurrency at a time): each attack's two sandboxes are its own.
    describe.concurrent("attacks", () => {
      for (const [index, attack] of ATTACKS.entries()) {
        it(`${attack.name}: works against the sandbox's own programs, not against t1's verifier`, async ({
          expect,
        }) => {
          const [forged, guarded] = await Promise.all([
            settle(attackThenVerify(driverName, attack, false)),
            settle(attackThenVerify(driverName, attack, true)),
          ])
          const honestAtMost = attack.honestAtMost ?? 2
          const file = TASKS[attack.task ?? "answers"].file
          const exact =
            "outcome" in guarded &&
            guarded.outcome.kind === "scored" &&
            guarded.outcome.tests
              .map((t) => t.name)
              .sort()
              .join() === [1, 2, 3, 4, 5].map((i) => `${file}::test_${i}`).join()
          rows.set(`${driverName} ${index}`, {
            name: `${driverName}: ${attack.name}`,
            control: show(forged),
            t1: show(guarded),
            held: held(guarded, honestAtMost) && (attack.honestAtMost !== undefined || exact),
          })
          // The positive control: the attack is real.
          if ("error" in forged) throw new Error(`the positive control failed: ${forged.error}`)
          expect(forged.outcome.notes.join("\n")).toMatch(UNGUARDED)
          if (attack.caughtByCanaries === true) {
            const kind: string = forged.outcome.kind
            expect([kind, forged.outcome.reward]).toEqual(["forged", 0])
          } else expect(score(forged.outcome)).toEqual([5, 5, 5, true])
          // t1's verification.
          if ("error" in guarded) throw new Error(`t1's verification failed: ${guarded.error}`)
          if (attack.honestAtMost === undefined) {
            // The honest 2 of 5, every test by name.
            expect(guarded.outcome.notes.join("\n")).not.toMatch(UNGUARDED)
            expect(score(guarded.outcome)).toEqual([2, 5, 2, false])
            expect(exact).toBe(true)
          } else expect(held(guarded, honestAtMost), `t1 gave ${show(guarded)}`).toBe(true)
        }, 120_000)
      }
    })
  })
