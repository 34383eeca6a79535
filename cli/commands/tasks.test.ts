import { execFile } from "node:child_process"
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, Exit } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import type { VerifierOutcome } from "../../actors/verifier/index.ts"
import { UsageError } from "../flags.ts"
import { type CheckRow, imageFailureRow } from "../task-check.ts"
import { finishCheck, tasksCommand } from "./tasks.ts"

const BIN = fileURLToPath(new URL("../bin/t1.js", import.meta.url))
const BUNDLED = fileURLToPath(new URL("../../tasks/bundled", import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), "t1-tasks-cli-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const t1 = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr }),
    )
  })

describe("t1 tasks", () => {
  it("answers --help with its usage and rejects what it does not know", () => {
    expect(tasksCommand(["--help"])).toContain("t1 tasks decontam --train DIR")
    expect(() => tasksCommand([])).toThrow(UsageError)
    expect(() => tasksCommand(["frobnicate"])).toThrow(/unknown action/)
    expect(() => tasksCommand(["families", "--train", "x"])).toThrow(
      /not an option of t1 tasks families/,
    )
    expect(() =>
      tasksCommand([
        "synth",
        "--family",
        "csv-aggregate",
        "--seed",
        "1",
        "--count",
        "0",
        "--out",
        "x",
      ]),
    ).toThrow(/--count must be an integer >= 1/)
    expect(() =>
      tasksCommand(["decontam", "--train", "a", "--eval", "b", "--threshold", "1.5"]),
    ).toThrow(/--threshold/)
    expect(() => tasksCommand(["check"])).toThrow(/which tasks/)
  })

  it("takes check's --json, --keep and --build-network, and says what each exit code means", () => {
    const help = String(tasksCommand(["--help"]))
    expect(help).toContain("--build-network")
    expect(help).toMatch(/Exit 0 every task ok; 1 some task failed/)
    expect(help).toContain("3 none failed but some are unverifiable")
    expect(typeof tasksCommand(["check", "x", "--json", "--keep"])).toBe("object")
    expect(typeof tasksCommand(["check", "x", "--build-network", "default"])).toBe("object")
    expect(() => tasksCommand(["check", "x", "--build-network", "wifi"])).toThrow(
      /--build-network must be one of none, default/,
    )
    expect(() => tasksCommand(["check", "x", "--keep", "--driver", "local"])).toThrow(
      /--keep needs the docker driver/,
    )
    expect(() => tasksCommand(["check", "x", "--keep", "--driver", "bwrap"])).toThrow(
      /--keep needs the docker driver: bwrap sandboxes end with t1/,
    )
    expect(typeof tasksCommand(["check", "x", "--driver", "bwrap"])).toBe("object")
    expect(() => tasksCommand(["decontam", "--keep"])).toThrow(/not an option of t1 tasks decontam/)
  })

  it("ends a check with exit 1 on a failure and exit 3 when some task is only unverifiable", async () => {
    const unverifiable: VerifierOutcome = {
      kind: "unverifiable",
      missing: ["numpy"],
      forgery: [],
      guarded: true,
      path: "script",
      pathReason: "",
      tests: [],
      passed: 0,
      total: 0,
      reward: 0,
      resolved: false,
      timedOut: false,
      mode: "exit-code",
      notes: [],
      durationMs: 1,
      exitCode: 1,
      outputTail: new Uint8Array(0),
    }
    const u: CheckRow = {
      task: "needs-numpy",
      image: "img",
      reference: { kind: "verified", outcome: unverifiable },
      noop: { kind: "verified", outcome: unverifiable },
      seconds: 1,
      status: "unverifiable",
      ok: false,
      problems: ["unverifiable here"],
    }
    const failed = await Effect.runPromiseExit(
      finishCheck({ rows: [u, imageFailureRow("broken", "no Dockerfile")], exitCode: 1 }),
    )
    expect(Exit.isFailure(failed) ? String(failed.cause) : "").toContain(
      "1 task(s) failed the check: broken; 1 unverifiable here: needs-numpy",
    )
    const before = process.exitCode
    try {
      await Effect.runPromise(finishCheck({ rows: [u], exitCode: 3 }))
      expect(process.exitCode).toBe(3)
    } finally {
      process.exitCode = before
    }
    await Effect.runPromise(finishCheck({ rows: [], exitCode: 0 }))
    expect(process.exitCode).toBe(before)
  })

  it("lists the families", () => {
    const listing = tasksCommand(["families"])
    expect(typeof listing).toBe("string")
    expect(String(listing).split("\n").length).toBeGreaterThanOrEqual(12)
    const json = JSON.parse(String(tasksCommand(["families", "--json"]))) as Array<{ name: string }>
    expect(json.map((f) => f.name)).toContain("release-pipeline")
  })

  it("synthesises tasks into a directory", async () => {
    const out = join(scratch, "synth")
    const r = await t1([
      "tasks",
      "synth",
      "--family",
      "word-frequency",
      "--seed",
      "9",
      "--count",
      "2",
      "--out",
      out,
      "--difficulty",
      "hard",
      "--split",
      "eval",
    ])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("wrote 2 word-frequency task(s)")
    const meta = JSON.parse(
      readFileSync(join(out, "word-frequency-hard-s9-001", "task.json"), "utf8"),
    ) as Record<string, unknown>
    expect(meta).toMatchObject({
      family: "word-frequency",
      difficulty: "hard",
      split: "eval",
      task_set: "synth",
    })
  })

  it("passes the bundled splits and exits 1 on a planted duplicate", async () => {
    const clean = await t1([
      "tasks",
      "decontam",
      "--train",
      join(BUNDLED, "train"),
      "--eval",
      join(BUNDLED, "eval"),
    ])
    expect(clean.code).toBe(0)
    expect(clean.stdout).toContain("decontaminated: no eval task above the threshold")

    const evalDir = join(scratch, "eval-with-plant")
    cpSync(join(BUNDLED, "eval"), evalDir, { recursive: true })
    cpSync(
      join(BUNDLED, "train", "text-search-hard-s1-000"),
      join(evalDir, "text-search-hard-s1-000"),
      { recursive: true },
    )
    const planted = await t1([
      "tasks",
      "decontam",
      "--train",
      join(BUNDLED, "train"),
      "--eval",
      evalDir,
      "--json",
    ])
    expect(planted.code).toBe(1)
    const report = JSON.parse(planted.stdout) as {
      max: number
      flagged: Array<string>
      split: { violations: Array<string> }
    }
    expect(report.max).toBe(1)
    expect(report.flagged).toEqual(["text-search-hard-s1-000"])
    expect(report.split.violations.length).toBeGreaterThan(0)
    expect(planted.stderr).toContain("overlap the train set above 0.5")
  })

  it("exits 2 on a usage error", async () => {
    const r = await t1(["tasks", "synth", "--family", "csv-aggregate"])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain("--seed is required")
  })
})
