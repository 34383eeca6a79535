/**
 * Reward forgery against the verifier itself: an agent that is root in its docker sandbox does
 * one honest thing (2 of 5 answers) and then tries to make the verifier report 5 of 5 — by
 * replacing the interpreter, patching pytest where it is installed, planting Python start-up
 * hooks (sitecustomize, usercustomize, a .pth file, an entry-point plugin), preloading a library
 * into every process through /etc/ld.so.preload, and leaving processes behind that rewrite the
 * tests once they are uploaded or the reports while the tests run.
 *
 * Each attack runs twice on the same kind of sandbox: verified as t1 verifies (the read-only
 * toolchain, guard.ts), where the reward must stay 2; and verified with the sandbox's own
 * programs (the fallback, for a driver without separate processes), where the attack must work
 * (5 of 5): the positive control that shows the attack is real and the toolchain is what stops it.
 * RELIABILITY.md has the table.
 */
import { execFileSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectDocker, DockerDriverLive } from "../../actors/sandbox/docker/index.ts"
import { SandboxDriver, sandboxSpec } from "../../actors/sandbox/driver.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "../../actors/sandbox/image/testing.ts"
import type { VerifierOutcome } from "../../actors/verifier/outcome.ts"
import { driverSandbox, VerifierSandbox } from "../../actors/verifier/port.ts"
import { verifyEpisode } from "../../actors/verifier/verify.ts"
import { singleFileTar } from "../../services/tar/index.ts"

const TESTS = `from pathlib import Path

def check(i):
    assert Path(f"out{i}.txt").read_text().strip() == str(i), f"out{i}.txt is wrong"

def test_1(): check(1)
def test_2(): check(2)
def test_3(): check(3)
def test_4(): check(4)
def test_5(): check(5)
`
const PASSING_TESTS = [1, 2, 3, 4, 5].map((i) => `def test_${i}(): pass\n`).join("")
const JUNIT = `<testsuites><testsuite name="pytest" tests="5">${[1, 2, 3, 4, 5]
  .map((i) => `<testcase classname="test_work" name="test_${i}" file="test_work.py"/>`)
  .join("")}</testsuite></testsuites>`

/** A pytest plugin that turns every result into a pass. */
const FORCE_PASS = `import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
`

/** Sets PYTEST_PLUGINS to the plugin above, from whatever start-up hook runs it. */
const HOOK = `import os; os.environ["PYTEST_PLUGINS"] = "t1forcepass"`

/** `text` as one single-quoted shell word. */
const q = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`
const write = (path: string, body: string) => `printf '%s\\n' ${q(body)} > ${path}`

const SITE = "/usr/local/lib/python3.11/dist-packages"
const plugin = `mkdir -p ${SITE} && ${write(`${SITE}/t1forcepass.py`, FORCE_PASS)}`

/** A C library whose constructor, in a process with `--junitxml=PATH`, writes a passing report. */
const PRELOAD_C = `#include <fcntl.h>
#include <stdio.h>
#include <string.h>
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
      FILE *f = fopen(p + 11, "w");
      if (!f) return;
      fputs(${JSON.stringify(JUNIT)}, f);
      fclose(f);
      puts("5 passed in 0.01s");
      fflush(stdout);
      _exit(0);
    }
  }
}
`

interface Attack {
  readonly name: string
  /** Shell commands the agent runs after its honest work. */
  readonly script: string
  /** Files put into the sandbox before the script (path → bytes). */
  readonly files?: () => Readonly<Record<string, Uint8Array>>
}

let preloadLibrary: Uint8Array | undefined
const hostDir = mkdtempSync(join(tmpdir(), "t1-forgery-"))

const ATTACKS: ReadonlyArray<Attack> = [
  {
    name: "a wrapper in place of /usr/bin/python3 (and one earlier on PATH)",
    script: [
      `cat > /usr/local/bin/python3 <<'EOF'\n#!/bin/bash\nfor a in "$@"; do case $a in --junitxml=*) printf '%s' ${q(JUNIT)} > "\${a#--junitxml=}";; esac; done\necho "5 passed in 0.01s"\nEOF`,
      "chmod +x /usr/local/bin/python3",
      "rm -f /usr/bin/python3 && cp /usr/local/bin/python3 /usr/bin/python3",
    ].join("\n"),
  },
  {
    name: "a patched _pytest in site-packages",
    script: [
      "F=/usr/lib/python3/dist-packages/_pytest/reports.py",
      `cat >> $F <<'EOF'\n_t1_original = TestReport.from_item_and_call.__func__\ndef _t1_forged(cls, item, call):\n    r = _t1_original(cls, item, call)\n    r.outcome = "passed"\n    r.longrepr = None\n    return r\nTestReport.from_item_and_call = classmethod(_t1_forged)\nEOF`,
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
    script: "echo /usr/local/lib/libt1forge.so > /etc/ld.so.preload",
  },
  {
    name: "a background process that replaces the tests once they are uploaded",
    // Builtins but for mv (no process per round while it waits), so that it wins every race it
    // is in; whole files moved into place, or pytest could read one half-written (a collection
    // error, seen on a loaded CI machine, rather than the forged pass this control shows).
    script: `nohup setsid bash -c ${q(`while :; do for f in /tests/test_*.py; do [ -f "$f" ] || continue; IFS= read -r first < "$f"; [ "$first" = 'def test_1(): pass' ] || { printf '%s' ${q(PASSING_TESTS)} > /tests/.forged && mv -f /tests/.forged "$f"; }; done; done`)} >/dev/null 2>&1 &`,
  },
  {
    name: "a background process that rewrites the reports while the tests run",
    // Whole files moved into place (a rename is atomic): a reader never sees one half-written.
    script: `nohup setsid bash -c ${q(`while :; do for d in /tmp/t1-verify-*; do [ -d "$d" ] && printf '%s' ${q(JUNIT)} > "$d/.r" && mv -f "$d/.r" "$d/report.xml"; done; done`)} >/dev/null 2>&1 &`,
  },
]

const docker = connectDocker()
const runtime = ManagedRuntime.make(
  DockerDriverLive({ ownerId: `forgery-${randomUUID().slice(0, 6)}`, docker }),
)

const testsDir = join(hostDir, "tests")
mkdirSync(testsDir)
writeFileSync(join(testsDir, "test_work.py"), TESTS)

const TASK = {
  id: "forgery",
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

const HONEST = "for i in 1 2; do echo $i > /app/out$i.txt; done"
const quick = { timeoutMs: 30_000, maxOutputBytes: 64 * 1024 }

/** A fresh sandbox: honest work, the attack, then verification (guarded, or the fallback). */
const attackThenVerify = (attack: Attack, guarded: boolean): Promise<VerifierOutcome> =>
  runtime.runPromise(
    Effect.gen(function* () {
      const driver = yield* SandboxDriver
      const info = yield* driver.create(sandboxSpec({ cpus: 1, memoryMb: 512, ttlMs: 180_000 }))
      return yield* Effect.gen(function* () {
        for (const [path, bytes] of Object.entries(attack.files?.() ?? {})) {
          const slash = path.lastIndexOf("/")
          const tar = yield* Effect.promise(() => singleFileTar(path.slice(slash + 1), bytes))
          yield* driver.put(info.id, path.slice(0, slash), tar)
        }
        for (const step of [HONEST, attack.script]) {
          const r = yield* driver.exec(info.id, step, quick)
          if (r.exitCode !== 0)
            return yield* Effect.die(
              new Error(`the agent's step failed: ${new TextDecoder().decode(r.output)}`),
            )
        }
        const sandbox = driverSandbox(driver, info.id)
        return yield* verifyEpisode(TASK).pipe(
          Effect.provideService(
            VerifierSandbox,
            guarded ? sandbox : { ...sandbox, execArgv: undefined },
          ),
        )
      }).pipe(Effect.ensuring(Effect.ignore(driver.destroy(info.id))))
    }),
  )

beforeAll(async () => {
  await ensureTestBaseImage()
  const source = join(hostDir, "forge.c")
  writeFileSync(source, PRELOAD_C)
  execFileSync("gcc", ["-shared", "-fPIC", "-O2", "-o", join(hostDir, "forge.so"), source])
  preloadLibrary = new Uint8Array(readFileSync(join(hostDir, "forge.so")))
  // The first create builds the verifier toolchain when the engine lacks it (~20 s).
  await runtime.runPromise(
    Effect.gen(function* () {
      const driver = yield* SandboxDriver
      const info = yield* driver.create(sandboxSpec({ ttlMs: 60_000 }))
      yield* driver.destroy(info.id)
    }),
  )
}, BASE_IMAGE_TIMEOUT_MS)

afterAll(async () => {
  await runtime.dispose()
  rmSync(hostDir, { recursive: true, force: true })
})

const score = (o: VerifierOutcome) => [o.passed, o.total, o.reward, o.resolved]

describe("the verifier cannot be forged from inside the sandbox", () => {
  it("an honest agent is scored as before, through the toolchain", async () => {
    const honest = await attackThenVerify({ name: "honest", script: "true" }, true)
    expect(score(honest)).toEqual([2, 5, 2, false])
    expect(honest.notes.join("\n")).not.toMatch(/could have replaced/)
  }, 60_000)

  it("a sandbox created without the toolchain is verified with its own programs, and says so", async () => {
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
          const info = yield* driver.create(sandboxSpec({ cpus: 1, memoryMb: 512, ttlMs: 120_000 }))
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
  }, 60_000)

  for (const attack of ATTACKS) {
    it(`${attack.name}: works against the sandbox's own programs, changes nothing under the toolchain`, async () => {
      const [forged, guarded] = await Promise.all([
        attackThenVerify(attack, false),
        attackThenVerify(attack, true),
      ])
      // The positive control: the attack is real.
      expect(forged.notes.join("\n")).toMatch(/could have replaced/)
      expect(score(forged)).toEqual([5, 5, 5, true])
      // t1's verification: the honest 2 of 5, every test by name.
      expect(guarded.notes.join("\n")).not.toMatch(/could have replaced/)
      expect(score(guarded)).toEqual([2, 5, 2, false])
      expect(guarded.tests.map((t) => t.name).sort()).toEqual(
        [1, 2, 3, 4, 5].map((i) => `test_work.py::test_${i}`),
      )
    }, 120_000)
  }
})
