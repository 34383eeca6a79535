/**
 * Terminal-Bench 1 tasks:
 *
 *   task.yaml            instruction (or `descriptions: [{key: base, description}]`), difficulty,
 *                        tags, max_agent_timeout_sec (360), max_test_timeout_sec (60),
 *                        parser_name (pytest), run_tests_in_same_shell, author_*, category
 *   Dockerfile           the environment, built with the task directory as context…
 *   docker-compose.yaml  …unless the client service names another context or Dockerfile
 *   run-tests.sh         the verifier's entry point, copied to /tests beside the tests ($TEST_DIR)
 *   tests/               the test files
 *   solution.sh          the reference solution, or solution.yaml keystrokes (see keystrokes.ts)
 */
import { join } from "node:path"
import { Effect } from "effect"
import type { Task } from "../task.ts"
import { readCompose } from "./compose.ts"
import type { TaskContext } from "./context.ts"
import { TaskLoadError } from "./errors.ts"
import { ConfigTable } from "./fields.ts"
import { keystrokesToBash, writeSolutionScript } from "./keystrokes.ts"
import {
  countTestFunctions,
  dockerfileWorkdir,
  optionalFile,
  requireDirectory,
  requireFile,
} from "./layout.ts"
import { parseYaml, readUtf8 } from "./text.ts"

const DEFAULTS = {
  agentTimeoutSec: 360,
  testTimeoutSec: 60,
  parser: "pytest",
  cpus: 1,
  memoryMb: 2048,
  storageMb: 10240,
  allowInternet: true,
  workdir: "/app",
} as const

/** `instruction`, else the `base` entry (or the first) of `descriptions`. */
const instructionOf = (config: ConfigTable): Effect.Effect<string, TaskLoadError> =>
  Effect.gen(function* () {
    const instruction = yield* config.nonEmptyString("instruction")
    if (instruction !== undefined) return instruction
    const descriptions = yield* config.tables("descriptions")
    const chosen = descriptions?.find((d) => d.values.key === "base") ?? descriptions?.[0]
    if (chosen === undefined)
      return yield* config.error(
        "instruction",
        'the instruction (a string), or a descriptions list with a "base" entry',
      )
    yield* chosen.string("key")
    return yield* chosen.required(
      "description",
      "a non-empty string",
      chosen.nonEmptyString("description"),
    )
  })

/** solution.sh as is; solution.yaml converted to a script in the cache (or none, with a warning). */
const solutionOf = (ctx: TaskContext): Effect.Effect<string | undefined, TaskLoadError> =>
  Effect.gen(function* () {
    const script = yield* optionalFile(ctx.path("solution.sh"))
    if (script !== undefined) return script
    const keystrokes = yield* optionalFile(ctx.path("solution.yaml"))
    if (keystrokes === undefined) return undefined
    const file = ctx.shown("solution.yaml")
    const converted = yield* keystrokesToBash(file, yield* parseYaml(file, yield* readUtf8(file)))
    if (converted.kind === "unsupported") {
      yield* Effect.logWarning(`${file}: no reference solution: ${converted.reason}`)
      return undefined
    }
    return yield* writeSolutionScript(ctx.cacheDir, ctx.id, keystrokes, converted.text).pipe(
      Effect.catch((error) =>
        Effect.as(
          Effect.logWarning(`${file}: no reference solution: writing its script failed`, error),
          undefined,
        ),
      ),
    )
  })

export const loadTb1 = (ctx: TaskContext): Effect.Effect<Task, TaskLoadError> =>
  Effect.gen(function* () {
    const configFile = ctx.shown("task.yaml")
    const text = yield* readUtf8(configFile)
    const config = yield* ConfigTable.root(configFile, "yaml", yield* parseYaml(configFile, text))
    const instruction = yield* instructionOf(config)
    const difficulty =
      (yield* config.oneOf("difficulty", ["easy", "medium", "hard", "unknown"])) ?? "unknown"
    const tags = (yield* config.strings("tags")) ?? []
    yield* config.string("author_name")
    yield* config.string("author_email")
    yield* config.string("category")
    const agentTimeoutSec =
      (yield* config.positiveNumber("max_agent_timeout_sec")) ?? DEFAULTS.agentTimeoutSec
    const testTimeoutSec =
      (yield* config.positiveNumber("max_test_timeout_sec")) ?? DEFAULTS.testTimeoutSec
    const parser = (yield* config.nonEmptyString("parser_name")) ?? DEFAULTS.parser
    if ((yield* config.boolean("run_tests_in_same_shell")) === true)
      yield* Effect.logWarning(
        `${configFile}: run_tests_in_same_shell is not supported: t1 runs the tests in a fresh shell`,
      )

    yield* requireDirectory(ctx.shown("tests"), "a directory with the task's tests")
    yield* requireFile(ctx.shown("run-tests.sh"), "the verifier's entry point, run-tests.sh")

    const composeFile = yield* optionalFile(ctx.shown("docker-compose.yaml"))
    const service =
      composeFile === undefined ? undefined : yield* readCompose(composeFile, ctx.absoluteDir)
    const rootDockerfile = yield* optionalFile(ctx.path("Dockerfile"))
    const build =
      service?.build ??
      (rootDockerfile === undefined
        ? undefined
        : { context: ctx.absoluteDir, dockerfile: "Dockerfile" })
    const dockerImage = service?.image ?? ""
    if (build === undefined && dockerImage === "")
      return yield* new TaskLoadError({
        file: ctx.shown("Dockerfile"),
        expected: "the task's environment (a Dockerfile, or an image in docker-compose.yaml)",
        got: "nothing (it does not exist)",
      })
    const dockerfileWorkdirOf =
      build === undefined
        ? undefined
        : yield* dockerfileWorkdir(join(build.context, build.dockerfile))

    return {
      id: ctx.id,
      taskSet: ctx.taskSet,
      format: "tb1",
      dir: ctx.absoluteDir,
      instruction,
      difficulty,
      tags,
      family: "",
      split: ctx.split ?? "unspecified",
      agentTimeoutSec,
      environment: {
        dockerImage,
        buildContext: build?.context,
        dockerfile: build?.dockerfile,
        cpus: service?.cpus ?? DEFAULTS.cpus,
        memoryMb: service?.memoryMb ?? DEFAULTS.memoryMb,
        storageMb: DEFAULTS.storageMb,
        allowInternet: service?.allowInternet ?? DEFAULTS.allowInternet,
        workdir: service?.workdir ?? dockerfileWorkdirOf ?? DEFAULTS.workdir,
        setupScript: undefined,
      },
      verifier: {
        testsDir: ctx.path("tests"),
        testDir: "/tests",
        kind: "script",
        script: "run-tests.sh",
        scriptPath: ctx.path("run-tests.sh"),
        parser,
        timeoutSec: testTimeoutSec,
        expectedTests: yield* countTestFunctions(ctx.path("tests")),
      },
      solution: yield* solutionOf(ctx),
    } satisfies Task
  })
