import { readFile } from "node:fs/promises"
import { create } from "@bufbuild/protobuf"
import { Data, Effect } from "effect"
import { TaskFormat, type Task as TaskMessage, TaskSchema, TaskSplit } from "../proto/index.ts"
import { packDirectory, packFiles } from "../services/tar/index.ts"
import type { Task } from "./task.ts"

export class TaskWireError extends Data.TaggedError("TaskWireError")<{
  readonly task: string
  readonly reason: string
}> {
  override get message(): string {
    return `task ${this.task}: ${this.reason}`
  }
}

const FORMAT = { tb2: TaskFormat.TB2, tb1: TaskFormat.TB1, native: TaskFormat.NATIVE } as const
const SPLIT = {
  train: TaskSplit.TRAIN,
  eval: TaskSplit.EVAL,
  unspecified: TaskSplit.UNSPECIFIED,
} as const

/**
 * The wire form of a loaded task, self-contained: tests (and the reference solution) travel as
 * inline tar archives, the setup script as text, so a sampler or verifier needs no task store.
 * `image` is the sandbox image the task resolved to on this machine (see resolveTaskImage).
 */
export const taskToWire = (task: Task, image: string): Effect.Effect<TaskMessage, TaskWireError> =>
  Effect.tryPromise({
    try: async () => {
      const v = task.verifier
      const tests = await packDirectory(
        v.testsDir,
        v.script !== undefined && v.scriptPath !== undefined
          ? { name: v.script, path: v.scriptPath }
          : undefined,
      )
      const setupScript = task.environment.setupScript
        ? await readFile(task.environment.setupScript, "utf8")
        : ""
      const solution = task.solution
        ? await packFiles({ "solve.sh": await readFile(task.solution, "utf8") }, 0o755)
        : undefined
      return create(TaskSchema, {
        id: task.id,
        taskSet: task.taskSet,
        instruction: task.instruction,
        format: FORMAT[task.format],
        dockerImage: image,
        resources: {
          cpus: task.environment.cpus,
          memoryMb: task.environment.memoryMb,
          storageMb: task.environment.storageMb,
        },
        allowInternet: task.environment.allowInternet,
        workdir: task.environment.workdir,
        agentTimeoutSec: task.agentTimeoutSec,
        verifierTimeoutSec: v.timeoutSec,
        testFiles: { source: { case: "tar", value: tests.tar } },
        tags: [...task.tags],
        split: SPLIT[task.split],
        testCommand:
          v.kind === "script" && v.script !== undefined ? `bash ${v.testDir}/${v.script}` : "",
        testDir: v.testDir,
        ...(solution
          ? { solutionFiles: { source: { case: "tar" as const, value: solution } } }
          : {}),
        expectedTestCount: v.expectedTests,
        family: task.family,
        setupScript,
      })
    },
    catch: (cause) => new TaskWireError({ task: task.id, reason: String(cause) }),
  })
