/**
 * Which image a task's sandbox runs. Nothing is pulled: an image is used when the engine has it,
 * else built offline from the task's Dockerfile (FROM lines rewritten through the aliases).
 *
 *   1. the task's prebuilt image (TB2 docker_image, a TB1 compose image, a native image), when the
 *      engine has it, or has what the caller's aliases map it to (native tasks: the default
 *      aliases too, so `python:3.12` runs on the base image);
 *   2. else its environment built from its Dockerfile (TB2 environment/, TB1 Dockerfile or the
 *      compose build context); the RUN steps get the engine's default network when the task
 *      allows internet, else none (`buildNetwork` overrides);
 *   3. else a typed error naming the task and the image.
 */
import { cp, mkdtemp, rm, stat } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import type Dockerode from "dockerode"
import { Data, Effect } from "effect"
import type { Task as TaskMessage } from "../../../proto/index.ts"
import type { Task } from "../../../tasks/index.ts"
import { type TaskWireError, taskToWire } from "../../../tasks/wire.ts"
import { connectDocker, describeEngine } from "../docker/index.ts"
import { EngineUnavailable } from "../errors.ts"
import {
  BASE_IMAGE,
  type BuildNetwork,
  buildTaskImage,
  DEFAULT_ALIASES,
  type ImageAliases,
  resolveAlias,
  TaskContextInvalid,
  type TaskImageError,
} from "./index.ts"

export interface ResolvedTaskImage {
  readonly image: string
  /** prebuilt: the task's own image; built: from its Dockerfile; base: t1's base image. */
  readonly source: "prebuilt" | "built" | "base"
}

export interface ResolveTaskImageOptions {
  readonly docker?: Dockerode
  /** FROM (and prebuilt image) patterns to local images, tried before the defaults. */
  readonly aliases?: ImageAliases
  /** The network of the build's RUN steps; default: the task's (see taskBuildNetwork). */
  readonly buildNetwork?: BuildNetwork
}

/**
 * The network a task's image build gets: the override when given, else the engine's default
 * network for a task that allows internet and none for one that does not. The sandbox itself
 * runs with the network the task declares, whatever built its image.
 */
export const taskBuildNetwork = (task: Task, override?: BuildNetwork): BuildNetwork =>
  override ?? (task.environment.allowInternet ? "default" : "none")

/** The task names an image the engine lacks, and has no Dockerfile to build one from. */
export class TaskImageUnavailable extends Data.TaggedError("TaskImageUnavailable")<{
  /** `<task set>/<id>`. */
  readonly task: string
  readonly image: string
  readonly reason: string
}> {
  override get message(): string {
    return `task ${this.task}: image ${this.image === "" ? "(none)" : this.image} ${this.reason}`
  }
}

export type ResolveTaskImageError = TaskImageUnavailable | TaskImageError

/** Whether the engine has the image; a 404 is the only "no", anything else is the engine's fault. */
const engineHas = (docker: Dockerode, image: string): Effect.Effect<boolean, EngineUnavailable> =>
  Effect.tryPromise({
    try: () => docker.getImage(image).inspect(),
    catch: (error) => error,
  }).pipe(
    Effect.as(true),
    Effect.catch((error) => {
      const status =
        typeof error === "object" && error !== null && "statusCode" in error
          ? error.statusCode
          : undefined
      return status === 404
        ? Effect.succeed(false)
        : Effect.fail(
            new EngineUnavailable({
              engine: describeEngine(docker),
              reason: error instanceof Error ? error.message : String(error),
            }),
          )
    }),
  )

const sourceOf = (image: string): ResolvedTaskImage["source"] =>
  image === BASE_IMAGE ? "base" : "prebuilt"

/**
 * buildTaskImage finds `<dir>/environment/Dockerfile`, else `<dir>/Dockerfile`, and names the
 * image after `<dir>`. A task whose Dockerfile is there is built in place; any other layout (a
 * compose context elsewhere, a Dockerfile by another name) is copied into that shape first.
 */
const buildEnvironment = (
  task: Task,
  context: string,
  dockerfile: string,
  options: {
    readonly docker: Dockerode
    readonly aliases: ImageAliases | undefined
    readonly network: BuildNetwork
  },
) =>
  Effect.gen(function* () {
    const shadowed = yield* Effect.promise(() =>
      stat(join(task.dir, "environment", "Dockerfile")).then(
        () => true,
        () => false,
      ),
    )
    const inPlace =
      dockerfile === "Dockerfile" &&
      (resolve(context) === join(task.dir, "environment") ||
        (resolve(context) === task.dir && !shadowed))
    if (inPlace) return yield* buildTaskImage(task.dir, options)
    const staged = <A>(what: string, work: () => Promise<A>) =>
      Effect.tryPromise({
        try: work,
        catch: (error) =>
          new TaskContextInvalid({
            taskDir: task.dir,
            reason: `${what}: ${error instanceof Error ? error.message : String(error)}`,
          }),
      })
    return yield* Effect.acquireUseRelease(
      staged("making a staging directory", () => mkdtemp(join(tmpdir(), "t1-task-context-"))),
      (staging) =>
        Effect.gen(function* () {
          const dir = join(staging, task.id)
          yield* staged(`copying the build context ${context}`, async () => {
            await cp(context, join(dir, "environment"), { recursive: true, verbatimSymlinks: true })
            await cp(join(context, dockerfile), join(dir, "environment", "Dockerfile"))
          })
          return yield* buildTaskImage(dir, options)
        }),
      (staging) => Effect.promise(() => rm(staging, { recursive: true, force: true })),
    )
  })

export const resolveTaskImage = (
  task: Task,
  options: ResolveTaskImageOptions = {},
): Effect.Effect<ResolvedTaskImage, ResolveTaskImageError> =>
  Effect.gen(function* () {
    const docker = options.docker ?? connectDocker()
    const { dockerImage, buildContext, dockerfile } = task.environment
    if (dockerImage !== "") {
      if (yield* engineHas(docker, dockerImage))
        return { image: dockerImage, source: sourceOf(dockerImage) }
      // A prebuilt TB image holds the task's environment: only the caller may say what replaces
      // it. Native images are plain sandboxes, which the default aliases serve.
      const defaults = task.format === "native" ? DEFAULT_ALIASES : {}
      const alias = resolveAlias(dockerImage, options.aliases, defaults)
      if (alias !== undefined && (yield* engineHas(docker, alias)))
        return { image: alias, source: sourceOf(alias) }
    }
    if (buildContext !== undefined) {
      const built = yield* buildEnvironment(task, buildContext, dockerfile ?? "Dockerfile", {
        docker,
        aliases: options.aliases,
        network: taskBuildNetwork(task, options.buildNetwork),
      })
      return { image: built.image, source: "built" as const }
    }
    return yield* new TaskImageUnavailable({
      task: `${task.taskSet}/${task.id}`,
      image: dockerImage,
      reason:
        dockerImage === BASE_IMAGE
          ? "is not on the engine: build it with `t1 image build-base`"
          : "is not on the engine (t1 never pulls), and the task has no Dockerfile to build it from: load it into the engine (docker load) or alias it to a local image",
    })
  })

/** A task's wire form with the image it resolves to on this machine's engine (built if needed). */
export const resolvedWireTask = (task: Task) =>
  Effect.flatMap(resolveTaskImage(task), ({ image }) => taskToWire(task, image))

/**
 * A task's wire form for a sandbox driver: the local driver runs every task on this host (no
 * image to resolve, no engine needed), Docker runs the task's own image, and so does bwrap (its
 * files, exported from the engine); auto sends the resolved image, which picks the driver.
 */
export const wireTaskFor =
  (driver: "auto" | "docker" | "local" | "bwrap") =>
  (task: Task): Effect.Effect<TaskMessage, ResolveTaskImageError | TaskWireError> =>
    driver === "local" ? taskToWire(task, BASE_IMAGE) : resolvedWireTask(task)
