import { homedir } from "node:os"
import { basename, dirname, join, resolve } from "node:path"
import type { TaskSplit } from "../task.ts"

export interface LoadTaskOptions {
  /** Task set for tasks whose files name none; default: the name of the directory above the task. */
  readonly taskSet?: string
  /**
   * Split for formats that carry none (TB1, TB2; default "unspecified"). A native task declares
   * its own, and a different one here is an error rather than a silent relabelling.
   */
  readonly split?: TaskSplit
  /** Where derived files go (TB1 solution.yaml → bash); default T1_TASK_CACHE or ~/.cache/t1/tasks. */
  readonly cacheDir?: string
}

/** One task directory being loaded: where it is, and what the caller said about it. */
export interface TaskContext {
  /** As the caller spelled it: what error messages show. */
  readonly dir: string
  /** Absolute: what the Task holds. */
  readonly absoluteDir: string
  readonly id: string
  readonly taskSet: string
  readonly split: TaskSplit | undefined
  readonly cacheDir: string
  /** A path inside the task for messages: `tasks/x/task.toml`. */
  readonly shown: (...parts: ReadonlyArray<string>) => string
  /** The same path, absolute. */
  readonly path: (...parts: ReadonlyArray<string>) => string
}

export const defaultTaskCacheDir = (): string =>
  process.env.T1_TASK_CACHE ?? join(homedir(), ".cache", "t1", "tasks")

export const taskContext = (dir: string, options: LoadTaskOptions = {}): TaskContext => {
  const absoluteDir = resolve(dir)
  return {
    dir,
    absoluteDir,
    id: basename(absoluteDir),
    taskSet: options.taskSet ?? basename(dirname(absoluteDir)),
    split: options.split,
    cacheDir: options.cacheDir ?? defaultTaskCacheDir(),
    shown: (...parts) => join(dir, ...parts),
    path: (...parts) => join(absoluteDir, ...parts),
  }
}
