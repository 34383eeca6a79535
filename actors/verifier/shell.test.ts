import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type { VerifierSandboxShape } from "./port.ts"
import { type FileRead, inFreshShell, readSandboxFile, readSandboxFiles } from "./shell.ts"

/** Runs `command` as the episode's shell would: bash -c, with `env` as its environment. */
const run = (command: string, env: Record<string, string>) => {
  const r = spawnSync("bash", ["--noprofile", "--norc", "-c", command], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env },
    encoding: "utf8",
  })
  return { status: r.status, out: r.stdout }
}

describe("inFreshShell", () => {
  it("runs the script with the episode's variables, its status and its output", () => {
    const r = run(inFreshShell(`echo "v=$KEEP"; echo 'quote'"'"'s'; exit 3`), { KEEP: "yes" })
    expect(r.out).toBe("v=yes\nquote's\n")
    expect(r.status).toBe(3)
  })

  it("drops the hazardous variables", () => {
    const r = run(inFreshShell(`echo "[$PYTEST_ADDOPTS][$BASH_ENV]"`), {
      PYTEST_ADDOPTS: "-p evil",
      BASH_ENV: "/tmp/evil",
    })
    expect(r.out).toBe("[][]\n")
  })

  it("neither the script nor its children see an exported function", () => {
    const fn = { "BASH_FUNC_t1fn%%": "() { echo hijacked; }", KEEP: "k" }
    const r = run(
      inFreshShell(
        `type -t t1fn || echo none; bash -c 'type -t t1fn || echo none'; env | grep -c BASH_FUNC_; echo "$KEEP"`,
      ),
      fn,
    )
    expect(r.out).toBe("none\nnone\n0\nk\n")
  })

  it("leaves none of its own variables or arguments to the script", () => {
    const r = run(inFreshShell(`echo "[$#][$1][$__t1_u][$__t1_kv]"`), {})
    expect(r.out).toBe("[0][][][]\n")
  })

  it("an alias or function named env in the episode's shell does not stand in for env", () => {
    const r = run(`env() { echo hijacked; }; ${inFreshShell("echo ran")}`, {})
    expect(r.out).toBe("ran\n")
  })
})

describe("readSandboxFiles", () => {
  // A sandbox whose shell is this host's bash, counting its execs.
  const hostSandbox = () => {
    const calls = { execs: 0 }
    const sandbox: VerifierSandboxShape = {
      exec: (command, options) =>
        Effect.sync(() => {
          calls.execs++
          const r = spawnSync("bash", ["--noprofile", "--norc", "-c", command], {
            maxBuffer: options.maxOutputBytes,
          })
          const output = new Uint8Array(Buffer.concat([r.stdout, r.stderr]))
          return {
            output,
            exitCode: r.status ?? -1,
            timedOut: false,
            truncated: false,
            sessionRestarted: false,
          }
        }),
      put: () => Effect.void,
      maxPutBytes: 1 << 20,
    }
    return { sandbox, calls }
  }

  it("reads present, missing, oversized and non-regular files in one exec, bytes exact", async () => {
    const dir = mkdtempSync(join(tmpdir(), "t1-read-files-"))
    const bytes = new Uint8Array([0, 1, 2, 255, 10, 13, 0x27, 0x22])
    writeFileSync(join(dir, "a.bin"), bytes)
    writeFileSync(join(dir, "big.txt"), "x".repeat(100))
    writeFileSync(join(dir, "empty"), "")
    mkdirSync(join(dir, "folder"))
    const { sandbox, calls } = hostSandbox()
    const reads = await Effect.runPromise(
      readSandboxFiles(
        sandbox,
        ["a.bin", "missing", "big.txt", "empty", "folder"].map((f) => ({
          path: join(dir, f),
          maxBytes: 50,
        })),
      ),
    )
    expect(calls.execs).toBe(1)
    expect(reads).toEqual([
      { kind: "read", bytes },
      { kind: "missing" },
      { kind: "too-large", size: 100 },
      { kind: "read", bytes: new Uint8Array(0) },
      { kind: "missing" },
    ])
  })

  it("reads a file larger than its share of the first exec in further chunks", async () => {
    const dir = mkdtempSync(join(tmpdir(), "t1-read-files-"))
    const text = Buffer.from(Array.from({ length: 700_000 }, (_, i) => i % 251))
    writeFileSync(join(dir, "large"), text)
    const { sandbox, calls } = hostSandbox()
    const [large, alone] = await Effect.runPromise(
      Effect.all([
        readSandboxFiles(sandbox, [
          { path: join(dir, "large"), maxBytes: 1 << 20 },
          { path: join(dir, "none"), maxBytes: 1 << 20 },
        ]),
        readSandboxFile(sandbox, join(dir, "large"), 1 << 20),
      ]),
    )
    // Compared as buffers: a deep equality over 700 000 elements takes seconds.
    const same = (r: FileRead | undefined) => r?.kind === "read" && text.equals(r.bytes)
    expect(same(large?.[0])).toBe(true)
    expect(large?.[1]).toEqual({ kind: "missing" })
    expect(same(alone)).toBe(true)
    // 256 KiB then 444 KiB for the pair; 512 KiB then 188 KiB alone.
    expect(calls.execs).toBe(4)
  })
})
