import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { loadTasks, type TaskLoadErrors } from "../load/index.ts"
import type { Task } from "../task.ts"
import { TaskReadFailed } from "./errors.ts"

/** The texts of one task that decontamination compares, plus what identifies it. */
export interface TaskTexts {
  readonly id: string
  readonly dir: string
  /** "" when the task does not say. */
  readonly family: string
  /** Parsed from a synthesised task's id (`…-s<seed>-<index>`); undefined otherwise. */
  readonly seed: number | undefined
  readonly instruction: string
  readonly solution: string
  readonly tests: string
}

/** Every file under `dir` (text files under 1 MB), in a stable order, concatenated. */
const readTree = (dir: string): string => {
  if (!existsSync(dir)) return ""
  const parts: Array<string> = []
  const walk = (d: string) => {
    const entries = readdirSync(d, { withFileTypes: true }).sort((a, b) =>
      a.name < b.name ? -1 : 1,
    )
    for (const entry of entries) {
      const path = join(d, entry.name)
      if (entry.isDirectory() && entry.name !== "__pycache__") walk(path)
      else if (entry.isFile() && statSync(path).size < 1_000_000)
        parts.push(readFileSync(path, "utf8"))
    }
  }
  walk(dir)
  return parts.join("\n")
}

export const seedOfId = (id: string): number | undefined => {
  const seed = /-s(\d+)-\d+$/.exec(id)?.[1]
  return seed === undefined ? undefined : Number(seed)
}

/** A loaded task's instruction, reference solution and test files. */
export const taskTexts = (task: Task): Effect.Effect<TaskTexts, TaskReadFailed> =>
  Effect.try({
    try: () => ({
      id: task.id,
      dir: task.dir,
      family: task.family,
      seed: seedOfId(task.id),
      instruction: task.instruction,
      solution: task.solution === undefined ? "" : readFileSync(task.solution, "utf8"),
      tests: readTree(task.verifier.testsDir),
    }),
    catch: (cause) =>
      new TaskReadFailed({
        path: task.dir,
        reason: cause instanceof Error ? cause.message : String(cause),
      }),
  })

/**
 * The tasks under `paths` (any format the loaders know: t1 native, Terminal-Bench 1 and 2),
 * as texts to compare.
 */
export const readTaskSet = (
  paths: ReadonlyArray<string>,
): Effect.Effect<ReadonlyArray<TaskTexts>, TaskLoadErrors | TaskReadFailed> =>
  Effect.flatMap(loadTasks(paths), (tasks) => Effect.forEach(tasks, taskTexts))
