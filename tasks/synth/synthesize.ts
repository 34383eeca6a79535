import { basename, join, resolve } from "node:path"
import { Effect } from "effect"
import { SEED_RANGES } from "../decontam/splits.ts"
import { type TaskWriteFailed, UnknownFamily } from "./errors.ts"
import { familyRegistry } from "./families/index.ts"
import {
  DIFFICULTIES,
  type Difficulty,
  type GeneratedTask,
  type Pool,
  type TaskFamily,
} from "./family.ts"
import { makeRng } from "./rng.ts"
import { type TaskMeta, writeTask } from "./write.ts"

export const findFamily = (name: string): Effect.Effect<TaskFamily, UnknownFamily> => {
  const family = familyRegistry[name]
  return family === undefined
    ? Effect.fail(new UnknownFamily({ family: name, known: Object.keys(familyRegistry) }))
    : Effect.succeed(family)
}

/** The task id: family, difficulty, seed and index, e.g. `csv-aggregate-hard-s7-002`. */
export const taskId = (family: string, difficulty: Difficulty, seed: number, index: number) =>
  `${family}-${difficulty}-s${seed}-${String(index).padStart(3, "0")}`

/** The name pool of a seed: eval-range seeds draw held-out names and values, all others train. */
export const poolOfSeed = (seed: number): Pool =>
  seed >= SEED_RANGES.eval.from && seed < SEED_RANGES.eval.to ? "eval" : "train"

/**
 * A pure function of its arguments: the same call gives a byte-identical task. The name pool is
 * the seed's unless given (the demo pool is a part of the train pool: a train seed only).
 */
export const generateTask = (
  family: TaskFamily,
  seed: number,
  index: number,
  difficulty: Difficulty,
  pool: Pool = poolOfSeed(seed),
): GeneratedTask => {
  if (pool === "demo" && poolOfSeed(seed) !== "train")
    throw new RangeError(`the demo pool needs a train seed, got ${seed}`)
  return family.generate(
    makeRng(`t1-synth/${family.name}/${seed}/${index}/${difficulty}`),
    difficulty,
    { pool },
  )
}

/** Without an explicit difficulty, tasks cycle easy, medium, hard by index. */
export const difficultyFor = (index: number, difficulty: Difficulty | undefined): Difficulty =>
  difficulty ?? (DIFFICULTIES[index % DIFFICULTIES.length] as Difficulty)

export interface SynthOptions {
  readonly family: string
  readonly seed: number
  readonly count: number
  /** Parent directory; each task goes to `<out>/<task id>/`. */
  readonly out: string
  readonly difficulty?: Difficulty | undefined
  readonly split?: "train" | "eval" | undefined
  /** Default: the name of `out`. */
  readonly taskSet?: string | undefined
}

export interface SynthesizedTask {
  readonly dir: string
  readonly meta: TaskMeta
  readonly generated: GeneratedTask
}

export const synthesize = (
  options: SynthOptions,
): Effect.Effect<ReadonlyArray<SynthesizedTask>, UnknownFamily | TaskWriteFailed> =>
  Effect.gen(function* () {
    const family = yield* findFamily(options.family)
    const out = resolve(options.out)
    const written: Array<SynthesizedTask> = []
    for (let index = 0; index < options.count; index++) {
      const difficulty = difficultyFor(index, options.difficulty)
      const generated = generateTask(family, options.seed, index, difficulty)
      const meta: TaskMeta = {
        id: taskId(family.name, difficulty, options.seed, index),
        taskSet: options.taskSet ?? basename(out),
        family: family.name,
        difficulty,
        split: options.split ?? "train",
        tags: [...family.tags, difficulty],
      }
      const dir = join(out, meta.id)
      yield* writeTask(dir, generated, meta)
      written.push({ dir, meta, generated })
    }
    return written
  })
