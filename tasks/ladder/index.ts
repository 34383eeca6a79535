/**
 * The task ladder: train, in-distribution eval and out-of-distribution eval task sets, graded by
 * rung, for a policy that cannot yet solve the multi-step families.
 *
 * - Rungs 1, 2, 3: the ladder families (tasks/synth/families/ladder.ts), tasks of 1, 2 and 3
 *   one-line commands. Train tasks use the train seed range and the train name pool; eval tasks
 *   use the eval seed range and the eval name pool (unseen file names, folders, grep words and
 *   values). A few families are held out entirely (OOD): eval only.
 * - Rung 4 (opt in): the multi-step families (tasks/synth/families), split as the bundled corpus
 *   splits them — train families train, the three held-out families OOD. They have no
 *   in-distribution eval: seed-held-out tasks of a multi-step family share its templates (74–96%
 *   8-gram overlap, tasks/bundled/README.md).
 * - Rungs 5, 6, 7 (opt in; `obs` names all three): the observation families
 *   (tasks/synth/families/ladder-observe.ts), whose needed value is only in the sandbox: a look,
 *   then an act that uses what it printed; one, two, and three to five such steps. Split as rungs
 *   1–3 are (names by pool, one family of rungs 5 and 6 held out).
 *
 * Everything is a pure function of the options: the same options give byte-identical tasks.
 */
import { rmSync } from "node:fs"
import { join, resolve } from "node:path"
import { Effect } from "effect"
import {
  ContaminationFound,
  checkSplits,
  type DecontamReport,
  decontaminate,
  type SplitCheck,
  splitFamilies,
  splitSeed,
  type TaskTexts,
} from "../decontam/index.ts"
import {
  DIFFICULTIES,
  type Difficulty,
  FAMILIES,
  type GeneratedTask,
  generateTask,
  LADDER_FAMILIES,
  LADDER_OBSERVE_FAMILIES,
  OBSERVE_RUNG_COMMANDS,
  OBSERVE_RUNGS,
  type TaskFamily,
  type TaskMeta,
  TaskWriteFailed,
  taskId,
  writeTask,
} from "../synth/index.ts"

export type Rung = 1 | 2 | 3 | 4 | 5 | 6 | 7
export const RUNGS: ReadonlyArray<Rung> = [1, 2, 3, 4, 5, 6, 7]

/** The most commands a reference of the rung runs (rung 4's families: several, not counted). */
const RUNG_COMMANDS: Readonly<Record<Rung, number | undefined>> = {
  1: 1,
  2: 2,
  3: 3,
  4: undefined,
  ...OBSERVE_RUNG_COMMANDS,
}

/**
 * Agent turns an episode on `rungs` needs: the longest reference's commands and a turn to say
 * done, at least `floor` (what rung 4's multi-step families and a retry or two get).
 */
export const turnsFor = (rungs: ReadonlyArray<Rung>, floor: number): number =>
  Math.max(floor, ...rungs.map((r) => (RUNG_COMMANDS[r] ?? 0) + 1))

/** `--rungs obs`: every observation rung. */
export const OBSERVE_ALIAS = "obs"

/** Whether a rung's tasks need looking (an observation rung). */
export const isObserveRung = (rung: number): boolean => OBSERVE_RUNGS.some((r) => r === rung)

/**
 * `--rungs 1,3` (or `obs`, every observation rung of `allowed`) as rungs, each at most once and
 * each one of `allowed`; a RangeError names what was wrong and the valid names.
 */
export const parseRungs = (raw: string, allowed: ReadonlyArray<Rung> = RUNGS): Array<Rung> => {
  const observe = allowed.filter(isObserveRung)
  const valid = `${allowed.join(", ")}${observe.length > 0 ? `, or ${OBSERVE_ALIAS} (${observe.join(",")})` : ""}`
  const rungs: Array<Rung> = []
  for (const r of raw.split(",")) {
    const named =
      r.trim() === OBSERVE_ALIAS ? observe : allowed.filter((x) => String(x) === r.trim())
    if (named.length === 0 || named.some((rung) => rungs.includes(rung)))
      throw new RangeError(
        `--rungs takes ${valid}, separated by commas, each once; got ${JSON.stringify(raw)}`,
      )
    rungs.push(...named)
  }
  return rungs
}

/** Which set a task belongs to: train, in-distribution eval, or eval of a held-out family. */
export type LadderSet = "train" | "eval" | "ood"
export const LADDER_SETS: ReadonlyArray<LadderSet> = ["train", "eval", "ood"]

/**
 * The ladder families held out by default, one per rung; each is made of steps that train
 * families use in other combinations (copy-into-dir is the second step of dir-then-copy,
 * rename-then-append joins rename-file and append-line, backup-write-append extends
 * backup-then-write).
 */
export const DEFAULT_OOD_FAMILIES: ReadonlyArray<string> = [
  "copy-into-dir",
  "rename-then-append",
  "backup-write-append",
  // Observation rungs: pointer-copy's look is pointer-move's, its act a copy; count-then-copy
  // chains two trained steps in an order no train family does.
  "pointer-copy",
  "count-then-copy",
]

/** The top rung's split: the bundled corpus's (tasks/bundled/bundle.ts, seed 10, 3 held out). */
export const TOP_RUNG_SPLIT = { seed: 10, heldOut: 3 } as const

export interface LadderOptions {
  /** 0 <= seed < 1e6: train tasks use seed `seed`, eval and OOD tasks seed `1e6 + seed`. */
  readonly seed: number
  readonly trainPerFamily: number
  /**
   * The first `demosPerFamily` train tasks of each ladder family draw their names from the demo
   * pool (tasks/synth/ladder-pools.ts): the warm start's demonstrations, whose names leave out
   * one train name in four, so that RL meets train names no demonstration showed. Default
   * 0 (every train task draws from the whole train pool). At most trainPerFamily.
   */
  readonly demosPerFamily?: number
  /** In-distribution eval tasks per train family (rungs 1–3). */
  readonly evalPerFamily: number
  /** Eval tasks per held-out family; default evalPerFamily. */
  readonly oodPerFamily?: number
  /** Default [1, 2, 3]; add 4 for the multi-step families, 5–7 for the observation rungs. */
  readonly rungs?: ReadonlyArray<Rung>
  /** Ladder families held out of train (eval only); default DEFAULT_OOD_FAMILIES. */
  readonly oodFamilies?: ReadonlyArray<string>
  /** One difficulty for every task; default: easy, medium, hard in turn by task index. */
  readonly difficulty?: Difficulty
}

export interface LadderTask {
  readonly id: string
  readonly family: string
  readonly rung: Rung
  readonly set: LadderSet
  readonly seed: number
  readonly index: number
  readonly difficulty: Difficulty
  /** A train task drawn from the demo pool (LadderOptions.demosPerFamily). */
  readonly demo: boolean
  /** task.json's fields (split "train" for train, "eval" for eval and OOD). */
  readonly meta: TaskMeta
  readonly generated: GeneratedTask
}

export interface LadderSplits {
  readonly train: ReadonlyArray<LadderTask>
  readonly eval: ReadonlyArray<LadderTask>
  readonly ood: ReadonlyArray<LadderTask>
  /** Family names by role: in train (and in-distribution eval), or held out. */
  readonly families: {
    readonly train: ReadonlyArray<string>
    readonly ood: ReadonlyArray<string>
  }
}

/** The task set names written into task.json and used as directory names by writeLadder. */
export const LADDER_TASK_SETS: Readonly<Record<LadderSet, string>> = {
  train: "ladder-train",
  eval: "ladder-eval",
  ood: "ladder-ood",
}

/** A family's rung: its own for ladder families, 4 for the multi-step ones. */
export const rungOf = (family: TaskFamily): Rung => {
  const rung = family.rung ?? 4
  if (!RUNGS.some((r) => r === rung)) throw new RangeError(`${family.name}: rung ${rung}`)
  return rung as Rung
}

/** Every family the ladder can use, with its rung. */
export const ladderFamilies = (): ReadonlyArray<{
  readonly family: TaskFamily
  readonly rung: Rung
}> =>
  [...LADDER_FAMILIES, ...LADDER_OBSERVE_FAMILIES, ...FAMILIES].map((family) => ({
    family,
    rung: rungOf(family),
  }))

const count = (name: string, n: number) => {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`${name} must be a whole number >= 0`)
  return n
}

/** The train, in-distribution eval and OOD tasks of the ladder. Pure; throws on bad options. */
export const ladderSplits = (options: LadderOptions): LadderSplits => {
  const trainPer = count("trainPerFamily", options.trainPerFamily)
  const demoPer = count("demosPerFamily", options.demosPerFamily ?? 0)
  if (demoPer > trainPer)
    throw new RangeError(`demosPerFamily (${demoPer}) must be at most trainPerFamily (${trainPer})`)
  const evalPer = count("evalPerFamily", options.evalPerFamily)
  const oodPer = count("oodPerFamily", options.oodPerFamily ?? evalPer)
  const rungs = new Set<number>(options.rungs ?? [1, 2, 3])
  for (const r of rungs) if (!RUNGS.some((x) => x === r)) throw new RangeError(`no rung ${r}`)
  const trainSeed = splitSeed("train", options.seed)
  const evalSeed = splitSeed("eval", options.seed)
  const oodLadder = new Set(options.oodFamilies ?? DEFAULT_OOD_FAMILIES)
  for (const name of oodLadder)
    if (![...LADDER_FAMILIES, ...LADDER_OBSERVE_FAMILIES].some((f) => f.name === name))
      throw new RangeError(`${name} is not a ladder family`)
  const top = splitFamilies(
    FAMILIES.map((f) => f.name),
    TOP_RUNG_SPLIT,
  )
  const oodTop = new Set(top.heldOutFamilies)

  const make = (family: TaskFamily, set: LadderSet, index: number): LadderTask => {
    const seed = set === "train" ? trainSeed : evalSeed
    const difficulty =
      options.difficulty ?? (DIFFICULTIES[index % DIFFICULTIES.length] as Difficulty)
    const rung = rungOf(family)
    const demo = set === "train" && rung !== 4 && index < demoPer
    const id = taskId(family.name, difficulty, seed, index)
    return {
      id,
      family: family.name,
      rung,
      set,
      seed,
      index,
      difficulty,
      demo,
      meta: {
        id,
        taskSet: LADDER_TASK_SETS[set],
        family: family.name,
        difficulty,
        split: set === "train" ? "train" : "eval",
        tags: [...family.tags, difficulty, `rung-${rung}`],
      },
      generated: generateTask(family, seed, index, difficulty, demo ? "demo" : undefined),
    }
  }
  const train: Array<LadderTask> = []
  const evalTasks: Array<LadderTask> = []
  const ood: Array<LadderTask> = []
  const families = { train: [] as Array<string>, ood: [] as Array<string> }
  for (const { family, rung } of ladderFamilies()) {
    if (!rungs.has(rung)) continue
    const heldOut = rung === 4 ? oodTop.has(family.name) : oodLadder.has(family.name)
    if (heldOut) {
      families.ood.push(family.name)
      for (let i = 0; i < oodPer; i++) ood.push(make(family, "ood", i))
      continue
    }
    families.train.push(family.name)
    for (let i = 0; i < trainPer; i++) train.push(make(family, "train", i))
    if (rung !== 4) for (let i = 0; i < evalPer; i++) evalTasks.push(make(family, "eval", i))
  }
  return { train, eval: evalTasks, ood, families }
}

/** What decontamination compares, straight from the generated texts. */
export const ladderTexts = (task: LadderTask): TaskTexts => ({
  id: task.id,
  dir: "",
  family: task.family,
  seed: task.seed,
  instruction: task.generated.instruction,
  solution: task.generated.solution,
  tests: task.generated.tests,
})

export interface LadderCheck {
  /** Eval and OOD tasks against train. */
  readonly report: DecontamReport
  readonly split: SplitCheck
}

/** The n-gram decontamination and split check `t1 tasks decontam` runs, in process. */
export const ladderDecontam = (
  splits: LadderSplits,
  options: { readonly n?: number; readonly threshold?: number } = {},
): LadderCheck => {
  const train = splits.train.map(ladderTexts)
  const held = [...splits.eval, ...splits.ood].map(ladderTexts)
  return { report: decontaminate(train, held, options), split: checkSplits(train, held) }
}

export interface WrittenLadder {
  readonly splits: LadderSplits
  /** Absolute directories: `<out>/ladder-train`, `<out>/ladder-eval`, `<out>/ladder-ood`. */
  readonly dirs: Readonly<Record<LadderSet, string>>
  readonly check: LadderCheck
}

/**
 * Writes the ladder in the native layout: `<out>/ladder-train/<id>/`, `<out>/ladder-eval/<id>/`,
 * `<out>/ladder-ood/<id>/`, replacing those three directories (a set with no task gets none;
 * nothing else under `out` is touched). Fails with
 * ContaminationFound, before writing anything, when the eval or OOD tasks are not
 * decontaminated from train.
 */
export const writeLadder = (
  out: string,
  options: LadderOptions,
): Effect.Effect<WrittenLadder, TaskWriteFailed | ContaminationFound> =>
  Effect.gen(function* () {
    const splits = ladderSplits(options)
    const check = ladderDecontam(splits)
    if (!check.report.passed || check.split.violations.length > 0)
      return yield* new ContaminationFound({
        max: check.report.max,
        threshold: check.report.threshold,
        flagged: check.report.flagged,
        violations: check.split.violations,
      })
    const root = resolve(out)
    const dirs = {
      train: join(root, LADDER_TASK_SETS.train),
      eval: join(root, LADDER_TASK_SETS.eval),
      ood: join(root, LADDER_TASK_SETS.ood),
    }
    yield* Effect.try({
      try: () => {
        for (const set of LADDER_SETS) rmSync(dirs[set], { recursive: true, force: true })
      },
      catch: (cause) =>
        new TaskWriteFailed({
          path: root,
          reason: cause instanceof Error ? cause.message : String(cause),
        }),
    })
    for (const set of LADDER_SETS)
      for (const task of splits[set])
        yield* writeTask(join(dirs[set], task.id), task.generated, task.meta)
    return { splits, dirs, check }
  })
