import { describe, expect, it } from "vitest"
import { UsageError } from "../flags.ts"
import { summaryTable, type UpReport } from "../up/report.ts"
import { UP_DEFAULTS, upCommand, upOptions, upUsage } from "./up.ts"

const summary = (resolved: number, rungs: Record<string, [number, number]>) => ({
  episodes: 100,
  resolvedRate: resolved,
  rewardMean: resolved,
  testsPassed: 10,
  testsTotal: 20,
  rungs: Object.fromEntries(
    Object.entries(rungs).map(([k, [episodes, ok]]) => [k, { episodes, resolved: ok }]),
  ),
})

describe("t1 up", () => {
  it("documents every default it runs with", () => {
    const usage = upUsage()
    expect(usage).toContain(
      `--rounds N              RL updates, one batch of episodes each (default ${UP_DEFAULTS.rlSteps})`,
    )
    expect(usage).toContain(`(default ${UP_DEFAULTS.sftSteps})`)
    expect(usage).toContain("--driver auto|bwrap|docker|local")
    expect(upCommand(["--help"])).toBe(usage)
  })

  it("refuses what it cannot honour, with the usage", () => {
    expect(() => upCommand(["--driver", "podman"])).toThrow(
      /--driver must be one of auto, bwrap, docker, local/,
    )
    expect(() => upCommand(["--train", "tasks/bundled/train"])).toThrow(
      /--train and --eval go together/,
    )
    expect(() => upCommand(["--demos", "8", "--train-per-family", "8"])).toThrow(
      /--demos \(8\) must be below --train-per-family \(8\)/,
    )
    expect(() => upCommand(["--samples", "1"])).toThrow(/--samples must be an integer >= 2/)
    expect(() => upCommand(["--rounds", "0"])).toThrow(UsageError)
    expect(() => upCommand(["extra"])).toThrow(/unexpected argument "extra"/)
    expect(() => upCommand(["--train", "a", "--eval", "b", "--train-per-family", "10"])).toThrow(
      /--train-per-family sizes the ladder; it does not apply with --train\/--eval/,
    )
  })

  it("has no --waves: jobs train on the batch they are given", () => {
    expect(upUsage()).not.toContain("--waves")
    expect(() => upCommand(["--waves", "2"])).toThrow(UsageError)
  })

  it("trains and evaluates the rungs --rungs names (rung 1 by default)", () => {
    expect(upOptions([])?.options.rungs).toEqual(UP_DEFAULTS.rungs)
    expect(UP_DEFAULTS.rungs).toEqual([1])
    expect(upOptions(["--rungs", "1,3"])?.options.rungs).toEqual([1, 3])
    expect(() => upOptions(["--rungs", "8"])).toThrow(/--rungs takes 1, 2, 3, 4, 5, 6, 7, or obs/)
    // The observation rungs, and turns for their longest reference unless --turns says.
    expect(upOptions(["--rungs", "1,obs"])?.options.rungs).toEqual([1, 5, 6, 7])
    expect(upOptions(["--rungs", "1,obs"])?.options.turns).toBe(11)
    expect(upOptions(["--rungs", "1,5"])?.options.turns).toBe(UP_DEFAULTS.turns)
    expect(upOptions(["--rungs", "obs", "--turns", "4"])?.options.turns).toBe(4)
    // …and the observation rungs' warm start (more demonstrations and SFT steps), flags first.
    expect(upOptions(["--rungs", "5"])?.options).toMatchObject({ demos: 40, sftSteps: 1500 })
    expect(upOptions(["--rungs", "5", "--demos", "9"])?.options.demos).toBe(9)
    expect(upOptions([])?.options).toMatchObject({ demos: 8, sftSteps: 600 })
    expect(() => upOptions(["--rungs", "1,1"])).toThrow(UsageError)
    expect(() => upOptions(["--train", "a", "--eval", "b", "--rungs", "2"])).toThrow(
      /--rungs sizes the ladder; it does not apply with --train\/--eval/,
    )
  })

  it("shows the gain, the rungs and the held-out families in its table", () => {
    const report: UpReport = {
      before: summary(0.2, { "1": [40, 12], "2": [40, 6], "3": [20, 2] }),
      after: summary(0.35, { "1": [40, 20], "2": [40, 12], "3": [20, 3] }),
      oodBefore: summary(0, {}),
      oodAfter: summary(0.05, {}),
      rounds: [],
      sftLosses: [6.9, 0.1],
      golden: 160,
      seconds: 600,
      driver: "local",
      tasks: "task ladder, seed 0",
      trainTasks: 480,
      evalTasks: 120,
    }
    const table = summaryTable(report)
    expect(table).toMatch(/resolved rate \(eval\)\s+20\.0%\s+35\.0%/)
    expect(table).toMatch(/rung 1\s+30\.0%\s+50\.0%/)
    expect(table).toMatch(/rung 3\s+10\.0%\s+15\.0%/)
    expect(table).toMatch(/resolved \(held-out families\)\s+0\.0%\s+5\.0%/)
    expect(table).toContain(
      "gain: +15.0 points resolved on 120 held-out tasks (task ladder, seed 0; 480 train tasks)",
    )
  })
})
