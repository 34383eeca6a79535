import { create } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { JobKind, JobSpecSchema, TaskSplit } from "../../proto/index.ts"
import type { Task } from "../../tasks/index.ts"
import { selectTasks } from "./plan.ts"

/** Only what selectTasks reads of a loaded task. */
const task = (id: string, split: Task["split"]) => ({ id, taskSet: "set", split }) as Task

const LOADED = [task("c", "eval"), task("a", "train"), task("b", "eval"), task("d", "train")]

const select = (init: { split?: TaskSplit; taskIds?: string[] }) =>
  Effect.runPromise(
    Effect.result(
      selectTasks(LOADED, create(JobSpecSchema, { kind: JobKind.EVAL, taskSet: "set", ...init })),
    ),
  )

const ids = async (init: { split?: TaskSplit; taskIds?: string[] }) => {
  const r = await select(init)
  if (r._tag === "Failure") throw new Error(r.failure.reason)
  return r.success.map((t) => t.id)
}

describe("selectTasks: the spec's split and task_ids choose the job's tasks", () => {
  it("split: only that split's tasks, in key order; unspecified: all of them", async () => {
    expect(await ids({ split: TaskSplit.TRAIN })).toEqual(["a", "d"])
    expect(await ids({ split: TaskSplit.EVAL })).toEqual(["b", "c"])
    expect(await ids({})).toEqual(["a", "b", "c", "d"])
  })

  it("task_ids: exactly those, in the listed order, whatever the split", async () => {
    expect(await ids({ taskIds: ["d", "b"], split: TaskSplit.EVAL })).toEqual(["d", "b"])
  })

  it("a split with no tasks fails the job naming spec.split", async () => {
    const r = await Effect.runPromise(
      Effect.result(
        selectTasks(
          [task("a", "train")],
          create(JobSpecSchema, { kind: JobKind.EVAL, taskSet: "set", split: TaskSplit.EVAL }),
        ),
      ),
    )
    expect(r._tag === "Failure" && r.failure).toMatchObject({
      fieldPath: "spec.split",
      reason: 'no eval tasks in "set"',
    })
  })
})
