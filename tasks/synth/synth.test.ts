import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { loadTasks, NATIVE_FIELDS } from "../load/index.ts"
import {
  ALL_FAMILIES,
  DIFFICULTIES,
  type Difficulty,
  FAMILIES,
  familyRegistry,
  generateTask,
  LADDER_FAMILIES,
  LADDER_OBSERVE_FAMILIES,
  makeRng,
  namePool,
  poolFileNames,
  poolOfSeed,
  type SynthesizedTask,
  synthesize,
} from "./index.ts"
import { dockerAvailable, runTaskInDocker, type TaskRun } from "./testing.ts"

const scratch = mkdtempSync(join(tmpdir(), "t1-synth-test-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** Every file under `dir`, relative path -> bytes (as a string) and mode. */
const snapshot = (dir: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name)
      if (e.isDirectory()) walk(p)
      else
        out[relative(dir, p)] =
          `${(statSync(p).mode & 0o777).toString(8)} ${readFileSync(p, "utf8")}`
    }
  }
  walk(dir)
  return out
}

const synth = (family: string, seed: number, out: string, difficulty?: Difficulty) =>
  Effect.runPromise(synthesize({ family, seed, count: 3, out, difficulty }))

describe("the seeded PRNG", () => {
  it("gives the same sequence for the same key and another for another key", () => {
    const draw = (key: string) => {
      const rng = makeRng(key)
      return Array.from({ length: 20 }, () => rng.int(0, 1_000_000))
    }
    expect(draw("a/1")).toEqual(draw("a/1"))
    expect(draw("a/1")).not.toEqual(draw("a/2"))
  })

  it("keeps int within bounds and sample distinct", () => {
    const rng = makeRng("bounds")
    for (let i = 0; i < 2000; i++) {
      const x = rng.int(-3, 4)
      expect(x).toBeGreaterThanOrEqual(-3)
      expect(x).toBeLessThanOrEqual(4)
    }
    const picked = rng.sample([1, 2, 3, 4, 5, 6, 7, 8], 8)
    expect(new Set(picked).size).toBe(8)
    expect(() => rng.pick([])).toThrow(RangeError)
  })
})

describe("the family registry", () => {
  it("has at least 12 families with unique kebab-case names, a category tag and a summary", () => {
    expect(FAMILIES.length).toBeGreaterThanOrEqual(12)
    expect(new Set(FAMILIES.map((f) => f.name)).size).toBe(FAMILIES.length)
    for (const f of FAMILIES) {
      expect(f.name).toMatch(/^[a-z]+(-[a-z]+)*$/)
      expect(f.tags.length).toBeGreaterThan(0)
      expect(f.summary.length).toBeGreaterThan(10)
    }
  })

  it("counts every test function, uses several per task, and renders no placeholders", () => {
    for (const f of FAMILIES)
      for (const d of DIFFICULTIES)
        for (let seed = 0; seed < 20; seed++) {
          const task = generateTask(f, seed, 0, d)
          const names = [...task.tests.matchAll(/^def (test_\w+)\(\):/gm)].map((m) => m[1])
          expect(names.length, `${f.name} ${d} ${seed}`).toBe(task.expectedTests)
          expect(new Set(names).size).toBe(names.length)
          expect(task.expectedTests, `${f.name} ${d}`).toBeGreaterThanOrEqual(4)
          for (const text of [task.instruction, task.setup, task.solution, task.tests])
            expect(text, `${f.name} ${d} ${seed}`).not.toMatch(/undefined|NaN|\[object Object\]/)
          expect(task.setup.startsWith("#!/usr/bin/env bash\nset -euo pipefail\n")).toBe(true)
        }
  })

  it("makes harder tasks check more", () => {
    for (const f of FAMILIES) {
      const tests = (d: Difficulty) =>
        Array.from({ length: 10 }, (_, s) => generateTask(f, s, 0, d).expectedTests).reduce(
          (a, b) => a + b,
        )
      expect(tests("hard"), f.name).toBeGreaterThan(tests("easy"))
    }
  })

  it("spans 5 to 20 steps in the long-horizon family", () => {
    const steps = (d: Difficulty) =>
      Array.from(
        { length: 30 },
        (_, s) =>
          generateTask(
            FAMILIES.find((f) => f.name === "release-pipeline") as (typeof FAMILIES)[number],
            s,
            0,
            d,
          ).expectedTests,
      )
    expect(new Set(steps("easy"))).toEqual(new Set([5]))
    expect(new Set(steps("medium"))).toEqual(new Set([10]))
    expect(Math.min(...steps("hard"))).toBeGreaterThanOrEqual(15)
    expect(Math.max(...steps("hard"))).toBeLessThanOrEqual(20)
  })
})

describe("the ladder families in the registry", () => {
  it("keeps FAMILIES to the multi-step families and registers the ladder's beside them", () => {
    expect(FAMILIES).toHaveLength(15)
    expect(FAMILIES.every((f) => f.rung === undefined)).toBe(true)
    expect(ALL_FAMILIES).toEqual([...FAMILIES, ...LADDER_FAMILIES, ...LADDER_OBSERVE_FAMILIES])
    expect(Object.keys(familyRegistry)).toHaveLength(ALL_FAMILIES.length)
    for (const f of ALL_FAMILIES) expect(familyRegistry[f.name]).toBe(f)
  })

  it("picks the name pool from the seed's range", () => {
    expect(poolOfSeed(0)).toBe("train")
    expect(poolOfSeed(999_999)).toBe("train")
    expect(poolOfSeed(1_000_000)).toBe("eval")
    expect(poolOfSeed(1_999_999)).toBe("eval")
    expect(poolOfSeed(2_000_000)).toBe("train")
  })

  it("synthesises a ladder family by name, with eval names for an eval seed", async () => {
    const out = join(scratch, "ladder")
    const [train] = await Effect.runPromise(
      synthesize({ family: "copy-file", seed: 4, count: 1, out }),
    )
    const [held] = await Effect.runPromise(
      synthesize({ family: "copy-file", seed: 1_000_004, count: 1, out, split: "eval" }),
    )
    const names = (t: SynthesizedTask | undefined) => t?.generated.bindings?.files ?? []
    expect(names(train).length).toBeGreaterThanOrEqual(3)
    for (const n of names(train)) expect(poolFileNames(namePool("train"))).toContain(n)
    for (const n of names(held)) expect(poolFileNames(namePool("eval"))).toContain(n)
    expect(readFileSync(join(held?.dir ?? "", "task.json"), "utf8")).toContain('"rung-1"')
  })
})

describe("synthesize", () => {
  it("is deterministic: the same family and seed give byte-identical task directories", async () => {
    for (const f of FAMILIES) {
      const a = join(scratch, "det-a", f.name)
      const b = join(scratch, "det-b", f.name)
      await synth(f.name, 42, a)
      await synth(f.name, 42, b)
      expect(snapshot(a), f.name).toEqual(snapshot(b))
    }
  })

  it("gives different tasks for different seeds and indexes", async () => {
    for (const f of FAMILIES)
      for (const d of DIFFICULTIES) {
        const one = generateTask(f, 1, 0, d)
        const two = generateTask(f, 2, 0, d)
        const next = generateTask(f, 1, 1, d)
        expect(one.setup + one.instruction, `${f.name} ${d}`).not.toBe(two.setup + two.instruction)
        expect(one.setup + one.instruction, `${f.name} ${d}`).not.toBe(
          next.setup + next.instruction,
        )
      }
  })

  it("writes the native layout, which the task loader accepts", async () => {
    const out = join(scratch, "layout")
    const written = await Effect.runPromise(
      synthesize({
        family: "text-search",
        seed: 5,
        count: 3,
        out,
        split: "eval",
        taskSet: "probe",
      }),
    )
    expect(written.map((t) => t.meta.id)).toEqual([
      "text-search-easy-s5-000",
      "text-search-medium-s5-001",
      "text-search-hard-s5-002",
    ])
    const dir = (written[0] as SynthesizedTask).dir
    expect(Object.keys(snapshot(dir)).sort()).toEqual([
      "instruction.md",
      "setup.sh",
      "solution/solve.sh",
      "task.json",
      "tests/test_outputs.py",
    ])
    const meta = JSON.parse(readFileSync(join(dir, "task.json"), "utf8")) as Record<string, unknown>
    for (const key of Object.keys(meta)) expect(NATIVE_FIELDS).toContain(key)
    expect(meta).toMatchObject({
      split: "eval",
      task_set: "probe",
      image: "t1-base:latest",
      workdir: "/app",
    })
    const tasks = await Effect.runPromise(loadTasks([out]))
    const loaded = tasks.map((t) => [
      t.id,
      t.family,
      t.split,
      t.difficulty,
      t.verifier.expectedTests,
    ])
    const want = written.map((t) => [
      t.meta.id,
      "text-search",
      "eval",
      t.meta.difficulty,
      t.generated.expectedTests,
    ])
    expect(loaded.sort()).toEqual(want.sort())
  })

  it("refuses an unknown family", async () => {
    const exit = await Effect.runPromise(
      Effect.flip(synthesize({ family: "no-such-family", seed: 1, count: 1, out: scratch })),
    )
    expect(exit._tag).toBe("UnknownFamily")
    expect(exit.message).toContain("csv-aggregate")
  })
})

/**
 * End to end, every family at every difficulty: setup + reference solution must pass every
 * test; setup alone (a no-op agent) must fail most of them. Runs in throwaway containers of
 * t1-base:latest, a few at a time.
 */
describe("every family in a sandbox", () => {
  const SEED = 1
  const CONCURRENCY = 3
  const runs = new Map<string, { task: SynthesizedTask; run: TaskRun }>()

  beforeAll(async () => {
    if (!(await dockerAvailable()))
      throw new Error(
        "no Docker engine with t1-base:latest: start dockerd (as .ci/run does) and run t1 image build-base",
      )
    const jobs: Array<() => Promise<void>> = []
    for (const f of FAMILIES)
      for (const d of DIFFICULTIES)
        jobs.push(async () => {
          const [task] = await Effect.runPromise(
            synthesize({
              family: f.name,
              seed: SEED,
              count: 1,
              out: join(scratch, "e2e"),
              difficulty: d,
            }),
          )
          if (task === undefined) throw new Error("synthesize wrote nothing")
          runs.set(`${f.name}/${d}`, { task, run: await runTaskInDocker(task.dir) })
        })
    const queue = [...jobs]
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let job = queue.shift(); job !== undefined; job = queue.shift()) await job()
      }),
    )
  }, 600_000)

  for (const f of FAMILIES)
    it(`${f.name}: the reference passes every test, a no-op fails most`, () => {
      for (const d of DIFFICULTIES) {
        const entry = runs.get(`${f.name}/${d}`)
        expect(entry, `${f.name}/${d} ran`).toBeDefined()
        const { task, run } = entry as { task: SynthesizedTask; run: TaskRun }
        const want = task.generated.expectedTests
        expect({ id: task.meta.id, failed: run.solved.failed, problems: run.problems }).toEqual({
          id: task.meta.id,
          failed: [],
          problems: "",
        })
        expect(run.solved.passed.length, task.meta.id).toBe(want)
        expect(run.noop.passed.length + run.noop.failed.length, task.meta.id).toBe(want)
        expect(
          run.noop.failed.length,
          `${task.meta.id}: no-op passes ${run.noop.passed.join(", ")}`,
        ).toBeGreaterThanOrEqual(Math.ceil((want * 3) / 4))
      }
    })
})
