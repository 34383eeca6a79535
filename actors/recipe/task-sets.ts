/**
 * The recipe's task sets: the ladder of a seed written to a directory (or task sets of the
 * user's own), split into the warm start's demonstrations, the RL pool and the held-out sets.
 * `openLadderRecipe` (exp:learn) and `t1 up` (through jobs) draw the same tasks from it.
 */
import { Effect } from "effect"
import { loadTasks, type Task } from "../../tasks/index.ts"
import { type LadderTask, writeLadder } from "../../tasks/ladder/index.ts"
import type { LadderRecipeOptions } from "./ladder.ts"

/** The recipe's settings that choose its tasks. */
export type TaskSetOptions = Pick<
  LadderRecipeOptions,
  "seed" | "demos" | "trainPerFamily" | "evalPerFamily" | "rungs" | "demoPool" | "taskDirs"
>

export interface RecipeTaskSets {
  /** Directories of the train, held-out and (ladder only) held-out-family sets. */
  readonly dirs: { readonly train: string; readonly eval: string; readonly ood?: string }
  readonly train: ReadonlyArray<Task>
  readonly heldIn: ReadonlyArray<Task>
  readonly heldOut: ReadonlyArray<Task>
  /** The warm start's tasks (reference solutions played as demonstrations). */
  readonly demos: ReadonlyArray<Task>
  /** The RL pool: every other train task (all of them when that leaves none). */
  readonly pool: ReadonlyArray<Task>
  /** The ladder tasks by id (rung, instruction); empty for task sets of the user's own. */
  readonly ladder: ReadonlyMap<string, LadderTask>
  readonly rungOf: (taskId: string) => number
}

const byId = (a: Task, b: Task) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/**
 * Writes the ladder of `o.seed` under `dir` (or reads `o.taskDirs`) and splits it: the
 * demonstrations are the first `demos` train tasks of each family (ladder: by index; own sets:
 * by id, those with a reference solution).
 */
export const recipeTaskSets = (o: TaskSetOptions, dir: string) =>
  Effect.gen(function* () {
    const ladder = new Map<string, LadderTask>()
    let dirs: RecipeTaskSets["dirs"]
    let demoIds: Set<string>
    if (o.taskDirs === undefined) {
      const written = yield* writeLadder(dir, {
        seed: o.seed,
        trainPerFamily: o.trainPerFamily,
        evalPerFamily: o.evalPerFamily,
        rungs: o.rungs,
        demosPerFamily: o.demoPool ? o.demos : 0,
      })
      for (const t of [...written.splits.train, ...written.splits.eval, ...written.splits.ood])
        ladder.set(t.id, t)
      dirs = written.dirs
      demoIds = new Set(written.splits.train.filter((t) => t.index < o.demos).map((t) => t.id))
    } else {
      dirs = o.taskDirs
      demoIds = new Set()
    }
    const train = yield* loadTasks([dirs.train])
    const heldIn = yield* loadTasks([dirs.eval])
    const heldOut = dirs.ood === undefined ? [] : yield* loadTasks([dirs.ood])
    if (o.taskDirs !== undefined) {
      const taken = new Map<string, number>()
      for (const task of [...train].sort(byId)) {
        const n = taken.get(task.family) ?? 0
        if (task.solution === undefined || n >= o.demos) continue
        taken.set(task.family, n + 1)
        demoIds.add(task.id)
      }
    }
    const demos = train.filter((t) => demoIds.has(t.id))
    const rest = train.filter((t) => !demoIds.has(t.id))
    const sets: RecipeTaskSets = {
      dirs,
      train,
      heldIn,
      heldOut,
      demos,
      pool: rest.length > 0 ? rest : train,
      ladder,
      rungOf: (id) => ladder.get(id)?.rung ?? 0,
    }
    return sets
  })
