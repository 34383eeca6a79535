/**
 * Terminal-Bench 2 / Harbor tasks:
 *
 *   task.toml          version, [metadata], [agent], [verifier], [environment] (below)
 *   instruction.md     the instruction
 *   environment/       Dockerfile and its build context (optional when docker_image is set)
 *   tests/test.sh      the verifier entry point, with the test files beside it
 *   solution/solve.sh  the reference solution (optional)
 *
 * Schema versions 1.0 and 1.1 (`version`, or Harbor's newer spelling `schema_version`; absent
 * means 1.0). Fields the loader does not know are ignored, as Harbor ignores them; those that
 * change what a run means and that t1 cannot honour (GPUs, environment variables, healthchecks,
 * multi-step tasks) are logged as warnings.
 */
import { Effect } from "effect"
import type { Task } from "../task.ts"
import type { TaskContext } from "./context.ts"
import { TaskLoadError } from "./errors.ts"
import { ConfigTable } from "./fields.ts"
import {
  countTestFunctions,
  dockerfileWorkdir,
  optionalFile,
  readInstruction,
  requireDirectory,
  requireFile,
} from "./layout.ts"
import { parseToml, readUtf8 } from "./text.ts"

export const TB2_SCHEMA_VERSIONS = ["1.0", "1.1"] as const

/** Harbor's defaults where task.toml is silent. */
const DEFAULTS = {
  verifierTimeoutSec: 600,
  cpus: 1,
  memoryMb: 2048,
  storageMb: 10240,
  allowInternet: true,
  workdir: "/app",
} as const

/** Sizes may be given as "2G" (1.0) or in MiB (1.1); both at once is ambiguous. */
const sizeMb = (env: ConfigTable, sizeKey: string, mbKey: string) =>
  Effect.gen(function* () {
    const size = yield* env.sizeMb(sizeKey)
    const mb = yield* env.positiveNumber(mbKey, { integer: true })
    if (size !== undefined && mb !== undefined)
      return yield* env.error(sizeKey, `either ${sizeKey} or ${mbKey}, not both`)
    return size ?? mb
  })

/** Set, and not an empty table or list. */
const isSet = (table: ConfigTable, key: string): boolean => {
  const value = table.values[key]
  return (
    value !== undefined &&
    !(typeof value === "object" && value !== null && Object.keys(value).length === 0)
  )
}

const warnIgnored = (file: string, settings: ReadonlyArray<readonly [boolean, string]>) =>
  Effect.forEach(settings, ([present, what]) =>
    present ? Effect.logWarning(`${file}: ${what} is not supported by t1; ignored`) : Effect.void,
  )

const versions = TB2_SCHEMA_VERSIONS.map((v) => JSON.stringify(v)).join(" or ")

export const loadTb2 = (ctx: TaskContext): Effect.Effect<Task, TaskLoadError> =>
  Effect.gen(function* () {
    const configFile = ctx.shown("task.toml")
    const text = yield* readUtf8(configFile)
    const config = yield* ConfigTable.root(configFile, "toml", yield* parseToml(configFile, text))

    const versionKey = config.has("version") ? "version" : "schema_version"
    const version = yield* config.string(versionKey)
    if (version !== undefined && !TB2_SCHEMA_VERSIONS.some((known) => known === version))
      return yield* config.error(versionKey, `schema version ${versions} (no other is known)`)

    const metadata = yield* config.section("metadata")
    const difficulty = (yield* metadata.nonEmptyString("difficulty")) ?? "unknown"
    yield* metadata.string("category")
    yield* metadata.string("author_name")
    yield* metadata.string("author_email")
    const tags = (yield* metadata.strings("tags")) ?? []
    // 1.1 may describe the task as a package; its keywords are tags too.
    const keywords = (yield* (yield* config.section("task")).strings("keywords")) ?? []

    const agent = yield* config.section("agent")
    const agentTimeoutSec = (yield* agent.positiveNumber("timeout_sec")) ?? 0
    const verifier = yield* config.section("verifier")
    const verifierTimeoutSec =
      (yield* verifier.positiveNumber("timeout_sec")) ?? DEFAULTS.verifierTimeoutSec

    const env = yield* config.section("environment")
    const dockerImage = (yield* env.nonEmptyString("docker_image")) ?? ""
    const cpus = (yield* env.positiveNumber("cpus")) ?? DEFAULTS.cpus
    const memoryMb = (yield* sizeMb(env, "memory", "memory_mb")) ?? DEFAULTS.memoryMb
    const storageMb = (yield* sizeMb(env, "storage", "storage_mb")) ?? DEFAULTS.storageMb
    const allowInternet = yield* env.boolean("allow_internet")
    const networkMode = yield* env.oneOf("network_mode", ["public", "no-network", "allowlist"])
    const workdir = yield* env.absolutePath("workdir")
    const gpus = (yield* env.nonNegativeInteger("gpus")) ?? 0
    yield* warnIgnored(configFile, [
      [gpus > 0, `[environment].gpus = ${gpus}`],
      [
        networkMode === "allowlist",
        '[environment].network_mode = "allowlist" (treated as "public")',
      ],
      [isSet(env, "env"), "[environment].env"],
      [isSet(env, "healthcheck"), "[environment].healthcheck"],
      [isSet(env, "mcp_servers"), "[environment].mcp_servers"],
      [isSet(verifier, "env"), "[verifier].env"],
      [isSet(config, "steps"), "steps (multi-step tasks)"],
    ])

    const instruction = yield* readInstruction(ctx.shown("instruction.md"))
    yield* requireDirectory(ctx.shown("tests"), "a directory with the task's tests")
    yield* requireFile(ctx.shown("tests", "test.sh"), "the verifier's entry point, tests/test.sh")
    const dockerfile = yield* optionalFile(ctx.path("environment", "Dockerfile"))
    if (dockerImage === "" && dockerfile === undefined)
      return yield* new TaskLoadError({
        file: configFile,
        field: "[environment].docker_image",
        expected: "an image name, since there is no environment/Dockerfile to build one from",
        got: "nothing",
      })

    return {
      id: ctx.id,
      taskSet: ctx.taskSet,
      format: "tb2",
      dir: ctx.absoluteDir,
      instruction,
      difficulty,
      tags: [...new Set([...tags, ...keywords])],
      family: "",
      split: ctx.split ?? "unspecified",
      agentTimeoutSec,
      environment: {
        dockerImage,
        buildContext: dockerfile === undefined ? undefined : ctx.path("environment"),
        dockerfile: dockerfile === undefined ? undefined : "Dockerfile",
        cpus,
        memoryMb,
        storageMb,
        allowInternet:
          networkMode === "no-network" ? false : (allowInternet ?? DEFAULTS.allowInternet),
        workdir:
          workdir ??
          (dockerfile === undefined ? undefined : yield* dockerfileWorkdir(dockerfile)) ??
          DEFAULTS.workdir,
        setupScript: undefined,
      },
      verifier: {
        testsDir: ctx.path("tests"),
        testDir: "/tests",
        kind: "script",
        script: "test.sh",
        scriptPath: ctx.path("tests", "test.sh"),
        parser: undefined,
        timeoutSec: verifierTimeoutSec,
        expectedTests: yield* countTestFunctions(ctx.path("tests")),
      },
      solution: yield* optionalFile(ctx.path("solution", "solve.sh")),
    } satisfies Task
  })
