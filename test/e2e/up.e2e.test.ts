/**
 * `t1 up` as a user runs it, made small: one process that submits the recipe's SFT, eval, train
 * and eval jobs to its own gateway and renders the report from their events.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, describe, expect, it } from "vitest"
import type { UpReport } from "../../cli/up/report.ts"

const BIN = fileURLToPath(new URL("../../cli/bin/t1.js", import.meta.url))
const run = promisify(execFile)

describe("t1 up (jobs through its own gateway)", () => {
  const out = mkdtempSync(join(tmpdir(), "t1-up-e2e-"))
  afterAll(() => rmSync(out, { recursive: true, force: true }))

  it("runs SFT, eval, train and eval jobs and reports them from their events", async () => {
    const sftSteps = 12
    const rounds = 2
    const { stdout, stderr } = await run(
      process.execPath,
      [
        BIN,
        "up",
        "--train-per-family",
        "4",
        "--demos",
        "1",
        "--eval-per-family",
        "1",
        "--sft-steps",
        String(sftSteps),
        "--rounds",
        String(rounds),
        "--tasks-per-round",
        "2",
        "--samples",
        "2",
        "--eval-samples",
        "1",
        "--turns",
        "2",
        "--out",
        out,
      ],
      { env: { ...process.env, T1_LOG_FORMAT: "logfmt" }, maxBuffer: 64 << 20 },
    )
    expect(stdout).toMatch(/resolved rate \(eval\)\s+\d+\.\d%\s+\d+\.\d%/)
    expect(stdout).toContain(`RL: ${rounds} updates`)
    expect(stdout).toContain("report:")
    // Every phase went through the gateway as a job.
    for (const kind of ["sft", "eval", "train"])
      expect(stderr).toMatch(new RegExp(`coordinator: job \\S+ admitted: ${kind}`))
    const report = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as UpReport
    expect(report.sftLosses).toHaveLength(sftSteps)
    expect(report.sftLosses.at(-1)).toBeLessThan(report.sftLosses[0] ?? 0)
    expect(report.golden).toBeGreaterThan(0)
    expect(report.rounds.map((r) => r.round)).toEqual([1, 2])
    expect(report.rounds.map((r) => r.version)).toEqual([1, 2])
    // The ladder's held-out tasks: every episode scored, tests counted from the events.
    expect(report.before.episodes).toBe(report.evalTasks)
    expect(report.after.episodes).toBe(report.evalTasks)
    expect(report.before.testsTotal).toBeGreaterThan(0)
    expect(report.after.testsTotal).toBe(report.before.testsTotal)
    expect(report.oodBefore?.episodes).toBeGreaterThan(0)
    // The first update trains on the samplers' own weights (v0 = the warm start).
    expect(report.rounds[0]?.trainInferDiff).toBeLessThan(1e-3)
  }, 400_000)
})
