import { Effect } from "effect"
import {
  BaseImageBuildFailed,
  BUILD_NETWORKS,
  type BuildNetwork,
  buildBaseImage,
  buildTaskImage,
  connectDocker,
  ensureToolchain,
  type ImageAliases,
  taskBuildNetwork,
} from "../../actors/sandbox/index.ts"
import { loadTask } from "../../tasks/load/index.ts"
import { choiceFlag, parseFlags, UsageError } from "../flags.ts"
import { logFlagSpec, logFlagsHelp, loggingLayer } from "../run-main.ts"

export const imageUsage = () => `Usage: t1 image <build-base|build> [options]

Builds sandbox images offline, into the local Docker engine (DOCKER_HOST or the local socket).
Nothing is pulled from a registry.

  t1 image build-base [--packages p1,p2] [--suite bookworm] [--cache-dir DIR]
      The base image t1-base:<hash> (also tagged t1-base:latest): a minimal Debian made with
      debootstrap (needs root, and Debian's package mirror the first time) with bash, coreutils,
      procps, python3 and pytest, plus --packages. Cached by the hash of its inputs: instant when
      the engine has it; re-imported from the cache directory (default ~/.cache/t1/images, or
      T1_IMAGE_CACHE) when only the archive is left.

  t1 image build <task-dir> [--alias 'PATTERN=IMAGE,…'] [--build-network none|default]
      A task's environment (environment/Dockerfile, else Dockerfile), tagged
      t1-task-<name>:<hash of the context>. FROM lines are rewritten to local images: python:*,
      ubuntu:*, debian:* and ghcr.io/laude-institute/t-bench/* go to t1-base:latest; --alias
      patterns (\`*\` matches anything) are tried first; base images are never pulled. RUN
      steps get the engine's default network when the task allows internet (allow_internet),
      else none; --build-network overrides (a directory that is not a loadable task: none).
      A failing step is named by its Dockerfile line, with its last 20 lines of output. The
      network is not part of the image's hash: an image already built is reused as is.

Options:
  --json          print the result as one JSON object
${logFlagsHelp}`

const spec = {
  ...logFlagSpec,
  packages: { type: "string" },
  suite: { type: "string" },
  "cache-dir": { type: "string" },
  alias: { type: "string" },
  "build-network": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const

const list = (raw: string | undefined): ReadonlyArray<string> =>
  (raw ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "")

const parseAliases = (raw: string | undefined, usage: string): ImageAliases => {
  const aliases: Record<string, string> = {}
  for (const pair of list(raw)) {
    const at = pair.lastIndexOf("=")
    const pattern = pair.slice(0, at).trim()
    const target = pair.slice(at + 1).trim()
    if (at <= 0 || pattern === "" || target === "")
      throw new UsageError(`--alias wants PATTERN=IMAGE pairs, got ${JSON.stringify(pair)}`, usage)
    aliases[pattern] = target
  }
  return aliases
}

/** The override, else the task's own setting when the directory loads as a task, else none. */
const buildNetworkOf = (
  taskDir: string,
  override: BuildNetwork | undefined,
): Effect.Effect<BuildNetwork> =>
  override !== undefined
    ? Effect.succeed(override)
    : loadTask(taskDir).pipe(
        Effect.map((task) => taskBuildNetwork(task)),
        Effect.catch(() => Effect.succeed<BuildNetwork>("none")),
      )

export const imageCommand = (
  args: ReadonlyArray<string>,
): Effect.Effect<void, unknown> | string => {
  const usage = imageUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  const [action, ...rest] = positionals
  if (action === undefined) throw new UsageError("which action? build-base or build", usage)
  const logging = loggingLayer(values, usage)
  const print = (line: string, json: object) =>
    Effect.sync(() => console.log(values.json === true ? JSON.stringify(json) : line))

  if (action === "build-base") {
    if (rest.length > 0) throw new UsageError(`unexpected arguments: ${rest.join(" ")}`, usage)
    if (values.alias !== undefined) throw new UsageError("--alias is for t1 image build", usage)
    if (values["build-network"] !== undefined)
      throw new UsageError("--build-network is for t1 image build", usage)
    const cacheDir = values["cache-dir"]
    return buildBaseImage({
      packages: list(values.packages),
      ...(values.suite === undefined ? {} : { suite: values.suite }),
      ...(cacheDir === undefined ? {} : { cacheDir }),
    }).pipe(
      // The verifier's read-only toolchain comes from the base image: built with it, so that
      // the first sandbox does not wait for it.
      Effect.flatMap((base) =>
        Effect.tryPromise({
          try: () => ensureToolchain(connectDocker(), base.latest),
          catch: (error) =>
            new BaseImageBuildFailed({
              stage: "toolchain",
              reason: error instanceof Error ? error.message : String(error),
            }),
        }).pipe(Effect.map((toolchain) => ({ ...base, toolchain }))),
      ),
      Effect.flatMap((base) =>
        print(
          `${base.image} (${base.latest}) ready: ${base.source === "engine" ? "already built" : base.source === "archive" ? "re-imported from the cache" : "built"} in ${base.durationMs} ms; verifier toolchain ${base.toolchain}`,
          base,
        ),
      ),
      Effect.provide(logging),
    )
  }
  if (action === "build") {
    const [taskDir, ...extra] = rest
    if (taskDir === undefined) throw new UsageError("which task? name its directory", usage)
    if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(" ")}`, usage)
    for (const flag of ["packages", "suite", "cache-dir"] as const)
      if (values[flag] !== undefined)
        throw new UsageError(`--${flag} is for t1 image build-base`, usage)
    const aliases = parseAliases(values.alias, usage)
    const override =
      values["build-network"] === undefined
        ? undefined
        : choiceFlag("build-network", values["build-network"], BUILD_NETWORKS, "none", usage)
    return buildNetworkOf(taskDir, override).pipe(
      Effect.flatMap((network) => buildTaskImage(taskDir, { aliases, network })),
      Effect.flatMap((task) =>
        print(
          `${task.image} ${task.cached ? "already built" : `built in ${task.durationMs} ms`}`,
          task,
        ),
      ),
      Effect.provide(logging),
    )
  }
  throw new UsageError(`unknown action ${JSON.stringify(action)}: build-base or build`, usage)
}
