import { createHash } from "node:crypto"
import { createReadStream } from "node:fs"
import { lstat, readdir, readFile, readlink } from "node:fs/promises"
import { basename, join, relative, resolve, sep } from "node:path"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import type Dockerode from "dockerode"
import { Clock, Effect, Stream } from "effect"
import * as tar from "tar-stream"
import {
  findUnsupported,
  type ImageAliases,
  type Instruction,
  parseDockerfile,
  rewriteFrom,
} from "../../../tasks/load/dockerfile.ts"
import { connectDocker, describeEngine, isUnreachable, reasonOf } from "../docker/engine.ts"
import { EngineUnavailable } from "../errors.ts"
import { imageExists } from "./base.ts"
import {
  type BaseImageBuildFailed,
  ImageBuildFailed,
  TaskContextInvalid,
  UnsupportedStep,
} from "./errors.ts"
import { errorOf, progressMessages } from "./progress.ts"

/** Bumped whenever the way task images are built changes what the same context produces. */
export const TASK_RECIPE_VERSION = 1

/**
 * The network the build's RUN steps get: none, or the engine's default (bridge) network, so a
 * package mirror the engine can reach works. It does not change the recipe, so it is not part of
 * the image's hash. Base images are never pulled either way.
 */
export type BuildNetwork = "none" | "default"
export const BUILD_NETWORKS: ReadonlyArray<BuildNetwork> = ["none", "default"]

export interface TaskImageOptions {
  /** FROM patterns to local images, tried before the defaults (python:*, ubuntu:*, …). */
  readonly aliases?: ImageAliases
  readonly docker?: Dockerode
  /** Default "none". resolveTaskImage follows the task's allowInternet. */
  readonly network?: BuildNetwork
}

/** Lines of a failing step's output kept for the error, and the longest line kept whole. */
export const BUILD_OUTPUT_LINES = 20
const BUILD_OUTPUT_LINE_CHARS = 500

export interface TaskImage {
  /** `t1-task-<name>:<hash of the context>`. */
  readonly image: string
  readonly name: string
  readonly hash: string
  readonly cached: boolean
  readonly rewrites: ReadonlyArray<{
    readonly line: number
    readonly from: string
    readonly to: string
  }>
  readonly durationMs: number
}

export type TaskImageError =
  | TaskContextInvalid
  | UnsupportedStep
  | ImageBuildFailed
  | EngineUnavailable
  | BaseImageBuildFailed

interface ContextEntry {
  /** Relative, `/`-separated. */
  readonly path: string
  readonly type: "file" | "directory" | "symlink"
  readonly mode: number
  readonly size: number
  readonly mtime: Date
  readonly linkname?: string
  readonly absolute: string
}

/** Where the Dockerfile and its context are: Terminal-Bench's environment/ layout, or the root. */
export const locateDockerfile = async (
  taskDir: string,
): Promise<{ readonly dockerfile: string; readonly contextDir: string } | undefined> => {
  for (const contextDir of [join(taskDir, "environment"), taskDir]) {
    const dockerfile = join(contextDir, "Dockerfile")
    const stat = await lstat(dockerfile).catch(() => undefined)
    if (stat?.isFile() === true) return { dockerfile, contextDir }
  }
  return undefined
}

/** Every file, directory and symlink under `dir`, sorted by path; other kinds are skipped. */
const walkContext = async (dir: string): Promise<ReadonlyArray<ContextEntry>> => {
  const entries: ContextEntry[] = []
  const visit = async (absolute: string): Promise<void> => {
    for (const name of (await readdir(absolute)).sort()) {
      const path = join(absolute, name)
      const stat = await lstat(path)
      const rel = relative(dir, path).split(sep).join("/")
      const common = { path: rel, mode: stat.mode & 0o7777, mtime: stat.mtime, absolute: path }
      if (stat.isDirectory()) {
        entries.push({ ...common, type: "directory", size: 0 })
        await visit(path)
      } else if (stat.isFile()) {
        entries.push({ ...common, type: "file", size: stat.size })
      } else if (stat.isSymbolicLink()) {
        entries.push({ ...common, type: "symlink", size: 0, linkname: await readlink(path) })
      }
    }
  }
  await visit(dir)
  return entries
}

const fileDigest = (path: string): Promise<string> =>
  new Promise((resolvePromise, reject) => {
    const hash = createHash("sha256")
    createReadStream(path)
      .on("data", (chunk) => hash.update(chunk))
      .once("error", reject)
      .once("end", () => resolvePromise(hash.digest("hex")))
  })

/** Content hash of a build: recipe, rewritten Dockerfile, base image ids, every context entry. */
const contextHash = async (
  entries: ReadonlyArray<ContextEntry>,
  dockerfilePath: string,
  dockerfileText: string,
  baseImageIds: ReadonlyArray<string>,
): Promise<string> => {
  const hash = createHash("sha256")
  hash.update(JSON.stringify({ recipe: TASK_RECIPE_VERSION, baseImageIds, dockerfileText }))
  for (const entry of entries) {
    const content =
      entry.path === dockerfilePath
        ? "(rewritten)"
        : entry.type === "file"
          ? await fileDigest(entry.absolute)
          : (entry.linkname ?? "")
    hash.update(`\0${entry.path}\0${entry.type}\0${entry.mode.toString(8)}\0${content}`)
  }
  return hash.digest("hex").slice(0, 16)
}

/** Streams the context as a tar, the Dockerfile replaced by its rewritten text. */
const packContext = (
  entries: ReadonlyArray<ContextEntry>,
  dockerfilePath: string,
  dockerfileText: string,
): tar.Pack => {
  const pack = tar.pack()
  const fill = async () => {
    for (const entry of entries) {
      const header = { name: entry.path, mode: entry.mode, mtime: entry.mtime, uid: 0, gid: 0 }
      if (entry.path === dockerfilePath) {
        const body = Buffer.from(dockerfileText)
        await new Promise<void>((ok, fail) =>
          pack.entry({ ...header, size: body.length }, body, (e) => (e ? fail(e) : ok())),
        )
      } else if (entry.type === "file") {
        const sink = pack.entry({ ...header, type: "file", size: entry.size })
        await pipeline(createReadStream(entry.absolute), sink)
      } else if (entry.type === "directory") {
        await new Promise<void>((ok, fail) =>
          pack.entry({ ...header, type: "directory" }, (e) => (e ? fail(e) : ok())),
        )
      } else {
        await new Promise<void>((ok, fail) =>
          pack.entry({ ...header, type: "symlink", linkname: entry.linkname ?? "" }, (e) =>
            e ? fail(e) : ok(),
          ),
        )
      }
    }
    pack.finalize()
  }
  fill().catch((error: unknown) =>
    pack.destroy(error instanceof Error ? error : new Error(String(error))),
  )
  return pack
}

/** A repository name Docker accepts: lower case, [a-z0-9] separated by single [._-]. */
export const taskImageName = (taskDir: string): string => {
  const name = basename(resolve(taskDir))
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/[._-]{2,}/g, "-")
    .replace(/^[._-]+|[._-]+$/g, "")
  return name === "" ? "task" : name
}

/** What the build output says when a step wanted the network it does not have. */
const NETWORK_HINT =
  /apt-get|apt |pip3? install|uv pip|npm (ci|install)|curl |wget |git clone|Temporary failure resolving|Could not resolve|Network is unreachable|Failed to establish a new connection|Name or service not known/i

// biome-ignore lint/suspicious/noControlCharactersInRegex: the escape is what is matched
const ANSI = /\x1b\[[0-9;]*[A-Za-z]/g

const STEP = /^Step (\d+)\/(\d+) : (.*)$/

/** What a terminal shows of a line that carriage returns rewrote (progress bars). */
const lastSegment = (line: string): string => {
  const segments = line.split("\r").filter((s) => s !== "")
  return segments.at(-1) ?? ""
}

/** The hint for a failed RUN step that looks like it wanted the network; only for offline builds. */
export const networkHint = (
  network: BuildNetwork,
  instruction: Pick<Instruction, "keyword"> | undefined,
  text: string,
  output: ReadonlyArray<string>,
): string =>
  network === "none" &&
  instruction?.keyword === "RUN" &&
  NETWORK_HINT.test(`${text}\n${output.join("\n")}`)
    ? " (this build had no network: the task does not allow internet, or --build-network none was given; put the packages into the base image with `t1 image build-base --packages …`, vendor the files into the task directory, or build with --build-network default)"
    : ""

const buildFailure = (
  image: string,
  dockerfile: string,
  network: BuildNetwork,
  instruction: Instruction | undefined,
  stepText: string,
  reason: string,
  output: ReadonlyArray<string>,
): ImageBuildFailed => {
  const text = instruction?.text ?? stepText
  return new ImageBuildFailed({
    image,
    dockerfile,
    network,
    line: instruction?.line ?? 0,
    step: text,
    reason: `${reason}${networkHint(network, instruction, text, output)}`,
    output: output.join("\n"),
  })
}

/** What the engine is asked to build: the tag, the Dockerfile, the RUN steps' network, labels. */
export const taskBuildOptions = (
  image: string,
  dockerfilePath: string,
  network: BuildNetwork,
  labels: Readonly<Record<string, string>>,
) => ({
  t: image,
  dockerfile: dockerfilePath,
  networkmode: network,
  rm: true,
  forcerm: true,
  labels: { ...labels },
})

/** Keeps the last BUILD_OUTPUT_LINES lines of a step, each cut to a readable length. */
export const keepOutput = (kept: string[], text: string): void => {
  for (const line of text.split("\n")) {
    kept.push(
      line.length > BUILD_OUTPUT_LINE_CHARS ? `${line.slice(0, BUILD_OUTPUT_LINE_CHARS)}…` : line,
    )
    if (kept.length > BUILD_OUTPUT_LINES) kept.shift()
  }
}

const engineFailure = (docker: Dockerode, error: unknown, taskDir: string) =>
  isUnreachable(error)
    ? new EngineUnavailable({ engine: describeEngine(docker), reason: reasonOf(error) })
    : new TaskContextInvalid({ taskDir, reason: reasonOf(error) })

/**
 * Builds a task's environment image without pulling: FROM lines go through the alias map to
 * images the engine already has (by default t1-base:latest), the RUN steps get `options.network`
 * (default none), and the image is tagged `t1-task-<name>:<hash of the context>` — an existing
 * tag is reused as is, whatever network built it.
 */
export const buildTaskImage = (
  taskDir: string,
  options: TaskImageOptions = {},
): Effect.Effect<TaskImage, TaskImageError> =>
  Effect.gen(function* () {
    const started = yield* Clock.currentTimeMillis
    const docker = options.docker ?? connectDocker()
    const network = options.network ?? "none"
    const located = yield* Effect.promise(() => locateDockerfile(taskDir))
    if (located === undefined)
      return yield* new TaskContextInvalid({
        taskDir,
        reason: "no Dockerfile (looked for environment/Dockerfile and Dockerfile)",
      })
    const { dockerfile, contextDir } = located
    const source = yield* Effect.tryPromise({
      try: () => readFile(dockerfile, "utf8"),
      catch: (error) => new TaskContextInvalid({ taskDir, reason: reasonOf(error) }),
    })
    const instructions = parseDockerfile(source)
    const unsupported = findUnsupported(instructions)
    if (unsupported !== undefined)
      return yield* new UnsupportedStep({
        dockerfile,
        line: unsupported.line,
        step: unsupported.text,
        reason: unsupported.reason,
      })
    const rewritten = rewriteFrom(source, options.aliases)
    for (const rewrite of rewritten.rewrites)
      yield* Effect.logInfo(
        `task image: ${dockerfile}:${rewrite.line}: FROM ${rewrite.from} → ${rewrite.to}`,
      )

    const baseImageIds: string[] = []
    for (const base of rewritten.baseImages) {
      const info = yield* Effect.tryPromise({
        try: () => docker.getImage(base.image).inspect(),
        catch: (error) => error,
      }).pipe(Effect.option)
      if (info._tag === "None") {
        // Tell "no such image" from "no engine".
        yield* imageExists(docker, base.image)
        return yield* new UnsupportedStep({
          dockerfile,
          line: base.line,
          step: instructions.find((i) => i.line === base.line)?.text ?? `FROM ${base.image}`,
          reason: `image ${base.image} is not on the engine, and task builds cannot pull (t1 never pulls): alias it to a local image or build it first (t1 image build-base)`,
        })
      }
      baseImageIds.push(info.value.Id)
    }

    const entries = yield* Effect.tryPromise({
      try: () => walkContext(contextDir),
      catch: (error) => new TaskContextInvalid({ taskDir, reason: reasonOf(error) }),
    })
    const dockerfilePath = relative(contextDir, dockerfile).split(sep).join("/")
    const hash = yield* Effect.tryPromise({
      try: () => contextHash(entries, dockerfilePath, rewritten.text, baseImageIds),
      catch: (error) => new TaskContextInvalid({ taskDir, reason: reasonOf(error) }),
    })
    const name = taskImageName(taskDir)
    const image = `t1-task-${name}:${hash}`
    const result = (cached: boolean): Effect.Effect<TaskImage> =>
      Effect.map(Clock.currentTimeMillis, (now) => ({
        image,
        name,
        hash,
        cached,
        rewrites: rewritten.rewrites,
        durationMs: now - started,
      }))
    if (yield* imageExists(docker, image)) return yield* result(true)

    yield* Effect.logInfo(`task image: building ${image} from ${contextDir} (network: ${network})`)
    const progress = yield* Effect.tryPromise({
      try: () =>
        docker.buildImage(
          Readable.from(packContext(entries, dockerfilePath, rewritten.text)),
          taskBuildOptions(image, dockerfilePath, network, {
            "t1.task": name,
            "t1.task.hash": hash,
          }),
        ),
      catch: (error) => engineFailure(docker, error, taskDir),
    })

    // The classic builder numbers the Dockerfile's instructions as steps, in order.
    let step = 0
    let stepText = ""
    let stepOutput: string[] = []
    // A step's output arrives in pieces that need not end at a line break.
    let partial = ""
    const onLine = (line: string): Effect.Effect<void> => {
      const text = line.trimEnd()
      if (text === "") return Effect.void
      const header = STEP.exec(text)
      if (header !== null) {
        step = Number(header[1])
        stepText = header[3] ?? ""
        stepOutput = []
        return Effect.logInfo(`task image: ${text}`)
      }
      if (!/^( ---> |Removing intermediate container )/.test(text)) keepOutput(stepOutput, text)
      return Effect.logDebug(`task image: ${text}`)
    }
    yield* Stream.runForEach(progressMessages(progress), (message) => {
      const error = errorOf(message)
      if (error !== undefined) {
        const output = [...stepOutput]
        if (partial.trim() !== "") keepOutput(output, lastSegment(partial).trimEnd())
        return Effect.fail(
          buildFailure(image, dockerfile, network, instructions[step - 1], stepText, error, output),
        )
      }
      const lines = `${partial}${(message.stream ?? message.status ?? "").replace(ANSI, "")}`
        .replace(/\r\n/g, "\n")
        .split("\n")
      partial = lines.pop() ?? ""
      return Effect.forEach(lines, (line) => onLine(lastSegment(line)), { discard: true })
    }).pipe(
      Effect.mapError((error) =>
        error._tag === "ProgressStreamFailed"
          ? new ImageBuildFailed({
              image,
              dockerfile,
              network,
              line: 0,
              step: "(stream)",
              reason: error.reason,
              output: "",
            })
          : error,
      ),
    )
    if (!(yield* imageExists(docker, image)))
      return yield* new ImageBuildFailed({
        image,
        dockerfile,
        network,
        line: 0,
        step: "(end)",
        reason: "the build ended without an error, but the image is not there",
        output: stepOutput.join("\n"),
      })
    const built = yield* result(false)
    yield* Effect.logInfo(`task image: ${image} built in ${built.durationMs} ms`)
    return built
  })
