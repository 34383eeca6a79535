/** t1's own format, specified in tasks/NATIVE.md: every field is checked, unknown ones refused. */
import { Effect } from "effect"
import { BASE_IMAGE } from "../base-image.ts"
import type { Task } from "../task.ts"
import type { TaskContext } from "./context.ts"
import { TaskLoadError } from "./errors.ts"
import { ConfigTable } from "./fields.ts"
import { optionalFile, readInstruction, requireDirectory } from "./layout.ts"
import { parseJson, readUtf8 } from "./text.ts"

export const NATIVE_FIELDS = [
  "id",
  "task_set",
  "family",
  "difficulty",
  "split",
  "tags",
  "image",
  "workdir",
  "allow_internet",
  "cpus",
  "memory_mb",
  "agent_timeout_sec",
  "verifier_timeout_sec",
  "expected_tests",
] as const

/** The test script of a script-verified native task, in tests/. */
const TEST_SCRIPT = "test.sh"

/** Native tasks carry no storage setting; this is what their sandboxes get. */
const STORAGE_MB = 10240

export const loadNative = (ctx: TaskContext): Effect.Effect<Task, TaskLoadError> =>
  Effect.gen(function* () {
    const file = ctx.shown("task.json")
    const config = yield* ConfigTable.root(
      file,
      "json",
      yield* parseJson(file, yield* readUtf8(file)),
    )
    yield* config.rejectUnknown(NATIVE_FIELDS)

    const split = yield* config.required(
      "split",
      'one of "train", "eval"',
      config.oneOf("split", ["train", "eval"]),
    )
    if (ctx.split !== undefined && ctx.split !== split)
      return yield* new TaskLoadError({
        file,
        field: "split",
        expected: `"${ctx.split}", the split this task was loaded as`,
        got: JSON.stringify(split),
      })
    const id =
      (yield* config.read("id", "a task id (non-empty, no slashes or spaces)", (v) =>
        typeof v === "string" && /^[^\s/\\]+$/.test(v) ? v : undefined,
      )) ?? ctx.id
    const positiveInt = (key: string) => config.positiveNumber(key, { integer: true })
    const taskSet = (yield* config.nonEmptyString("task_set")) ?? ctx.taskSet
    const family = (yield* config.string("family")) ?? ""
    const difficulty = (yield* config.oneOf("difficulty", ["easy", "medium", "hard"])) ?? "medium"
    const tags = (yield* config.strings("tags")) ?? []
    const image = (yield* config.nonEmptyString("image")) ?? BASE_IMAGE
    const workdir = (yield* config.absolutePath("workdir")) ?? "/app"
    const allowInternet = (yield* config.boolean("allow_internet")) ?? false
    const cpus = (yield* config.positiveNumber("cpus")) ?? 1
    const memoryMb = (yield* config.positiveNumber("memory_mb")) ?? 1024
    const agentTimeoutSec = (yield* positiveInt("agent_timeout_sec")) ?? 600
    const verifierTimeoutSec = (yield* positiveInt("verifier_timeout_sec")) ?? 60
    const expectedTests = (yield* config.nonNegativeInteger("expected_tests")) ?? 0

    const instruction = yield* readInstruction(ctx.shown("instruction.md"))
    yield* requireDirectory(ctx.shown("tests"), "a directory with the task's tests")
    // tests/test.sh, when there, is the verifier (as in the Harbor layout): it writes a CTRF
    // report or a reward file; else pytest runs the test files.
    const script = yield* optionalFile(ctx.path("tests", TEST_SCRIPT))
    return {
      id,
      taskSet,
      format: "native",
      dir: ctx.absoluteDir,
      instruction,
      difficulty,
      tags,
      family,
      split,
      agentTimeoutSec,
      environment: {
        dockerImage: image,
        buildContext: undefined,
        dockerfile: undefined,
        cpus,
        memoryMb,
        storageMb: STORAGE_MB,
        allowInternet,
        workdir,
        setupScript: yield* optionalFile(ctx.path("setup.sh")),
      },
      verifier: {
        testsDir: ctx.path("tests"),
        testDir: "/tests",
        ...(script === undefined
          ? { kind: "pytest" as const, script: undefined, scriptPath: undefined }
          : { kind: "script" as const, script: TEST_SCRIPT, scriptPath: script }),
        parser: undefined,
        timeoutSec: verifierTimeoutSec,
        expectedTests,
      },
      solution: yield* optionalFile(ctx.path("solution", "solve.sh")),
    } satisfies Task
  })
