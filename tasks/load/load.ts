import { readdir } from "node:fs/promises"
import { join } from "node:path"
import { Effect } from "effect"
import type { Task, TaskFormat } from "../task.ts"
import { type LoadTaskOptions, taskContext } from "./context.ts"
import { TaskLoadError, TaskLoadErrors } from "./errors.ts"
import { loadNative } from "./native.ts"
import { loadTb1 } from "./tb1.ts"
import { loadTb2 } from "./tb2.ts"
import { pathKind } from "./text.ts"

/** The file that says a directory is a task, and so its format; the first one present wins. */
export const TASK_CONFIG_FILES: ReadonlyArray<readonly [string, TaskFormat]> = [
  ["task.toml", "tb2"],
  ["task.yaml", "tb1"],
  ["task.json", "native"],
]

const LOADERS = { tb2: loadTb2, tb1: loadTb1, native: loadNative } as const

export const detectTaskFormat = (dir: string): Effect.Effect<TaskFormat | undefined> =>
  Effect.gen(function* () {
    for (const [file, format] of TASK_CONFIG_FILES)
      if ((yield* pathKind(join(dir, file))) === "file") return format
    return undefined
  })

/** Loads one task directory, whichever its format (task.toml: TB2, task.yaml: TB1, task.json: native). */
export const loadTask = (
  dir: string,
  options: LoadTaskOptions = {},
): Effect.Effect<Task, TaskLoadError> =>
  Effect.gen(function* () {
    const kind = yield* pathKind(dir)
    if (kind !== "directory")
      return yield* new TaskLoadError({
        file: dir,
        expected: "a task directory",
        got: kind === undefined ? "nothing (it does not exist)" : "a file",
      })
    const format = yield* detectTaskFormat(dir)
    if (format === undefined)
      return yield* new TaskLoadError({
        file: dir,
        expected:
          "a task directory with task.toml (Terminal-Bench 2), task.yaml (Terminal-Bench 1) or task.json (t1 native)",
        got: "none of them",
      })
    return yield* LOADERS[format](taskContext(dir, options))
  })

/** Files only a task has: a directory holding one is reported when its config file is missing. */
const TASK_MARKERS = [
  "instruction.md",
  "run-tests.sh",
  "solution.sh",
  "solution.yaml",
  join("solution", "solve.sh"),
]

/** How deep below a given directory tasks are looked for (`set/split/task` is depth 3). */
const MAX_DEPTH = 3

/**
 * The task directories a path stands for: the path itself when it is (or looks like) a task,
 * else every task below it, directories that look like tasks included so that a missing config
 * file is reported rather than skipped. Hidden directories and node_modules are not entered.
 */
export const findTaskDirs = (root: string): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function* () {
    const found: string[] = []
    const visit = (dir: string, depth: number): Effect.Effect<void> =>
      Effect.gen(function* () {
        if ((yield* detectTaskFormat(dir)) !== undefined) return void found.push(dir)
        for (const marker of TASK_MARKERS)
          if ((yield* pathKind(join(dir, marker))) !== undefined) return void found.push(dir)
        if (depth >= MAX_DEPTH) return
        const entries = yield* Effect.promise(() =>
          readdir(dir, { withFileTypes: true }).catch(() => []),
        )
        const subdirs = entries
          .filter((e) => e.isDirectory() && !e.name.startsWith(".") && e.name !== "node_modules")
          .map((e) => e.name)
          .sort()
        for (const name of subdirs) yield* visit(join(dir, name), depth + 1)
      })
    if ((yield* pathKind(root)) !== "directory") return [root]
    yield* visit(root, 0)
    return found
  })

export interface SettledTasks {
  /** Loaded tasks, in the order of the paths given, each path's tasks sorted by directory. */
  readonly tasks: ReadonlyArray<Task>
  /** One error per task that failed, in the same order; a path with no tasks at all is one too. */
  readonly failures: ReadonlyArray<TaskLoadError>
}

/**
 * Loads every task under the given paths (each a task directory, or a directory of tasks) and
 * reports each failure instead of stopping at the first: what a CLI prints as a list. A second
 * task with the same id in the same task set is a failure too.
 */
export const loadTasksSettled = (
  paths: ReadonlyArray<string>,
  options: LoadTaskOptions = {},
): Effect.Effect<SettledTasks> =>
  Effect.gen(function* () {
    const tasks: Task[] = []
    const failures: TaskLoadError[] = []
    const seen = new Map<string, string>()
    for (const path of paths) {
      const dirs = yield* findTaskDirs(path)
      if (dirs.length === 0) {
        failures.push(
          new TaskLoadError({
            file: path,
            expected: "a task directory, or a directory of tasks",
            got: "no task.toml, task.yaml or task.json in it or below it",
          }),
        )
        continue
      }
      const results = yield* Effect.forEach(dirs, (dir) => Effect.result(loadTask(dir, options)), {
        concurrency: 8,
      })
      for (const [index, result] of results.entries()) {
        if (result._tag === "Failure") {
          failures.push(result.failure)
          continue
        }
        const task = result.success
        const key = `${task.taskSet}/${task.id}`
        const first = seen.get(key)
        if (first === undefined) {
          seen.set(key, dirs[index] ?? task.dir)
          tasks.push(task)
        } else {
          failures.push(
            new TaskLoadError({
              file: dirs[index] ?? task.dir,
              field: "id",
              expected: `an id unique in task set ${task.taskSet}`,
              got: `${JSON.stringify(task.id)}, which ${first} has too`,
            }),
          )
        }
      }
    }
    return { tasks, failures }
  })

/** Like loadTasksSettled, but all or nothing: any failure fails the whole, listing every one. */
export const loadTasks = (
  paths: ReadonlyArray<string>,
  options: LoadTaskOptions = {},
): Effect.Effect<ReadonlyArray<Task>, TaskLoadErrors> =>
  Effect.flatMap(loadTasksSettled(paths, options), ({ tasks, failures }) =>
    failures.length === 0
      ? Effect.succeed(tasks)
      : Effect.fail(new TaskLoadErrors({ errors: failures })),
  )
