/**
 * Which driver a sandbox host runs, from the name a user gave (`--driver`, T1_SANDBOX_DRIVER):
 *
 *   - auto (the default): bwrap for tasks on the t1 base image when bwrap works on this machine,
 *     docker for tasks with their own images and for every task when bwrap does not work (said
 *     once, with the reason and the fix);
 *   - bwrap, docker: that driver, failing at start with the reason and the fix when it cannot run;
 *   - local: a shell on this host, not a security boundary (said once).
 */
import { Effect, type Scope } from "effect"
import { DEFAULT_BWRAP, DEFAULT_HOST_UID, makeBwrapDriver, probeBwrap } from "./bwrap/index.ts"
import { dockerEngineAvailable, makeDockerDriver } from "./docker/index.ts"
import type { SandboxDriverShape } from "./driver.ts"
import { EngineUnavailable, InvalidCommand, SandboxInfraError } from "./errors.ts"
import { BASE_IMAGE } from "./image/index.ts"
import { makeLocalDriver } from "./local/index.ts"

export const SANDBOX_DRIVERS = ["auto", "bwrap", "docker", "local"] as const
export type SandboxDriverChoice = (typeof SANDBOX_DRIVERS)[number]

export const isSandboxDriverChoice = (name: string): name is SandboxDriverChoice =>
  (SANDBOX_DRIVERS as ReadonlyArray<string>).includes(name)

/** Said once whenever the local driver is chosen. */
export const LOCAL_DRIVER_WARNING =
  "sandboxes: the local driver is not a security boundary: the agent's commands run on this host (its /tmp, its processes, root as root) and verification uses their own shell and Python (unguarded; outcomes say so); use --driver auto, bwrap or docker for anything you do not trust"

/** Images whose files are t1's base image: the ones auto runs on bwrap. */
export const isBaseImage = (image: string): boolean =>
  image === BASE_IMAGE || image.startsWith(`${BASE_IMAGE.split(":")[0]}:`)

const DOCKER_HOST = () => process.env.DOCKER_HOST ?? "unix:///var/run/docker.sock"

export interface ChosenDriverOptions {
  /** Written to the t1.owner label of every sandbox. */
  readonly owner: string
  /** Local and bwrap drivers: where sandbox directories live (each driver's default otherwise). */
  readonly root?: string
  /** Bwrap driver: the bwrap program (default /usr/bin/bwrap). */
  readonly bwrap?: string
  /** Docker driver: see DockerDriverOptions.networkFirewall. */
  readonly networkFirewall?: boolean
  readonly interruptGraceMs?: number
  /** Where the fallback and the local warning are said; default Effect.logWarning. */
  readonly say?: (line: string) => Effect.Effect<void>
}

export type ChosenDriverError = EngineUnavailable | SandboxInfraError

/**
 * Base-image sandboxes on bwrap, the rest on docker. Ids say their driver (bwrap's start with
 * `bwrap-`), so operations on an id, a reaper's included, need no table.
 */
export const autoRouter = (
  bwrap: SandboxDriverShape,
  docker: SandboxDriverShape,
): SandboxDriverShape => {
  const of = (id: string) => (id.startsWith("bwrap-") ? bwrap : docker)
  return {
    // Most of what a host under auto runs (the ladder, the bundled sets) is on bwrap.
    kind: "bwrap",
    create: (spec) => (isBaseImage(spec.image) ? bwrap : docker).create(spec),
    exec: (id, command, options) => of(id).exec(id, command, options),
    execArgv: (id, argv, options) => {
      const driver = of(id)
      return driver.execArgv === undefined
        ? Effect.fail(
            new InvalidCommand({ reason: `the ${driver.kind} driver has no argv execution` }),
          )
        : driver.execArgv(id, argv, options)
    },
    seal: (id, options) => {
      const driver = of(id)
      return driver.seal === undefined
        ? Effect.fail(
            new SandboxInfraError({ operation: "seal", reason: `${driver.kind} cannot seal` }),
          )
        : driver.seal(id, options)
    },
    put: (id, path, tar) => of(id).put(id, path, tar),
    get: (id, path) => of(id).get(id, path),
    destroy: (id) => of(id).destroy(id),
    // Without an engine the bwrap sandboxes still run, and still need reaping.
    list: Effect.all([
      bwrap.list,
      docker.list.pipe(Effect.catchTag("EngineUnavailable", () => Effect.succeed([] as const))),
    ]).pipe(Effect.map(([a, b]) => [...a, ...b])),
  }
}

/**
 * The bwrap driver's own check (binary, root, user namespaces, cgroups), for a process that
 * starts its sandbox host later: EngineUnavailable with the reason and the fix.
 */
export const checkBwrapRuns = (bwrap = DEFAULT_BWRAP): Effect.Effect<void, EngineUnavailable> =>
  Effect.tryPromise({
    try: () => probeBwrap({ bwrap, hostUid: DEFAULT_HOST_UID }),
    catch: (e) =>
      new EngineUnavailable({
        engine: "bwrap",
        reason: e instanceof Error ? e.message : String(e),
      }),
  }).pipe(Effect.asVoid)

/**
 * What `choice` runs base-image sandboxes on here, for reports: `auto` resolved the way
 * makeChosenDriver resolves it (bwrap when its own check passes, else docker).
 */
export const baseImageDriver = (
  choice: SandboxDriverChoice,
  bwrap = DEFAULT_BWRAP,
): Effect.Effect<"bwrap" | "docker" | "local"> =>
  choice === "auto"
    ? Effect.match(checkBwrapRuns(bwrap), {
        onSuccess: () => "bwrap" as const,
        onFailure: () => "docker" as const,
      })
    : Effect.succeed(choice)

const engineDown = (extra = "") =>
  new EngineUnavailable({
    engine: DOCKER_HOST(),
    reason: `no answer to ping (is dockerd running? DOCKER_HOST?)${extra}`,
  })

/**
 * The driver `choice` names, made once in the scope. A driver that cannot run here fails now
 * (EngineUnavailable with the reason and the fix), before any sandbox is asked for.
 */
export const makeChosenDriver = (
  choice: SandboxDriverChoice,
  options: ChosenDriverOptions,
): Effect.Effect<SandboxDriverShape, ChosenDriverError, Scope.Scope> =>
  Effect.gen(function* () {
    const say = options.say ?? ((line: string) => Effect.logWarning(line))
    const grace =
      options.interruptGraceMs === undefined ? {} : { interruptGraceMs: options.interruptGraceMs }
    const root = options.root === undefined ? {} : { root: options.root }
    const docker = () =>
      makeDockerDriver({
        ownerId: options.owner,
        ...grace,
        ...(options.networkFirewall === undefined
          ? {}
          : { networkFirewall: options.networkFirewall }),
      })
    const bwrap = () =>
      makeBwrapDriver({
        owner: options.owner,
        ...root,
        ...grace,
        ...(options.bwrap === undefined ? {} : { bwrap: options.bwrap }),
      })
    switch (choice) {
      case "local":
        yield* say(LOCAL_DRIVER_WARNING)
        return yield* makeLocalDriver({ owner: options.owner, ...root, ...grace })
      case "bwrap":
        return yield* bwrap()
      case "docker":
        if (!(yield* dockerEngineAvailable())) return yield* engineDown()
        return yield* docker()
      case "auto": {
        const tried = yield* Effect.result(bwrap())
        if (tried._tag === "Success") return autoRouter(tried.success, yield* docker())
        const why =
          tried.failure._tag === "EngineUnavailable" ? tried.failure.reason : tried.failure.message
        if (!(yield* dockerEngineAvailable()))
          return yield* engineDown(`; and bwrap cannot run here either: ${why}`)
        yield* say(`sandboxes: auto runs every task on docker: bwrap cannot run here: ${why}`)
        return yield* docker()
      }
    }
  })
