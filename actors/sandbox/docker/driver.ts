import { posix } from "node:path"
import type Dockerode from "dockerode"
import { Clock, Data, Deferred, Duration, Effect, Exit, Layer, type Scope, Semaphore } from "effect"
import {
  LABELS,
  SandboxDriver,
  type SandboxDriverShape,
  type SandboxInfo,
  type SandboxSpec,
} from "../driver.ts"
import {
  EngineUnavailable,
  FileTransferError,
  ImageNotFound,
  InvalidSandboxSpec,
  SandboxDied,
  type SandboxError,
  SandboxInfraError,
  SandboxNotFound,
} from "../errors.ts"
import { BASE_IMAGE } from "../image/base.ts"
import { openShellSession, type ShellSession } from "../shell/index.ts"
import { ensureToolchain, TOOLCHAIN_BASH, TOOLCHAIN_BIN } from "../toolchain/toolchain.ts"
import { directoryArchive, type Owner, reownArchive } from "./archive.ts"
import {
  connectDocker,
  describeEngine,
  engineFailure,
  engineIsLocal,
  isUnreachable,
  readAll,
  reasonOf,
  statusCode,
} from "./engine.ts"
import { bridgeName, installFirewall, removeFirewall } from "./firewall.ts"
import { profileSpan } from "./profile.ts"
import { sealSandbox } from "./seal.ts"
import { dockerShell, runArgv, runOnce } from "./shell.ts"
import {
  CREATED_AT_LABEL,
  containerOptions,
  SANDBOX_NETWORK,
  SANDBOX_NETWORK_OPTIONS,
  specProblem,
  TOOLCHAIN_LABEL,
  WORKDIR_LABEL,
} from "./spec.ts"

export interface DockerDriverOptions {
  /** This driver instance: stored in LABELS.owner on every sandbox it creates. */
  readonly ownerId: string
  /** Default: the engine at DOCKER_HOST, else /var/run/docker.sock. */
  readonly docker?: Dockerode
  /** After a timeout's SIGINT, how long the job has before the shell is replaced (ms). */
  readonly interruptGraceMs?: number
  /**
   * Keep networked sandboxes off this machine with iptables rules on their bridge (default
   * true; see firewall.ts). Needs root and a local engine: without them a networked create
   * fails with an infra error saying so.
   */
  readonly networkFirewall?: boolean
  /** Installs the firewall of a bridge (default: the iptables rules of firewall.ts). */
  readonly installFirewall?: (bridge: string) => Effect.Effect<void, SandboxInfraError>
  /**
   * The image the verifier toolchain is built from (default BASE_IMAGE), mounted read-only into
   * every sandbox so that the verifier runs tests with nothing the agent could change (see
   * toolchain/); false: no toolchain, and the verifier falls back to the sandbox's own programs
   * (forgeable, and said so in every outcome's notes).
   */
  readonly toolchainImage?: string | false
}

/** After the toolchain could not be had, creates go on without it for this long before a retry. */
const TOOLCHAIN_RETRY_MS = 5 * 60_000

/** The engine answered with an HTTP error; the caller decides what it means. */
class EngineStatus extends Data.TaggedError("EngineStatus")<{
  readonly operation: string
  readonly status: number
  readonly reason: string
}> {}

const ROOT = "0:0"

/**
 * Run as the sandbox's user: prints its uid and gid, then makes directory $1 (if given) unless it
 * exists, and says "ok" when it is there, "not-a-directory" when something else is, "denied"
 * when the user may not make it.
 */
const PROBE = [
  'printf \'%s %s \' "$(id -u)" "$(id -g)"',
  'if [ -z "$1" ]; then echo ok; exit 0; fi',
  'if [ -e "$1" ] && [ ! -d "$1" ]; then echo not-a-directory; exit 0; fi',
  '[ -d "$1" ] || mkdir -p -- "$1" 2>/dev/null || true',
  '[ -d "$1" ] && echo ok || echo denied',
].join("\n")

const parseProbe = (output: string): { readonly owner?: Owner; readonly answer: string } => {
  const [uid, gid, answer] = output.trim().split(/\s+/)
  const owner = { uid: Number(uid), gid: Number(gid) }
  return Number.isInteger(owner.uid) && Number.isInteger(owner.gid)
    ? { owner, answer: answer ?? "" }
    : { answer: output.trim() }
}

const infoFromLabels = (
  id: string,
  labels: Readonly<Record<string, string>>,
  createdSeconds: number,
): SandboxInfo => {
  const created = Number(labels[CREATED_AT_LABEL])
  const expires = Number(labels[LABELS.expiresAt])
  return {
    id,
    labels,
    createdAtMs: Number.isFinite(created) && created > 0 ? created : createdSeconds * 1000,
    expiresAtMs: Number.isFinite(expires) && expires > 0 ? expires : 0,
  }
}

/** Which spec field an engine complaint at create/start is about. */
const fieldOf = (reason: string): string =>
  /cpu/i.test(reason)
    ? "cpus"
    : /memory/i.test(reason)
      ? "memoryMb"
      : /pids/i.test(reason)
        ? "pidsLimit"
        : /user|passwd|group/i.test(reason)
          ? "user"
          : /working dir|workdir|cwd/i.test(reason)
            ? "workdir"
            : "spec"

export const makeDockerDriver = (
  options: DockerDriverOptions,
): Effect.Effect<SandboxDriverShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const docker = options.docker ?? connectDocker()
    const engine = describeEngine(docker)
    const sessions = new Map<string, Deferred.Deferred<ShellSession, SandboxError>>()
    const owners = new Map<string, Owner>()
    /** Sandboxes this driver has had a shell in: one that vanishes later died under us. */
    const opened = new Set<string>()
    /**
     * Containers known to be t1 sandboxes (created here, or inspected and labelled so): an
     * execArgv in one needs no inspect first, as the exec's own answer says whether it still
     * runs (ids are never reused).
     */
    const managed = new Set<string>()

    /** An engine call; an HTTP error status is left to the caller as EngineStatus. */
    const call = <A>(
      operation: string,
      run: () => Promise<A>,
    ): Effect.Effect<A, EngineUnavailable | SandboxInfraError | EngineStatus> =>
      Effect.tryPromise({
        try: run,
        catch: (error) => {
          const status = statusCode(error)
          return status === undefined
            ? engineFailure(docker, operation, error)
            : new EngineStatus({ operation, status, reason: reasonOf(error) })
        },
      })

    /** An engine answer nobody expected: an infra failure. */
    const unexpected = (error: EngineStatus) =>
      Effect.fail(
        new SandboxInfraError({
          operation: error.operation,
          reason: `${error.status}: ${error.reason}`,
        }),
      )

    /** The container, if it exists and is a t1 sandbox. */
    const inspectSandbox = (id: string) =>
      call("inspect sandbox", () => docker.getContainer(id).inspect()).pipe(
        Effect.catchTag("EngineStatus", (error) =>
          error.status === 404 ? Effect.succeed(undefined) : unexpected(error),
        ),
        Effect.map((info) => {
          if (info === undefined || info.Config.Labels?.[LABELS.managed] !== "true")
            return undefined
          managed.add(id)
          return info
        }),
      )

    const removeContainer = (id: string) =>
      call("remove sandbox", () => docker.getContainer(id).remove({ force: true, v: true })).pipe(
        Effect.asVoid,
        // 404: already gone; 409: a removal is already under way.
        Effect.catchTag("EngineStatus", (error) =>
          error.status === 404 || error.status === 409 ? Effect.void : unexpected(error),
        ),
      )

    /**
     * The id of the network of sandboxes with network allowed, made when missing. Drivers that
     * race to make it may leave several of that name: all use the oldest (and drop their own
     * newer one). One that lets its containers talk to each other is refused, not used.
     */
    const networkLock = Semaphore.makeUnsafe(1)
    let networkId: string | undefined
    const sandboxNetworks = call("list networks", () =>
      docker.listNetworks({ filters: { name: [SANDBOX_NETWORK] } }),
    ).pipe(
      Effect.catchTag("EngineStatus", unexpected),
      Effect.map((all) =>
        all
          .filter((n) => n.Name === SANDBOX_NETWORK)
          .sort(
            (a, b) => Date.parse(a.Created) - Date.parse(b.Created) || a.Id.localeCompare(b.Id),
          ),
      ),
    )
    const firewallOn = options.networkFirewall !== false
    /** The bridge whose firewall this driver installed. */
    let firewalled: string | undefined
    const ensureSandboxNetwork = networkLock.withPermits(1)(
      Effect.gen(function* () {
        if (networkId !== undefined) return networkId
        let found = yield* sandboxNetworks
        if (found.length === 0) {
          const made = yield* call("create network", () =>
            docker.createNetwork({
              Name: SANDBOX_NETWORK,
              Driver: "bridge",
              CheckDuplicate: true,
              Options: { ...SANDBOX_NETWORK_OPTIONS },
              Labels: { [LABELS.managed]: "true" },
            }),
          ).pipe(
            // 409: another driver made it first.
            Effect.catchTag("EngineStatus", (error) =>
              error.status === 409 ? Effect.succeed(undefined) : unexpected(error),
            ),
          )
          found = yield* sandboxNetworks
          const oldest = found[0]
          if (made !== undefined && oldest !== undefined && made.id !== oldest.Id)
            yield* Effect.ignore(call("remove network", () => made.remove()))
        }
        const oldest = found[0]
        if (oldest === undefined)
          return yield* new SandboxInfraError({
            operation: "create network",
            reason: `network ${SANDBOX_NETWORK} vanished as it was made`,
          })
        const options: Readonly<Record<string, string>> = oldest.Options ?? {}
        for (const [key, value] of Object.entries(SANDBOX_NETWORK_OPTIONS))
          if (options[key] !== value)
            return yield* new SandboxInfraError({
              operation: "inspect network",
              reason: `network ${SANDBOX_NETWORK} exists without ${key}=${value}; remove it so that the driver makes it`,
            })
        if (firewallOn && !engineIsLocal(docker))
          return yield* new SandboxInfraError({
            operation: "firewall sandbox network",
            reason: `the engine at ${engine} is not on this machine, so its sandbox bridge cannot be firewalled from here: run the sandbox host beside its engine, or turn the firewall off (--network-firewall off)`,
          })
        firewalled = firewallOn ? bridgeName(oldest) : undefined
        networkId = oldest.Id
        return oldest.Id
      }),
    )
    /**
     * The sandbox network, with its firewall in place: checked on every networked create, since
     * another host on the engine may have removed the rules when it stopped.
     */
    const firewalledNetwork = Effect.gen(function* () {
      const id = yield* ensureSandboxNetwork
      if (firewalled !== undefined) yield* (options.installFirewall ?? installFirewall)(firewalled)
      return id
    })

    const toolchainLock = Semaphore.makeUnsafe(1)
    let toolchain: { readonly volume: string | undefined; readonly atMs: number } | undefined
    /** The toolchain volume, built on the first create that needs it; undefined when it cannot be. */
    const toolchainVolumeNow = toolchainLock.withPermits(1)(
      Effect.gen(function* () {
        const image = options.toolchainImage ?? BASE_IMAGE
        if (image === false) return undefined
        const now = yield* Clock.currentTimeMillis
        if (
          toolchain !== undefined &&
          (toolchain.volume !== undefined || now - toolchain.atMs < TOOLCHAIN_RETRY_MS)
        )
          return toolchain.volume
        const made = yield* Effect.tryPromise({
          try: () => ensureToolchain(docker, image),
          catch: (error) => (error instanceof Error ? error.message : String(error)),
        }).pipe(
          Effect.catch((reason) =>
            Effect.as(
              Effect.logWarning(
                `verifier toolchain unavailable, sandboxes are created without it (verification falls back to their own programs): ${reason}`,
              ),
              undefined,
            ),
          ),
        )
        toolchain = { volume: made, atMs: yield* Clock.currentTimeMillis }
        return made
      }),
    )

    const invalidSpec = (error: EngineStatus) =>
      Effect.fail(new InvalidSandboxSpec({ field: fieldOf(error.reason), reason: error.reason }))

    /**
     * Learns the sandbox user's uid and gid, and makes directory `path` ("" = none) that user
     * owns when new. The user makes it if it may; else root makes the parent and the engine the
     * directory itself from an archive naming the owner: root inside a sandbox of another user
     * has no capabilities (no-new-privileges), so it could not chown. `trusted`: with the
     * toolchain's bash and tools, since after the agent ran the sandbox's own may be anything
     * (and may start what outlives the verifier's reaping).
     */
    const probe = (id: string, path: string, trusted = false) =>
      Effect.gen(function* () {
        const result = yield* call("probe sandbox", () =>
          runOnce(
            docker,
            id,
            trusted
              ? [TOOLCHAIN_BASH, "-c", `PATH=${TOOLCHAIN_BIN}:$PATH\n${PROBE}`, "probe", path]
              : ["bash", "-c", PROBE, "probe", path],
          ),
        )
        const { owner, answer } = parseProbe(result.output)
        if (owner === undefined || result.exitCode !== 0)
          return { ok: false as const, reason: `probe failed: ${result.output.trim()}` }
        owners.set(id, owner)
        if (answer === "ok") return { ok: true as const, owner }
        if (answer !== "denied") return { ok: false as const, reason: `${path}: ${answer}` }
        const parent = posix.dirname(path)
        const made = yield* call("make directory", () =>
          runOnce(
            docker,
            id,
            [trusted ? `${TOOLCHAIN_BIN}/mkdir` : "mkdir", "-p", "--", parent],
            ROOT,
          ),
        )
        if (made.exitCode !== 0) return { ok: false as const, reason: made.output.trim() }
        const entry = yield* Effect.promise(() => directoryArchive(posix.basename(path), owner))
        yield* call("make directory", () =>
          docker.getContainer(id).putArchive(entry, { path: parent }),
        )
        return { ok: true as const, owner }
      })

    /** The sandbox user's uid and gid, asked of the sandbox once. */
    const ownerOf = (id: string, trusted: boolean) =>
      Effect.suspend(() => {
        const cached = owners.get(id)
        if (cached !== undefined) return Effect.succeed(cached)
        return Effect.flatMap(probe(id, "", trusted), (result) =>
          result.ok
            ? Effect.succeed(result.owner)
            : Effect.fail(
                new SandboxInfraError({ operation: "probe sandbox", reason: result.reason }),
              ),
        )
      })

    /** Starts the container and makes its workdir; a failure leaves nothing behind. */
    const startContainer = (id: string, spec: SandboxSpec) =>
      Effect.gen(function* () {
        // An unknown user fails here: the idle process already runs as the sandbox's user.
        yield* call("start sandbox", () => docker.getContainer(id).start()).pipe(
          Effect.catchTag("EngineStatus", invalidSpec),
        )
        const workdir = yield* probe(id, spec.workdir).pipe(
          Effect.catchTag("EngineStatus", (error) =>
            Effect.fail(
              new InvalidSandboxSpec({
                field: /executable file not found/i.test(error.reason) ? "image" : "workdir",
                reason: /executable file not found/i.test(error.reason)
                  ? `the image has no bash: ${error.reason}`
                  : error.reason,
              }),
            ),
          ),
        )
        if (!workdir.ok)
          return yield* new InvalidSandboxSpec({
            field: "workdir",
            reason: `cannot create ${spec.workdir}: ${workdir.reason}`,
          })
      }).pipe(Effect.onError(() => Effect.ignore(removeContainer(id))))

    const create = (spec: SandboxSpec): Effect.Effect<SandboxInfo, SandboxError> =>
      Effect.gen(function* () {
        const problem = specProblem(spec)
        if (problem !== undefined) return yield* problem
        // Never pulled: an image the engine lacks is the caller's to build.
        const image = yield* call("inspect image", () =>
          docker.getImage(spec.image).inspect(),
        ).pipe(
          Effect.catchTag(
            "EngineStatus",
            (error): Effect.Effect<never, SandboxError> =>
              error.status === 404
                ? Effect.fail(new ImageNotFound({ image: spec.image }))
                : unexpected(error),
          ),
        )
        const network = spec.network ? yield* firewalledNetwork : undefined
        const volume = yield* toolchainVolumeNow
        const createdAtMs = yield* Clock.currentTimeMillis
        const config = containerOptions(spec, {
          owner: options.ownerId,
          createdAtMs,
          network,
          toolchain: volume,
        })
        const container = yield* call("create sandbox", () => docker.createContainer(config)).pipe(
          Effect.catchTag(
            "EngineStatus",
            (error): Effect.Effect<never, SandboxError> =>
              error.status === 404
                ? Effect.fail(new ImageNotFound({ image: spec.image }))
                : error.status < 500
                  ? invalidSpec(error)
                  : unexpected(error),
          ),
        )
        yield* startContainer(container.id, spec)
        managed.add(container.id)
        // The container also carries its image's labels, as list will show.
        const labels = { ...(image.Config.Labels ?? {}), ...config.Labels }
        return infoFromLabels(container.id, labels, Math.floor(createdAtMs / 1000))
      })

    /** The sandbox must exist and run; else SandboxNotFound or SandboxDied. */
    const requireRunning = (id: string) =>
      Effect.gen(function* () {
        const info = yield* inspectSandbox(id)
        if (info === undefined)
          return yield* !opened.has(id)
            ? new SandboxNotFound({ id })
            : new SandboxDied({ id, reason: "the container was removed from outside" })
        if (!info.State.Running)
          return yield* new SandboxDied({
            id,
            reason: `the container is ${info.State.Status} (exit ${info.State.ExitCode}${info.State.OOMKilled ? ", OOM-killed" : ""})`,
          })
        return info
      })

    /** Starting a shell failed: say why in the contract's terms. */
    const startFailure = (id: string, error: unknown): Promise<never> => {
      const status = statusCode(error)
      const reason = reasonOf(error)
      if (status === undefined && isUnreachable(error))
        return Promise.reject(new EngineUnavailable({ engine, reason }))
      if (status === 404)
        return Promise.reject(
          !opened.has(id)
            ? new SandboxNotFound({ id })
            : new SandboxDied({ id, reason: "the container was removed from outside" }),
        )
      if (status === 409)
        return Promise.reject(new SandboxDied({ id, reason: `the container stopped: ${reason}` }))
      return Promise.reject(error)
    }

    const openSession = (id: string) =>
      Effect.gen(function* () {
        const info = yield* requireRunning(id)
        // The shell runs as the container's user: the spec's, else the image's.
        const start = dockerShell(docker, id, {
          user: "",
          workdir: info.Config.Labels?.[WORKDIR_LABEL] ?? info.Config.WorkingDir ?? "",
        })
        const session = yield* openShellSession({
          id,
          startShell: () => start().catch((error: unknown) => startFailure(id, error)),
          ...(options.interruptGraceMs === undefined
            ? {}
            : { interruptGraceMs: options.interruptGraceMs }),
        })
        opened.add(id)
        return session
      })

    /** One session per sandbox, opened by the first exec; concurrent first execs share it. */
    const sessionFor = (id: string): Effect.Effect<ShellSession, SandboxError> =>
      Effect.suspend(() => {
        const existing = sessions.get(id)
        if (existing !== undefined) return Deferred.await(existing)
        const deferred = Deferred.makeUnsafe<ShellSession, SandboxError>()
        sessions.set(id, deferred)
        return openSession(id).pipe(
          Effect.onExit((exit) =>
            Effect.sync(() => {
              if (Exit.isFailure(exit) && sessions.get(id) === deferred) sessions.delete(id)
              Deferred.doneUnsafe(deferred, exit)
            }),
          ),
        )
      })

    const closeSession = (id: string) =>
      Effect.suspend(() => {
        const deferred = sessions.get(id)
        sessions.delete(id)
        if (deferred === undefined) return Effect.void
        return Deferred.await(deferred).pipe(
          Effect.flatMap((session) => session.close),
          Effect.ignore,
        )
      })

    const exec: SandboxDriverShape["exec"] = (id, command, execOptions) =>
      Effect.gen(function* () {
        const session = yield* sessionFor(id)
        return yield* session.exec(command, execOptions)
      }).pipe(
        Effect.catch((error): Effect.Effect<never, SandboxError> => {
          // The session cannot tell a removed container from one it closed: ask the engine.
          if (error._tag !== "SandboxNotFound" && error._tag !== "SandboxInfraError")
            return Effect.fail(error)
          return Effect.flatMap(Effect.exit(requireRunning(id)), (state) =>
            Exit.isFailure(state) ? Effect.failCause(state.cause) : Effect.fail(error),
          )
        }),
      )

    const execArgv: NonNullable<SandboxDriverShape["execArgv"]> = (id, argv, execOptions) =>
      Effect.gen(function* () {
        if (argv.length === 0)
          return yield* new InvalidSandboxSpec({ field: "argv", reason: "argv is empty" })
        // Only t1 sandboxes: one not known to be is inspected first.
        if (!managed.has(id)) yield* requireRunning(id)
        const [took, result] = yield* Effect.timed(
          call("exec", () => runArgv(docker, id, argv, execOptions)).pipe(
            Effect.catchTag("EngineStatus", (error): Effect.Effect<never, SandboxError> => {
              // Gone or stopped: the engine's state says which, in the contract's terms.
              if (error.status === 404 || error.status === 409)
                return Effect.flatMap(
                  requireRunning(id),
                  (): Effect.Effect<never, SandboxError> =>
                    error.status === 404
                      ? Effect.fail(new SandboxNotFound({ id }))
                      : Effect.fail(new SandboxDied({ id, reason: error.reason })),
                )
              return unexpected(error)
            }),
          ),
        )
        return {
          ...result,
          sessionRestarted: false,
          durationMs: Math.round(Duration.toMillis(took)),
        }
      })

    const seal: NonNullable<SandboxDriverShape["seal"]> = (id, sealOptions) =>
      sealSandbox(docker, closeSession, id, sealOptions).pipe(
        Effect.tap((report) =>
          Effect.sync(() => profileSpan("driver: seal", performance.now() - report.durationMs, id)),
        ),
        Effect.catchTag("SandboxNotFound", (error) =>
          Effect.fail(
            opened.has(id)
              ? new SandboxDied({ id, reason: "the container was removed from outside" })
              : error,
          ),
        ),
      )

    /** 404 is the sandbox or the path; anything else the engine refused is about the transfer. */
    const transferError = (id: string, path: string) => (error: EngineStatus) =>
      error.status === 404
        ? Effect.flatMap(inspectSandbox(id), (info) =>
            Effect.fail(
              info === undefined
                ? new SandboxNotFound({ id })
                : new FileTransferError({ path, reason: `${error.operation}: ${error.reason}` }),
            ),
          )
        : Effect.fail(
            new FileTransferError({ path, reason: `${error.operation}: ${error.reason}` }),
          )

    const put: SandboxDriverShape["put"] = (id, path, archive) =>
      Effect.gen(function* () {
        if (!path.startsWith("/"))
          return yield* new FileTransferError({ path, reason: "the path must be absolute" })
        const info = yield* inspectSandbox(id)
        if (info === undefined) return yield* new SandboxNotFound({ id })
        // The files belong to the sandbox's user, who must be able to edit them.
        const trusted = info.Config.Labels?.[TOOLCHAIN_LABEL] !== undefined
        const owner = yield* ownerOf(id, trusted).pipe(
          Effect.catchTag("EngineStatus", (error) =>
            // A stopped sandbox cannot say who its user is: the archive goes in as it is.
            error.status === 409 ? Effect.succeed(undefined) : transferError(id, path)(error),
          ),
        )
        const body =
          owner === undefined
            ? Buffer.from(archive.buffer, archive.byteOffset, archive.byteLength)
            : yield* Effect.tryPromise({
                try: () => reownArchive(archive, owner),
                catch: (error) =>
                  new FileTransferError({ path, reason: `not a tar archive: ${reasonOf(error)}` }),
              })
        const upload = call("put", () => docker.getContainer(id).putArchive(body, { path }))
        return yield* upload.pipe(
          Effect.asVoid,
          Effect.catchTag("EngineStatus", (error) => {
            if (error.status !== 404 || !info.State.Running) return transferError(id, path)(error)
            // A missing target directory is made (as `mkdir -p` before `tar -C`), then retried.
            return Effect.gen(function* () {
              const made = yield* probe(id, path, trusted).pipe(
                Effect.catchTag("EngineStatus", transferError(id, path)),
              )
              if (!made.ok)
                return yield* new FileTransferError({
                  path,
                  reason: `cannot create it: ${made.reason}`,
                })
              yield* upload.pipe(Effect.catchTag("EngineStatus", transferError(id, path)))
            })
          }),
        )
      })

    const get: SandboxDriverShape["get"] = (id, path) =>
      Effect.gen(function* () {
        if (!path.startsWith("/"))
          return yield* new FileTransferError({ path, reason: "the path must be absolute" })
        const info = yield* inspectSandbox(id)
        if (info === undefined) return yield* new SandboxNotFound({ id })
        const bytes = yield* call("get", async () =>
          readAll(await docker.getContainer(id).getArchive({ path })),
        ).pipe(Effect.catchTag("EngineStatus", transferError(id, path)))
        return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
      })

    const destroy: SandboxDriverShape["destroy"] = (id) =>
      Effect.gen(function* () {
        owners.delete(id)
        opened.delete(id)
        managed.delete(id)
        yield* closeSession(id)
        const info = yield* inspectSandbox(id)
        // Only t1 sandboxes are ever removed; anything else is "missing" as far as t1 goes.
        if (info === undefined) return
        yield* removeContainer(id)
      })

    const list: SandboxDriverShape["list"] = call("list sandboxes", () =>
      docker.listContainers({ all: true, filters: { label: [`${LABELS.managed}=true`] } }),
    ).pipe(
      Effect.catchTag("EngineStatus", unexpected),
      Effect.map((containers) =>
        containers
          .map((c) => infoFromLabels(c.Id, c.Labels ?? {}, c.Created))
          .sort((a, b) => a.createdAtMs - b.createdAtMs),
      ),
    )

    // Shells end with the driver; the containers stay for their owner or the reaper.
    yield* Effect.addFinalizer(() =>
      Effect.forEach([...sessions.keys()], closeSession, {
        discard: true,
        concurrency: "unbounded",
      }),
    )
    // The firewall stays while any sandbox (this host's or another's) is on the bridge.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        if (firewalled === undefined || networkId === undefined) return
        // An installer of the caller's own is the caller's to undo.
        if (options.installFirewall !== undefined) return
        const id = networkId
        const left = yield* Effect.promise(() =>
          docker
            .getNetwork(id)
            .inspect()
            .then(
              (n: { Containers?: Record<string, unknown> }) =>
                Object.keys(n.Containers ?? {}).length,
            )
            .catch(() => 0),
        )
        if (left === 0) yield* removeFirewall(firewalled)
      }),
    )

    return {
      kind: "docker",
      create,
      exec,
      execArgv,
      seal,
      put,
      get,
      destroy,
      list,
    } satisfies SandboxDriverShape
  })

/** The docker driver as the SandboxDriver service. */
export const DockerDriverLive = (options: DockerDriverOptions): Layer.Layer<SandboxDriver> =>
  Layer.effect(SandboxDriver, makeDockerDriver(options))

/** True when the engine answers a ping; for choosing between the docker and local drivers. */
export const dockerEngineAvailable = (
  docker: Dockerode = connectDocker(),
): Effect.Effect<boolean> =>
  Effect.tryPromise(() => docker.ping()).pipe(
    Effect.as(true),
    Effect.timeoutOption("3 seconds"),
    Effect.map((answered) => answered._tag === "Some"),
    Effect.catch(() => Effect.succeed(false)),
  )
