import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { packFiles } from "../../services/tar/index.ts"
import type { VerifierSandboxShape } from "./port.ts"
import { checkTripwire, fingerprints } from "./tripwire.ts"

/** A sandbox whose shell is this host's bash; `answer` replaces what it prints, when given. */
const hostShell = (answer?: string): VerifierSandboxShape => ({
  exec: (command) =>
    Effect.sync(() => {
      const output =
        answer ??
        execFileSync("bash", ["-c", command], {
          encoding: "utf8",
          stdio: ["ignore", "pipe", "pipe"],
        })
      return {
        output: new TextEncoder().encode(output),
        exitCode: 0,
        timedOut: false,
        truncated: false,
        sessionRestarted: false,
      }
    }),
  put: () => Effect.die("not used"),
  maxPutBytes: 1 << 20,
})

const odd = ["test_a.py", "sub/data.txt", "-dash.py", "back\\slash.py", "new\nline.py", "it's.py"]

describe("tripwire", () => {
  it("reads back every uploaded file's sha256 and names those changed or missing", async () => {
    const files = Object.fromEntries(odd.map((name, i) => [name, `body ${i}\n`]))
    const tar = new Uint8Array(await packFiles(files))
    const expected = await fingerprints(tar, [
      { path: "test_rows_0a1b2c.py", bytes: new TextEncoder().encode("def test_x(): pass\n") },
    ])
    expect([...expected.keys()].sort()).toEqual([...odd, "test_rows_0a1b2c.py"].sort())
    const dir = mkdtempSync(join(tmpdir(), "t1-tripwire-"))
    try {
      mkdirSync(join(dir, "sub"))
      for (const [name, body] of Object.entries(files)) writeFileSync(join(dir, name), body)
      writeFileSync(join(dir, "test_rows_0a1b2c.py"), "def test_x(): pass\n")
      // Files the tests add (outputs, bytecode) are none of the tripwire's business.
      writeFileSync(join(dir, "extra.log"), "x")
      const run = () => Effect.runPromise(checkTripwire(hostShell(), dir, expected))
      expect(await run()).toEqual({ kind: "checked", evidence: [], removed: false })
      writeFileSync(join(dir, "new\nline.py"), "changed")
      writeFileSync(join(dir, "back\\slash.py"), "changed")
      rmSync(join(dir, "sub", "data.txt"))
      rmSync(join(dir, "test_rows_0a1b2c.py"))
      expect(await run()).toEqual({
        kind: "checked",
        evidence: [
          "test files changed during the run: back\\slash.py, new\nline.py (sha256 differs from the upload)",
          "test files missing after the run: sub/data.txt, test_rows_0a1b2c.py",
        ],
        removed: false,
      })
      rmSync(dir, { recursive: true, force: true })
      const gone = await run()
      expect(gone.kind === "checked" && gone.evidence[0]).toMatch(
        /^test files missing after the run: /,
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("does not call files missing when it could not hash them", async () => {
    const expected = new Map([["test_a.py", "0".repeat(64)]])
    const without = await Effect.runPromise(
      checkTripwire(hostShell("t1-no-sha256sum\n"), "/tests", expected),
    )
    expect(without).toEqual({
      kind: "unchecked",
      reason: "the sandbox has no sha256sum",
      removed: false,
    })
    const broken = await Effect.runPromise(checkTripwire(hostShell(""), "/tests", expected))
    expect(broken.kind).toBe("unchecked")
  })

  it("removes the scratch directory in the same exec, before it reads (one exec, not two)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "t1-tripwire-"))
    const scratch = mkdtempSync(join(tmpdir(), "t1-verify-"))
    try {
      writeFileSync(join(dir, "test_a.py"), "a\n")
      writeFileSync(join(scratch, "report.xml"), "<testsuite/>")
      const expected = await fingerprints(new Uint8Array(await packFiles({ "test_a.py": "a\n" })))
      let execs = 0
      const shell = hostShell()
      const counted: VerifierSandboxShape = {
        ...shell,
        exec: (command, options) => {
          execs++
          return shell.exec(command, options)
        },
      }
      const result = await Effect.runPromise(checkTripwire(counted, dir, expected, scratch))
      expect(result).toEqual({ kind: "checked", evidence: [], removed: true })
      expect(execs).toBe(1)
      expect(existsSync(scratch)).toBe(false)
      // Nothing to read back: nothing runs, and the caller removes the directory itself.
      const none = await Effect.runPromise(checkTripwire(counted, dir, new Map(), scratch))
      expect(none.removed).toBe(false)
      expect(execs).toBe(1)
    } finally {
      rmSync(dir, { recursive: true, force: true })
      rmSync(scratch, { recursive: true, force: true })
    }
  })
})
