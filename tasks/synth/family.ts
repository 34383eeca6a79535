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
  /** A pytest file (tests/test_outputs.py); each test function checks one aspect. */
  readonly tests: string
  /** Number of test functions in `tests`. */
  readonly expectedTests: number
  /** Overrides the default agent timeout for the difficulty (long-horizon families). */
  readonly agentTimeoutSec?: number
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
  readonly generate: (rng: Rng, difficulty: Difficulty) => GeneratedTask
}
