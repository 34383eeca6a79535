import { chown, mkdir, mkdtemp, rm } from "node:fs/promises"
import { hostname, tmpdir } from "node:os"
import { basename, join, posix } from "node:path"
import { Clock, Effect, Layer, type Scope } from "effect"
import {
  DEFAULT_PIDS_LIMIT,
  type ExecOptions,
  LABELS,
  SandboxDriver,
  type SandboxDriverShape,
  type SandboxInfo,
  type SandboxSpec,
} from "../driver.ts"
import {
  FileTransferError,
  InvalidSandboxSpec,
  SandboxDied,
  type SandboxError,
  SandboxInfraError,
  SandboxNotFound,
} from "../errors.ts"
import { isSandboxError, openShellSession, type ShellSession } from "../shell/index.ts"
import { createCgroups, killCgroups, removeCgroups } from "./cgroup.ts"
import { spawnShellProcess } from "./child-shell.ts"
import { type Holder, killByEnvironment, killRecordedHolder, startHolder } from "./holder.ts"
import { DEFAULT_PATH, type LocalIsolation, probeIsolation } from "./isolation.ts"
import { shellArgv } from "./launch.ts"
import { listSandboxes, readMeta, type SandboxMeta, writeMeta } from "./metadata.ts"
import { insidePath, planWorkdir, type Workdir, workdirParts } from "./paths.ts"
import { helperAvailable, type SpawnMode } from "./spawner.ts"
import { resolveUser, validateSpec } from "./spec.ts"
import { extractTar, packPath } from "./tar.ts"

export interface LocalDriverOptions {
  /** Where sandbox directories are made. Default: os.tmpdir()/t1-sandboxes. */
  readonly root?: string
  /** Written to the t1.owner label. Default: `<hostname>:<pid>`. */
  readonly owner?: string
  /**
   * "auto" (default): use mount and network namespaces and cgroups where this host allows them
   * (root on Linux). "none": use none of them, as an unprivileged user gets.
   */
  readonly isolation?: "auto" | "none"
  /** See ShellSessionOptions. */
  readonly interruptGraceMs?: number
  /** How long a sandbox's holder and each shell have to start. Default 10000. */
  readonly startTimeoutMs?: number
  /**
   * How sandbox processes are started: "helper" (default) through a small python3 process that
   * forks them, so this process never forks (spawner.ts: from a process holding a model a fork
   * blocked the event loop ~35 ms); "direct" with node's own spawn. Without python3, "helper"
   * starts them directly too.
   */
  readonly spawn?: SpawnMode
}

/** The local driver, plus what it could enforce on this host. */
export interface LocalDriver extends SandboxDriverShape {
  readonly isolation: LocalIsolation
  readonly root: string
  /** How it starts processes (the option, or "direct" where no python3 was found). */
  readonly spawn: SpawnMode
}

export const defaultSandboxesRoot = () => join(tmpdir(), "t1-sandboxes")

/** The environment variable that names a sandbox in each of its processes (used for reaping). */
export const SANDBOX_ID_ENV = "T1_SANDBOX_ID"

interface LocalSandbox {
  readonly workdir: Workdir
  /** The sandbox's work/ directory on the host: what the workdir shows. */
  readonly hostWork: string
  readonly holder: Holder
  readonly session: ShellSession
}

const ID_SHAPE = /^local-[A-Za-z0-9]+$/

/** The tmpfs a sandbox with a mount namespace gets of its own (holder.ts), besides the workdir. */
const PRIVATE_MOUNTS: ReadonlyArray<string> = ["tests", "logs"]

const reasonOf = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** Probing spawns helpers; drivers sharing a root and mode share the answer. */
const probes = new Map<string, Promise<LocalIsolation>>()
const probeOnce = (mode: "auto" | "none", root: string) => {
  const key = `${mode}:${root}`
  const known = probes.get(key)
  if (known !== undefined) return known
  const probe = probeIsolation(mode, root)
  probes.set(key, probe)
  probe.catch(() => probes.delete(key))
  return probe
}

/** Kills every process of sandbox `id` (as recorded in its meta.json) and removes it all. */
const removeSandbox = async (root: string, id: string) => {
  const dir = join(root, id)
  const meta = await readMeta(dir)
  killRecordedHolder(meta?.holder ?? null)
  if (meta !== undefined && meta.cgroups.length > 0) await removeCgroups(meta.cgroups)
  else await killByEnvironment(id)
  await rm(dir, { recursive: true, force: true, maxRetries: 3 })
}

/**
 * A SandboxDriver that needs no container engine: each sandbox is a private directory on this
 * host and one persistent bash. It is a convenience for development, tests and small runs, not
 * a security boundary.
 *
 * As root on Linux it adds: a private mount namespace (the workdir, e.g. /app, is the sandbox
 * directory bind-mounted there; /run, and with it docker.sock, is an empty tmpfs), a network
 * namespace with only loopback for network: false, and cgroups for pidsLimit, memoryMb and cpus.
 * It never has: its own root filesystem (outside the workdir the host's files are read and
 * written, /tmp included), a pid namespace (sandboxes see and can signal every process on the
 * host), its own users (root in a sandbox is root on the host), device or kernel isolation, or
 * any defence against a command that means harm. Without root it has none of the additions:
 * the workdir must be "" (the sandbox directory), network: false is not enforced, pidsLimit is
 * an RLIMIT_NPROC on top of the user's current process count and memoryMb an RLIMIT_AS, both
 * best effort, and cpus is ignored. put and get reach only files under the workdir, and with a
 * mount namespace also under its private /tests and /logs.
 */
export const makeLocalDriver = (
  options: LocalDriverOptions = {},
): Effect.Effect<LocalDriver, SandboxInfraError, Scope.Scope> =>
  Effect.gen(function* () {
    const root = options.root ?? defaultSandboxesRoot()
    const owner = options.owner ?? `${hostname()}:${process.pid}`
    const startTimeoutMs = options.startTimeoutMs ?? 10_000
    const spawnMode: SpawnMode = options.spawn ?? "helper"
    const isolation = yield* Effect.tryPromise({
      try: async () => {
        await mkdir(root, { recursive: true, mode: 0o711 })
        return probeOnce(options.isolation ?? "auto", root)
      },
      catch: (e) => new SandboxInfraError({ operation: "local driver setup", reason: reasonOf(e) }),
    })
    const { tools } = isolation
    const sandboxes = new Map<string, LocalSandbox>()

    const infra = (operation: string) => (e: unknown) =>
      isSandboxError(e) ? e : new SandboxInfraError({ operation, reason: reasonOf(e) })

    const create = (spec: SandboxSpec): Effect.Effect<SandboxInfo, SandboxError> =>
      Effect.gen(function* () {
        const invalid = validateSpec(spec)
        if (invalid !== undefined) return yield* invalid
        const workdir = planWorkdir(spec.workdir, {
          mountNamespace: isolation.mountNamespace,
          sandboxesRoot: root,
        })
        if (workdir instanceof InvalidSandboxSpec) return yield* workdir
        const user = yield* Effect.promise(() =>
          resolveUser(spec.user, tools.setpriv !== undefined),
        )
        if (user instanceof InvalidSandboxSpec) return yield* user
        const networkNamespace = !spec.network && isolation.networkNamespace

        const dir = yield* Effect.tryPromise({
          try: () => mkdtemp(join(root, "local-")),
          catch: infra("create sandbox directory"),
        })
        const id = basename(dir)
        const hostWork = join(dir, "work")
        const home = join(dir, "home")
        const createdAtMs = yield* Clock.currentTimeMillis
        const expiresAtMs = createdAtMs + spec.ttlMs
        const labels = {
          ...spec.labels,
          [LABELS.managed]: "true",
          [LABELS.owner]: owner,
          [LABELS.expiresAt]: String(expiresAtMs),
        }
        const env = {
          PATH: DEFAULT_PATH,
          HOME: home,
          LANG: "C.UTF-8",
          ...spec.env,
          [SANDBOX_ID_ENV]: id,
        }

        let holder: Holder | undefined
        let abandoned = false
        const setUp = async () => {
          await mkdir(hostWork)
          await mkdir(home)
          if (user !== undefined) {
            await chown(hostWork, user.uid, user.gid)
            await chown(home, user.uid, user.gid)
          }
          // Recorded before anything runs, so a crash from here on leaves a reapable sandbox.
          const meta: SandboxMeta = {
            version: 1,
            id,
            labels,
            createdAtMs,
            expiresAtMs,
            workdir: spec.workdir,
            holder: null,
            cgroups: [],
          }
          await writeMeta(dir, meta)
          const cgroups =
            isolation.cgroups === undefined
              ? []
              : await createCgroups(isolation.cgroups, `t1-${id}`, {
                  pids: spec.pidsLimit || DEFAULT_PIDS_LIMIT,
                  memoryBytes: Math.round(spec.memoryMb * 1024 * 1024),
                  cpus: spec.cpus,
                })
          await writeMeta(dir, { ...meta, cgroups: [...cgroups] })
          holder = await startHolder(
            tools,
            {
              mountNamespace: isolation.mountNamespace,
              networkNamespace,
              hostWork,
              mountAt: workdir.kind === "mounted" ? workdir.path : "",
              cgroupProcs: cgroups.map((d) => join(d, "cgroup.procs")),
            },
            { PATH: DEFAULT_PATH, [SANDBOX_ID_ENV]: id },
            startTimeoutMs,
            spawnMode,
          )
          // The create was given up on (interrupted) while the holder started: nothing else will
          // kill it.
          if (abandoned) {
            holder.kill()
            throw new Error("the sandbox's creation was abandoned")
          }
          const { pid, startTime } = holder
          await writeMeta(dir, { ...meta, cgroups: [...cgroups], holder: { pid, startTime } })
          return { holder, cgroups }
        }

        return yield* Effect.gen(function* () {
          const made = yield* Effect.tryPromise({ try: setUp, catch: infra("create sandbox") })
          const launch = {
            tools,
            holderPid: made.holder.pid,
            mountNamespace: isolation.mountNamespace,
            networkNamespace,
            workdir: insidePath(workdir, hostWork),
            user,
            cgroups: made.cgroups,
            pidsLimit: spec.pidsLimit || DEFAULT_PIDS_LIMIT,
            memoryBytes: Math.round(spec.memoryMb * 1024 * 1024),
          }
          const session = yield* openShellSession({
            id,
            startShell: async () => {
              if (!made.holder.alive())
                throw new SandboxDied({ id, reason: "its processes were killed from outside" })
              const [file = "", ...args] = await shellArgv(launch)
              return spawnShellProcess(file, args, { cwd: hostWork, env, spawn: spawnMode })
            },
            startTimeoutMs,
            ...(options.interruptGraceMs === undefined
              ? {}
              : { interruptGraceMs: options.interruptGraceMs }),
          })
          sandboxes.set(id, { workdir, hostWork, holder: made.holder, session })
          return { id, labels, createdAtMs, expiresAtMs } satisfies SandboxInfo
        }).pipe(
          // Failed or interrupted half-way: leave nothing behind.
          Effect.onError(() =>
            Effect.promise(async () => {
              abandoned = true
              holder?.kill()
              await removeSandbox(root, id).catch(() => undefined)
            }),
          ),
        )
      })

    const lookup = (id: string) =>
      Effect.suspend(() => {
        const sandbox = sandboxes.get(id)
        return sandbox === undefined
          ? Effect.fail(new SandboxNotFound({ id }))
          : Effect.succeed(sandbox)
      })

    const exec = (id: string, command: string, execOptions: ExecOptions) =>
      Effect.flatMap(lookup(id), (sandbox) =>
        sandbox.session.exec(command, execOptions).pipe(
          // A shell that cannot be restarted because the holder is gone: the sandbox died.
          Effect.mapError(
            (e): SandboxError =>
              e._tag === "SandboxInfraError" && !sandbox.holder.alive()
                ? new SandboxDied({ id, reason: `its processes were killed (${e.reason})` })
                : e,
          ),
        ),
      )

    /**
     * Where a transfer of `path` happens on this host: below the sandbox directory when the path
     * is in the workdir; elsewhere, in a sandbox with its own mount namespace, through its
     * holder's view of that namespace (/proc/<pid>/root), only in its private /tests and /logs
     * tmpfs: the verifier unpacks tests there in one put instead of a staged copy and a script.
     */
    const transferParts = (sandbox: LocalSandbox, path: string) => {
      const parts = workdirParts(path, sandbox.workdir, sandbox.hostWork)
      if (parts !== undefined) return Effect.succeed({ base: sandbox.hostWork, parts })
      const inNamespace = posix.normalize(path).split("/").filter(Boolean)
      if (
        sandbox.workdir.kind === "mounted" &&
        posix.isAbsolute(path) &&
        PRIVATE_MOUNTS.includes(inNamespace[0] ?? "") &&
        sandbox.holder.alive()
      )
        return Effect.succeed({ base: `/proc/${sandbox.holder.pid}/root`, parts: inNamespace })
      const workdir = insidePath(sandbox.workdir, sandbox.hostWork)
      return Effect.fail(
        new FileTransferError({
          path,
          reason: `outside the workdir ${workdir}: the local driver transfers files only there, and with a mount namespace also in its private ${PRIVATE_MOUNTS.map((m) => `/${m}`).join(" and ")}`,
        }),
      )
    }

    const put = (id: string, path: string, archive: Uint8Array) =>
      Effect.gen(function* () {
        const sandbox = yield* lookup(id)
        const { base, parts } = yield* transferParts(sandbox, path)
        yield* Effect.tryPromise({
          try: () => extractTar(archive, base, parts, path),
          catch: infra("put"),
        })
      })

    const get = (id: string, path: string) =>
      Effect.gen(function* () {
        const sandbox = yield* lookup(id)
        const { base, parts } = yield* transferParts(sandbox, path)
        const rootName = basename(insidePath(sandbox.workdir, sandbox.hostWork))
        return yield* Effect.tryPromise({
          try: () => packPath(base, parts, path, rootName),
          catch: infra("get"),
        })
      })

    /** Also reaps sandboxes this instance did not create (left by a process that died). */
    const destroy = (id: string) =>
      Effect.gen(function* () {
        const sandbox = sandboxes.get(id)
        sandboxes.delete(id)
        if (sandbox !== undefined) {
          yield* sandbox.session.close
          sandbox.holder.kill()
        }
        if (!ID_SHAPE.test(id)) return
        yield* Effect.tryPromise({ try: () => removeSandbox(root, id), catch: infra("destroy") })
      })

    const list = Effect.tryPromise({
      try: () => listSandboxes(root, ID_SHAPE),
      catch: infra("list"),
    })

    // Shutting down ends this driver's sandboxes; a killed process leaves them to a reaper.
    yield* Effect.addFinalizer(() =>
      Effect.forEach([...sandboxes.keys()], (id) => Effect.ignore(destroy(id)), {
        concurrency: 4,
        discard: true,
      }),
    )

    return {
      kind: "local",
      isolation,
      root,
      spawn: spawnMode === "helper" && helperAvailable() ? "helper" : "direct",
      create,
      exec,
      put,
      get,
      destroy,
      list,
    } satisfies LocalDriver
  })

/** The local driver as the SandboxDriver service. */
export const LocalDriverLive = (options: LocalDriverOptions = {}) =>
  Layer.effect(SandboxDriver, makeLocalDriver(options))

/**
 * Kills every process of a sandbox without its driver, as a crash or a `kill -9` from outside
 * would (for tests, and for reapers that keep the directory): its holder, then its cgroups'
 * processes, or without cgroups every process whose environment names the sandbox.
 */
export const killLocalSandboxProcesses = async (
  id: string,
  root: string = defaultSandboxesRoot(),
): Promise<void> => {
  const meta = await readMeta(join(root, id))
  killRecordedHolder(meta?.holder ?? null)
  if (meta !== undefined && meta.cgroups.length > 0) await killCgroups(meta.cgroups)
  else await killByEnvironment(id)
}
