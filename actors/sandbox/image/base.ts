import { createHash } from "node:crypto"
import { createReadStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs"
import { homedir } from "node:os"
import { join } from "node:path"
import type Dockerode from "dockerode"
import { Clock, Effect } from "effect"
import { BASE_IMAGE, BASE_REPOSITORY } from "../../../tasks/base-image.ts"
import {
  connectDocker,
  describeEngine,
  isUnreachable,
  reasonOf,
  statusCode,
} from "../docker/engine.ts"
import { EngineUnavailable } from "../errors.ts"
import { runCommand } from "./command.ts"
import { BaseImageBuildFailed } from "./errors.ts"
import { withFileLock } from "./lock.ts"
import { followProgress } from "./progress.ts"

/** Bumped whenever the recipe below changes what an image with the same inputs contains. */
export const BASE_RECIPE_VERSION = 1

export { BASE_IMAGE, BASE_REPOSITORY }

/**
 * What every sandbox needs: the shell and its tools, and Python with pytest for the verifiers.
 * python-is-python3 because task Dockerfiles written for python:* images call `python`.
 */
export const BASE_PACKAGES: ReadonlyArray<string> = [
  "bash",
  "coreutils",
  "procps",
  "python3",
  "python3-pytest",
  "python-is-python3",
]

/** The image config `docker import` would otherwise leave empty. */
const IMPORT_CHANGES: ReadonlyArray<string> = [
  "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  "ENV LANG=C.UTF-8",
  "WORKDIR /",
  'CMD ["bash"]',
]

export interface BaseImageOptions {
  /** Debian packages installed on top of BASE_PACKAGES. */
  readonly packages?: ReadonlyArray<string>
  /** Debian release; default "bookworm". */
  readonly suite?: string
  /** Where rootfs archives are kept; default ~/.cache/t1/images. */
  readonly cacheDir?: string
  readonly docker?: Dockerode
}

export interface BaseImage {
  /** `t1-base:<hash>`: what this exact recipe produced. */
  readonly image: string
  /** `t1-base:latest`, pointed at `image`. */
  readonly latest: string
  readonly hash: string
  /** engine: the image was already there; archive: re-imported from the cache; built: from scratch. */
  readonly source: "engine" | "archive" | "built"
  readonly durationMs: number
}

export const defaultCacheDir = (): string =>
  process.env.T1_IMAGE_CACHE ?? join(homedir(), ".cache", "t1", "images")

const PACKAGE_NAME = /^[a-z0-9][a-z0-9+.-]+$/

export const basePackages = (extra: ReadonlyArray<string> = []): ReadonlyArray<string> =>
  [...new Set([...BASE_PACKAGES, ...extra])].sort()

/** Content hash of the recipe's inputs: the suite, the sorted package list, the recipe version. */
export const baseImageHash = (suite: string, packages: ReadonlyArray<string>): string =>
  createHash("sha256")
    .update(JSON.stringify({ recipe: BASE_RECIPE_VERSION, suite, packages: [...packages].sort() }))
    .digest("hex")
    .slice(0, 16)

const failed = (stage: BaseImageBuildFailed["stage"], reason: string) =>
  new BaseImageBuildFailed({ stage, reason })

const engineError = (docker: Dockerode, stage: BaseImageBuildFailed["stage"], error: unknown) =>
  isUnreachable(error)
    ? new EngineUnavailable({ engine: describeEngine(docker), reason: reasonOf(error) })
    : failed(stage, reasonOf(error))

/** True when the engine has the image; 404 is the only "no". */
export const imageExists = (
  docker: Dockerode,
  reference: string,
): Effect.Effect<boolean, EngineUnavailable | BaseImageBuildFailed> =>
  Effect.tryPromise({
    try: () => docker.getImage(reference).inspect(),
    catch: (error) => error,
  }).pipe(
    Effect.as(true),
    Effect.catch((error) =>
      statusCode(error) === 404
        ? Effect.succeed(false)
        : Effect.fail(engineError(docker, "engine", error)),
    ),
  )

/** Mount points at or below `dir`, deepest first. */
const mountsUnder = (dir: string): ReadonlyArray<string> => {
  let table: string
  try {
    table = readFileSync("/proc/self/mounts", "utf8")
  } catch {
    return []
  }
  return table
    .split("\n")
    .map((line) => (line.split(" ")[1] ?? "").replace(/\\040/g, " "))
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length)
}

/** Debootstraps the rootfs and packs it into `archive` (written under a temporary name first). */
const buildRootfsArchive = (
  suite: string,
  packages: ReadonlyArray<string>,
  workDir: string,
  archive: string,
): Effect.Effect<void, BaseImageBuildFailed> =>
  Effect.gen(function* () {
    if (process.getuid?.() !== 0)
      return yield* failed("prerequisites", "debootstrap needs root: run as root (CI does)")
    const rootfs = join(workDir, "rootfs")
    const partial = `${archive}.partial`
    // debootstrap mounts proc and sys (and, in a container, binds device nodes) in the rootfs; a
    // failed or interrupted run can leave them behind, and nothing may be deleted through them.
    const cleanup = Effect.gen(function* () {
      for (const mount of mountsUnder(rootfs)) {
        yield* runCommand("umount", ["-l", mount], () => Effect.void).pipe(Effect.ignore)
      }
      yield* Effect.sync(() => {
        if (mountsUnder(rootfs).length === 0) rmSync(workDir, { recursive: true, force: true })
        rmSync(partial, { force: true })
      })
    })
    yield* cleanup
    mkdirSync(workDir, { recursive: true })
    const phases = new Set<string>()
    const debootstrap = yield* runCommand(
      "debootstrap",
      ["--variant=minbase", `--include=${packages.join(",")}`, suite, rootfs],
      (line) => {
        // "I: Retrieving libc6 …" for each package: info for the first line of each kind only.
        const verb = /^I: (\S+)/.exec(line)?.[1]
        if (verb !== undefined && !phases.has(verb)) {
          phases.add(verb)
          return Effect.logInfo(`base image: debootstrap: ${line.slice(3)}`)
        }
        return Effect.logDebug(`base image: debootstrap: ${line}`)
      },
    ).pipe(
      Effect.mapError((error) =>
        failed(
          "prerequisites",
          /ENOENT/.test(error.message)
            ? "debootstrap is not installed (apt-get install debootstrap)"
            : error.message,
        ),
      ),
      Effect.onError(() => cleanup),
    )
    if (debootstrap.exitCode !== 0) {
      yield* cleanup
      return yield* failed(
        "debootstrap",
        `exited ${debootstrap.exitCode ?? debootstrap.signal}:\n${debootstrap.tail.join("\n")}`,
      )
    }
    // The downloaded .debs would double the image for nothing.
    rmSync(join(rootfs, "var/cache/apt/archives"), { recursive: true, force: true })
    mkdirSync(join(rootfs, "var/cache/apt/archives/partial"), { recursive: true })
    yield* Effect.logInfo("base image: packing the rootfs")
    const tar = yield* runCommand(
      "tar",
      ["--numeric-owner", "--xattrs", "-C", rootfs, "-cf", partial, "."],
      (line) => Effect.logDebug(`base image: tar: ${line}`),
    ).pipe(Effect.mapError((error) => failed("archive", error.message)))
    if (tar.exitCode !== 0) {
      yield* cleanup
      return yield* failed("archive", `tar exited ${tar.exitCode}:\n${tar.tail.join("\n")}`)
    }
    renameSync(partial, archive)
    yield* cleanup
  })

const importArchive = (
  docker: Dockerode,
  archive: string,
  hash: string,
  labels: Readonly<Record<string, string>>,
): Effect.Effect<void, EngineUnavailable | BaseImageBuildFailed> =>
  Effect.gen(function* () {
    yield* Effect.logInfo(`base image: importing ${archive} as ${BASE_REPOSITORY}:${hash}`)
    const changes = [
      ...IMPORT_CHANGES,
      ...Object.entries(labels).map(([k, v]) => `LABEL ${k}=${JSON.stringify(v)}`),
    ]
    const progress = yield* Effect.tryPromise({
      try: () =>
        docker.importImage(createReadStream(archive), {
          repo: BASE_REPOSITORY,
          tag: hash,
          changes,
        }),
      catch: (error) => engineError(docker, "import", error),
    })
    yield* followProgress(progress, (line) => Effect.logDebug(`base image: import: ${line}`)).pipe(
      Effect.mapError((error) => failed("import", error.reason)),
    )
  })

const tagLatest = (docker: Dockerode, image: string) =>
  Effect.tryPromise({
    try: () => docker.getImage(image).tag({ repo: BASE_REPOSITORY, tag: "latest" }),
    catch: (error) => engineError(docker, "engine", error),
  })

/**
 * The base image every sandbox and task image starts from: a minimal Debian made by debootstrap
 * and imported into the engine — no registry involved. Cached by the hash of its inputs: when the
 * engine has `t1-base:<hash>` this only re-points `t1-base:latest`; when the rootfs archive is in
 * the cache directory it is re-imported; else it is built (about a minute).
 */
export const buildBaseImage = (
  options: BaseImageOptions = {},
): Effect.Effect<BaseImage, BaseImageBuildFailed | EngineUnavailable> =>
  Effect.gen(function* () {
    const started = yield* Clock.currentTimeMillis
    const docker = options.docker ?? connectDocker()
    const suite = options.suite ?? "bookworm"
    if (!/^[a-z][a-z0-9-]*$/.test(suite))
      return yield* failed("prerequisites", `bad suite ${suite}`)
    const extra = options.packages ?? []
    const bad = extra.find((p) => !PACKAGE_NAME.test(p))
    if (bad !== undefined)
      return yield* failed("prerequisites", `not a Debian package name: ${JSON.stringify(bad)}`)
    const packages = basePackages(extra)
    const hash = baseImageHash(suite, packages)
    const image = `${BASE_REPOSITORY}:${hash}`
    const done = (source: BaseImage["source"]) =>
      Effect.andThen(tagLatest(docker, image), Clock.currentTimeMillis).pipe(
        Effect.map((now) => ({
          image,
          latest: BASE_IMAGE,
          hash,
          source,
          durationMs: now - started,
        })),
      )

    if (yield* imageExists(docker, image)) return yield* done("engine")

    const cacheDir = options.cacheDir ?? defaultCacheDir()
    yield* Effect.try({
      try: () => mkdirSync(cacheDir, { recursive: true }),
      catch: (error) => failed("prerequisites", `cache directory ${cacheDir}: ${reasonOf(error)}`),
    })
    const archive = join(cacheDir, `${BASE_REPOSITORY}-${hash}.tar`)
    const build = Effect.gen(function* () {
      // Another process may have finished the same build while this one waited for the lock.
      if (yield* imageExists(docker, image)) return "engine" as const
      let source: BaseImage["source"] = "archive"
      if (!existsSync(archive)) {
        yield* Effect.logInfo(
          `base image: building ${image} (debootstrap ${suite}: ${packages.join(", ")})`,
        )
        yield* buildRootfsArchive(suite, packages, join(cacheDir, `${hash}.work`), archive)
        source = "built"
      }
      yield* importArchive(docker, archive, hash, {
        "t1.base.suite": suite,
        "t1.base.packages": packages.join(","),
        "t1.base.recipe": String(BASE_RECIPE_VERSION),
      })
      return source
    })
    const source = yield* withFileLock(
      join(cacheDir, `${hash}.lock`),
      build,
      Effect.logInfo(`base image: another process is building ${image}; waiting for it`),
    )
    const result = yield* done(source)
    yield* Effect.logInfo(`base image: ${image} ready (${source}) in ${result.durationMs} ms`)
    return result
  })
