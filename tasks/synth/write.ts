import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { TaskWriteFailed } from "./errors.ts"
import type { Difficulty, GeneratedTask } from "./family.ts"

export interface TaskMeta {
  readonly id: string
  readonly taskSet: string
  readonly family: string
  readonly difficulty: Difficulty
  readonly split: "train" | "eval"
  readonly tags: ReadonlyArray<string>
}

export const TASK_IMAGE = "t1-base:latest"
export const TASK_WORKDIR = "/app"
const AGENT_TIMEOUT_SEC: Record<Difficulty, number> = { easy: 300, medium: 600, hard: 900 }
const VERIFIER_TIMEOUT_SEC = 60

/** task.json as tasks/NATIVE.md specifies it, keys in a fixed order. */
export const taskJson = (generated: GeneratedTask, meta: TaskMeta): string => {
  const fields: ReadonlyArray<
    readonly [string, string | number | boolean | ReadonlyArray<string>]
  > = [
    ["id", meta.id],
    ["task_set", meta.taskSet],
    ["family", meta.family],
    ["difficulty", meta.difficulty],
    ["split", meta.split],
    ["tags", meta.tags],
    ["image", TASK_IMAGE],
    ["workdir", TASK_WORKDIR],
    ["allow_internet", false],
    ["cpus", 1],
    ["memory_mb", 1024],
    ["agent_timeout_sec", generated.agentTimeoutSec ?? AGENT_TIMEOUT_SEC[meta.difficulty]],
    ["verifier_timeout_sec", VERIFIER_TIMEOUT_SEC],
    ["expected_tests", generated.expectedTests],
  ]
  // The layout Biome's JSON formatter keeps (short arrays on one line), so `biome check` passes
  // on committed task sets.
  const value = (v: string | number | boolean | ReadonlyArray<string>): string =>
    typeof v === "object" ? `[${v.map((s) => JSON.stringify(s)).join(", ")}]` : JSON.stringify(v)
  return `{\n${fields.map(([k, v]) => `  ${JSON.stringify(k)}: ${value(v)}`).join(",\n")}\n}\n`
}

/**
 * Writes one task in the native layout (tasks/NATIVE.md): task.json, instruction.md, setup.sh,
 * tests/test_outputs.py (or tests/test.sh), solution/solve.sh. Replaces whatever was in `dir`.
 */
export const writeTask = (
  dir: string,
  generated: GeneratedTask,
  meta: TaskMeta,
): Effect.Effect<void, TaskWriteFailed> =>
  Effect.try({
    try: () => {
      rmSync(dir, { recursive: true, force: true })
      mkdirSync(join(dir, "tests"), { recursive: true })
      mkdirSync(join(dir, "solution"), { recursive: true })
      writeFileSync(join(dir, "task.json"), taskJson(generated, meta))
      const instruction = generated.instruction.endsWith("\n")
        ? generated.instruction
        : `${generated.instruction}\n`
      writeFileSync(join(dir, "instruction.md"), instruction)
      writeFileSync(join(dir, "setup.sh"), generated.setup)
      if (generated.testsFormat === "script") {
        writeFileSync(join(dir, "tests", "test.sh"), generated.tests)
        chmodSync(join(dir, "tests", "test.sh"), 0o755)
      } else writeFileSync(join(dir, "tests", "test_outputs.py"), generated.tests)
      writeFileSync(join(dir, "solution", "solve.sh"), generated.solution)
      chmodSync(join(dir, "setup.sh"), 0o755)
      chmodSync(join(dir, "solution", "solve.sh"), 0o755)
    },
    catch: (cause) =>
      new TaskWriteFailed({
        path: dir,
        reason: cause instanceof Error ? cause.message : String(cause),
      }),
  })
