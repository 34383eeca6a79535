import type { Rng } from "./rng.ts"

export const DIFFICULTIES = ["easy", "medium", "hard"] as const
export type Difficulty = (typeof DIFFICULTIES)[number]

/** One synthesised task, before it is written to disk in the native layout (tasks/NATIVE.md). */
export interface GeneratedTask {
  /** Shown to the agent verbatim; paths are relative to the workdir /app. */
  readonly instruction: string
  /** Bash, run with cwd /app before the agent starts; creates the input files. */
  readonly setup: string
  /** Bash, run with cwd /app: the reference solution. */
  readonly solution: string
  /**
   * The tests, each checking one aspect: a pytest file (tests/test_outputs.py) or, with
   * `testsFormat: "script"`, a bash script writing a CTRF report (tests/test.sh).
   */
  readonly tests: string
  /** Default "pytest". */
  readonly testsFormat?: "pytest" | "script"
  /** Number of tests in `tests`. */
  readonly expectedTests: number
  /** Overrides the default agent timeout for the difficulty (long-horizon families). */
  readonly agentTimeoutSec?: number
  /**
   * The names and values the task was built from (ladder families), so that splits can be
   * checked for disjointness; not written to disk.
   */
  readonly bindings?: TaskBindings
}

/** What a task names: files, folders, words and values, exactly as the instruction writes them. */
export interface TaskBindings {
  readonly files: ReadonlyArray<string>
  readonly dirs: ReadonlyArray<string>
  readonly words: ReadonlyArray<string>
  readonly values: ReadonlyArray<string>
}

/**
 * Which vocabulary a task draws its names and values from. Ladder families keep a train pool and
 * a disjoint eval pool; the synthesiser picks the pool from the seed's range (tasks/decontam
 * splits: seeds in [1e6, 2e6) are eval seeds), so that an eval-range seed also gives unseen names.
 * The demo pool is a part of the train pool: the names a warm start's demonstrations use, so that
 * RL meets train names the demonstrations never showed (tasks/ladder, `demosPerFamily`).
 * Families without pools ignore it.
 */
export type Pool = "demo" | "train" | "eval"

export interface GenerateContext {
  readonly pool: Pool
  /**
   * Observation families (ladder-observe.ts): another hidden world behind the same instruction —
   * what the task's looks reveal is drawn again, nothing the instruction says changes. Tests use
   * it to show a task cannot be solved without looking. Other families ignore it.
   */
  readonly hiddenSalt?: string
}

/**
 * A task family: a small module that turns (rng, difficulty) into a task. Families are looked up
 * by name in the registry (families/index.ts); adding one never touches the synthesiser.
 */
export interface TaskFamily {
  /** kebab-case, unique; part of every task id. */
  readonly name: string
  readonly summary: string
  /** The first tag is the family's category (file-ops, text, csv, json, …). */
  readonly tags: ReadonlyArray<string>
  readonly generate: (rng: Rng, difficulty: Difficulty, context: GenerateContext) => GeneratedTask
  /**
   * The family's rung on the task ladder (tasks/ladder): 1, 2, 3 = tasks of that many one-line
   * commands; the multi-step families leave it unset and count as the top rung.
   */
  readonly rung?: number
}
