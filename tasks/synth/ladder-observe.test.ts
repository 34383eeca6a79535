import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { solutionCommands } from "../solution/index.ts"
import type { LadderFamily } from "./families/ladder.ts"
import {
  DIFFICULTIES,
  type Difficulty,
  type GeneratedTask,
  LADDER_OBSERVE_FAMILIES,
  makeRng,
  poolOfSeed,
  writeTask,
} from "./index.ts"
import { runTasksLocally, type TaskRun } from "./testing.ts"

const scratch = mkdtempSync(join(tmpdir(), "t1-observe-test-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const SEEDS = [7, 1_000_007] as const

/** The task generateTask makes, with another hidden world when `salt` is given. */
const generate = (f: LadderFamily, seed: number, d: Difficulty, salt?: string): GeneratedTask =>
  f.generate(makeRng(`t1-synth/${f.name}/${seed}/0/${d}`), d, {
    pool: poolOfSeed(seed),
    ...(salt === undefined ? {} : { hiddenSalt: salt }),
  })

/** Another hidden world behind the same instruction whose reference differs (a few salts tried). */
const otherWorld = (f: LadderFamily, seed: number, d: Difficulty, task: GeneratedTask) => {
  for (let k = 1; k <= 20; k++) {
    const other = generate(f, seed, d, `blind-${k}`)
    if (other.solution !== task.solution) return other
  }
  throw new Error(`${f.name}/${d}/${seed}: every hidden world gives the same reference`)
}

const write = async (key: string, task: GeneratedTask) => {
  const dir = join(scratch, key.replaceAll("/", "-"))
  await Effect.runPromise(
    writeTask(dir, task, {
      id: key.replaceAll("/", "-"),
      taskSet: "observe-test",
      family: "observe",
      difficulty: "easy",
      split: "train",
      tags: [],
    }),
  )
  return dir
}

interface Case {
  readonly key: string
  readonly family: LadderFamily
  readonly task: GeneratedTask
  readonly turns: ReadonlyArray<string>
  readonly reference: TaskRun
  readonly blind: TaskRun
  readonly looksOnly: TaskRun
  readonly firstStep: TaskRun
}

describe("observation families, run locally", () => {
  const cases = new Map<string, Case>()

  beforeAll(async () => {
    const planned: Array<Omit<Case, "reference" | "blind" | "looksOnly" | "firstStep">> = []
    const dirs: Array<{ own: string; other: string }> = []
    for (const f of LADDER_OBSERVE_FAMILIES)
      for (const d of DIFFICULTIES)
        for (const seed of SEEDS) {
          const key = `${f.name}/${d}/${seed}`
          const task = generate(f, seed, d)
          const other = otherWorld(f, seed, d, task)
          planned.push({ key, family: f, task, turns: [...solutionCommands(task.solution)] })
          dirs.push({ own: await write(key, task), other: await write(`${key}/other`, other) })
        }
    const looks = (turns: ReadonlyArray<string>) => turns.filter((_, i) => i % 2 === 0)
    const results = await runTasksLocally([
      ...planned.map((p, i) => ({ dir: dirs[i]?.own as string, turns: p.turns })),
      // Blind: the reference of this instruction in another hidden world, replayed here.
      ...planned.map((p, i) => ({
        dir: dirs[i]?.other as string,
        turns: p.turns,
      })),
      ...planned.map((p, i) => ({ dir: dirs[i]?.own as string, turns: looks(p.turns) })),
      ...planned.map((p, i) => ({ dir: dirs[i]?.own as string, turns: p.turns.slice(0, 2) })),
    ])
    const n = planned.length
    planned.forEach((p, i) => {
      cases.set(p.key, {
        ...p,
        reference: results[i] as TaskRun,
        blind: results[n + i] as TaskRun,
        looksOnly: results[2 * n + i] as TaskRun,
        firstStep: results[3 * n + i] as TaskRun,
      })
    })
  }, 300_000)

  for (const f of LADDER_OBSERVE_FAMILIES)
    it(`${f.name}: the reference passes every test, a no-op and its looks alone none, a blind replay fails`, () => {
      for (const d of DIFFICULTIES)
        for (const seed of SEEDS) {
          const key = `${f.name}/${d}/${seed}`
          const c = cases.get(key) as Case
          expect(c, key).toBeDefined()
          const expected = c.task.expectedTests
          expect({
            key,
            failed: c.reference.solved.failed,
            problems: c.reference.problems,
          }).toEqual({ key, failed: [], problems: "" })
          expect(c.reference.solved.passed.length, key).toBe(expected)
          expect(c.reference.noop.passed, `${key}: no-op`).toEqual([])
          expect(c.looksOnly.solved.passed, `${key}: looks alone`).toEqual([])
          // The same instruction, another workdir: what the reference did without looking.
          expect(c.blind.solved.failed.length, `${key}: blind replay`).toBeGreaterThan(0)
          // Two commands a step: a look, then the act.
          const steps = c.task.instruction.split("\n").length
          expect(c.turns.length, key).toBe(2 * steps)
          if (steps > 1) {
            const first = c.firstStep.solved.passed.length
            expect(first, `${key}: first step earns its own tests`).toBeGreaterThan(0)
            expect(first, `${key}: first step`).toBeLessThan(expected)
          }
        }
    })
})

describe("observation families", () => {
  it("keep the instruction when only the hidden world changes, and change the workdir", () => {
    for (const f of LADDER_OBSERVE_FAMILIES)
      for (const d of DIFFICULTIES)
        for (const seed of SEEDS) {
          const task = generate(f, seed, d)
          const other = otherWorld(f, seed, d, task)
          expect(other.instruction, `${f.name}/${d}/${seed}`).toBe(task.instruction)
          expect(other.setup, `${f.name}/${d}/${seed}`).not.toBe(task.setup)
        }
  })

  it("never say a looked-up value in the instruction", () => {
    for (const f of LADDER_OBSERVE_FAMILIES)
      for (const d of DIFFICULTIES)
        for (const seed of SEEDS) {
          const task = generate(f, seed, d)
          const commands = solutionCommands(task.solution)
          const said = new Set(task.instruction.split(/[\s/]+/).map((w) => w.replace(/\.$/, "")))
          for (let i = 1; i < commands.length; i += 2) {
            const act = commands[i] as string
            // Every word of an act that the instruction lacks was printed by the look before it.
            const unsaid = act
              .split(/[\s/]+/)
              .filter((w) => /[a-z]+[0-9]/.test(w) || /^[0-9]+$/.test(w))
              .filter((w) => !said.has(w))
            expect(unsaid.length, `${f.name}/${d}/${seed}: ${act}`).toBeGreaterThan(0)
          }
        }
  })

  it("are a pure function of the seed", () => {
    for (const f of LADDER_OBSERVE_FAMILIES) {
      expect(generate(f, 7, "hard")).toEqual(generate(f, 7, "hard"))
      expect(generate(f, 7, "hard").setup).not.toBe(generate(f, 8, "hard").setup)
    }
  })

  it("draw every chain length of rung 7 and every step across seeds", () => {
    const chain = LADDER_OBSERVE_FAMILIES.find((f) => f.rung === 7) as LadderFamily
    const lengths = new Set<number>()
    const looks = new Set<string>()
    for (let seed = 0; seed < 40; seed++)
      for (const d of DIFFICULTIES) {
        const task = generate(chain, seed, d)
        lengths.add(task.instruction.split("\n").length)
        for (const [i, c] of solutionCommands(task.solution).entries())
          if (i % 2 === 0) looks.add(c.split(" ")[0] as string)
      }
    expect([...lengths].sort()).toEqual([3, 4, 5])
    expect([...looks].sort()).toEqual(["cat", "find", "wc"])
  })
})
