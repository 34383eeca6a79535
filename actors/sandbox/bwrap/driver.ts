import { randomBytes } from "node:crypto"
import { existsSync, lstatSync, readFileSync } from "node:fs"
import { chown, mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { hostname, tmpdir } from "node:os"
import { join, posix } from "node:path"
import type Dockerode from "dockerode"
import { Clock, Duration, Effect, Layer, type Scope } from "effect"
import { connectDocker } from "../docker/engine.ts"
import { CAPABILITIES, specProblem } from "../docker/spec.ts"
import {
  DEFAULT_PIDS_LIMIT,
  LABELS,
  SandboxDriver,
  type SandboxDriverShape,
  type SandboxInfo,
  type SandboxSpec,
  type SealReport,
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
import { createCgroups, killCgroups, removeCgroups } from "../local/cgroup.ts"
import { killRecordedHolder, processStartTime } from "../local/holder.ts"
import { DEFAULT_PATH } from "../local/isolation.ts"
import { listSandboxes, readMeta, type SandboxMeta, writeMeta } from "../local/metadata.ts"
import { startProcess } from "../local/spawner.ts"
import { pristinePathsProblem } from "../pristine.ts"
import { isSandboxError, openShellSession, type ShellSession } from "../shell/index.ts"
import { TOOLCHAIN_BIN, TOOLCHAIN_ROOT } from "../toolchain/toolchain.ts"
import { KEEPER_SOURCE, Keeper, keeperShell, runThroughKeeper } from "./keeper.ts"
import {
  ensureBwrapBridge,
  makeSandboxNetwork,
  netnsPath,
  removeSandboxNetwork,
} from "./network.ts"
import { type BwrapSupport, BwrapUnsupported, probeBwrap } from "./probe.ts"
import { restorePristine } from "./restore.ts"
import {
  type BwrapImage,
  defaultBwrapCache,
  ensureBwrapImage,
  ensureKeeperBinary,
  ensureLauncher,
  ImageMissing,
} from "./rootfs.ts"

export interface BwrapDriverOptions {
  /** Written to the t1.owner label. Default: `<hostname>:<pid>`. */
  readonly owner?: string
  /** Where sandbox directories (overlay upper layers, metadata) live. Default: tmpdir/t1-bwrap. */
  readonly root?: string
  /** Where exported images and toolchains are cached. Default: /var/cache/t1/bwrap. */
  readonly cacheDir?: string
  /** The bwrap binary. Default /usr/bin/bwrap. */
  readonly bwrap?: string
  /**
   * The host uid the sandboxes' root is (their user namespace maps root to it): an unprivileged
   * uid nothing else on the host uses. Default 951000.
   */
  readonly hostUid?: number
  readonly docker?: Dockerode
  /** See ShellSessionOptions. */
  readonly interruptGraceMs?: number
  /** How long a sandbox's keeper and each shell have to start. Default 10000. */
  readonly startTimeoutMs?: number
  /**
   * The sandbox's keeper: "auto" (default) keeper.c, built once per image where a C compiler
   * and a static libc are here, else keeper.py; "python" keeper.py on the toolchain's Python.
   */
  readonly keeper?: "auto" | "python"
}

export interface BwrapDriver extends SandboxDriverShape {
  readonly root: string
  readonly support: BwrapSupport
}

export const DEFAULT_BWRAP = "/usr/bin/bwrap"
export const DEFAULT_HOST_UID = 951_000
export const defaultBwrapRoot = () => join(tmpdir(), "t1-bwrap")

const ID_SHAPE = /^bwrap-[a-z0-9]+$/
const PYTHON = `${TOOLCHAIN_BIN}/python3.11`
/** Processes of a running sandbox that are not the agent's: the outer bwrap, its init, the keeper. */
const OWN_PROCESSES = 3
const MAX_GET_BYTES = 512 * 1024 * 1024
/** A networked sandbox's address on the bridge, in its directory. */
const ADDRESS_FILE = "address"

/** Joins the cgroups, mounts the overlay in this (private) mount namespace, execs the rest. */
const LAUNCH = `n=$1; shift
while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n - 1)); done
mount -t overlay -o "$1" t1-sandbox "$2" || exit 125
exec 9< "$3" || exit 125
shift 3
exec "$@"`

const reasonOf = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** An image ready for sandboxes, with the argv of their keeper. */
interface Prepared extends BwrapImage {
  readonly keeper: ReadonlyArray<string>
}

interface Sandbox {
  readonly id: string
  readonly dir: string
  readonly image: Prepared
  readonly spec: SandboxSpec
  readonly env: Readonly<Record<string, string>>
  readonly cgroups: ReadonlyArray<string>
  readonly meta: SandboxMeta
  keeper: Keeper
  session: ShellSession | undefined
}

/** OOM kills counted in the sandbox's memory cgroup, for the reason a dead sandbox gives. */
const oomKills = (cgroups: ReadonlyArray<string>): number => {
  for (const dir of cgroups) {
    for (const file of ["memory.oom_control", "memory.events"]) {
      try {
        const match = /^oom_kill (\d+)$/m.exec(readFileSync(join(dir, file), "utf8"))
        if (match !== null) return Number(match[1])
      } catch {}
    }
  }
  return 0
}

/** Pids in the sandbox's pids cgroup (the first of its cgroups). */
const processesIn = async (cgroups: ReadonlyArray<string>): Promise<number[]> => {
  const first = cgroups[0]
  if (first === undefined) return []
  return (await readFile(join(first, "cgroup.procs"), "utf8").catch(() => ""))
    .split("\n")
    .filter(Boolean)
    .map(Number)
}

/**
 * A SandboxDriver on bubblewrap: each sandbox is its own user, pid, mount, network, ipc, uts and
 * cgroup namespaces, with the image's files (exported once from the engine, rootfs.ts) as the
 * read-only lower layer of an overlay whose upper layer is the sandbox's own directory, the
 * verifier toolchain read-only at /.t1v, and nothing else of the host. Its root is root only in
 * its user namespace (on the host an unprivileged uid, DEFAULT_HOST_UID), with Docker's
 * capabilities for a task shell (CAPABILITIES), no new privileges and Docker's seccomp profile
 * (seccomp.ts); network: false leaves loopback only, network: true is a namespace of its own on
 * an isolated port of a host bridge, masqueraded outwards, this machine firewalled off
 * (network.ts). pidsLimit, memoryMb and cpus are cgroup limits. Every process runs
 * under the keeper (keeper.py), so the persistent shell, the verifier's separate processes
 * (execArgv) and file transfers all start inside the sandbox. The seal kills the sandbox's
 * cgroup whole, puts the image's files back under the pristine paths from outside (restore.py,
 * on the upper layer while nothing has it mounted) and starts a fresh keeper on the same files.
 */
export const makeBwrapDriver = (
  options: BwrapDriverOptions = {},
): Effect.Effect<BwrapDriver, EngineUnavailable | SandboxInfraError, Scope.Scope> =>
  Effect.gen(function* () {
    const root = options.root ?? defaultBwrapRoot()
    const cacheDir = options.cacheDir ?? defaultBwrapCache()
    const owner = options.owner ?? `${hostname()}:${process.pid}`
    const hostUid = options.hostUid ?? DEFAULT_HOST_UID
    const startTimeoutMs = options.startTimeoutMs ?? 10_000
    const bwrapPath = options.bwrap ?? DEFAULT_BWRAP
    const support = yield* Effect.tryPromise({
      try: () => probeBwrap({ bwrap: bwrapPath, hostUid }),
      catch: (e) =>
        e instanceof BwrapUnsupported
          ? new EngineUnavailable({ engine: "bwrap", reason: e.message })
          : new SandboxInfraError({ operation: "bwrap driver setup", reason: reasonOf(e) }),
    })
    const launcher = yield* Effect.tryPromise({
      try: async () => {
        await mkdir(root, { recursive: true, mode: 0o711 })
        return options.keeper === "python" ? undefined : await ensureLauncher(cacheDir)
      },
      catch: (e) => new SandboxInfraError({ operation: "bwrap driver setup", reason: reasonOf(e) }),
    })
    let docker: Dockerode | undefined = options.docker
    const images = new Map<string, Promise<Prepared>>()
    const pythonKeeper = [PYTHON, "-I", "-S", "-B", "-c", KEEPER_SOURCE]
    const sandboxes = new Map<string, Sandbox>()

    const imageFor = (image: string): Effect.Effect<Prepared, SandboxError> =>
      Effect.tryPromise({
        try: () => {
          const known = images.get(image)
          if (known !== undefined) return known
          docker ??= connectDocker()
          const engine = docker
          const made = (async (): Promise<Prepared> => {
            const prepared = await Effect.runPromise(
              ensureBwrapImage(engine, image, { cacheDir, bwrap: support.bwrap, hostUid }),
            )
            const binary =
              options.keeper === "python" ? undefined : await ensureKeeperBinary(prepared)
            return { ...prepared, keeper: binary === undefined ? pythonKeeper : [binary] }
          })()
          images.set(image, made)
          made.catch(() => images.delete(image))
          return made
        },
        catch: (e): SandboxError =>
          e instanceof ImageMissing || /ImageMissing|is not on the engine/.test(reasonOf(e))
            ? new ImageNotFound({ image })
            : new SandboxInfraError({ operation: "prepare image", reason: reasonOf(e) }),
      })

    const bwrapArgs = (sandbox: {
      id: string
      spec: SandboxSpec
      image: Prepared
      dir: string
    }) => [
      "--unshare-user",
      "--unshare-pid",
      "--unshare-ipc",
      "--unshare-uts",
      "--unshare-cgroup",
      // With network: the namespace the launcher joined (network.ts), and the host's resolver.
      ...(sandbox.spec.network
        ? ["--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"]
        : ["--unshare-net"]),
      "--uid",
      "0",
      "--gid",
      "0",
      "--hostname",
      sandbox.id,
      "--die-with-parent",
      "--new-session",
      "--bind",
      join(sandbox.dir, "merged"),
      "/",
      "--ro-bind",
      sandbox.image.toolchain,
      TOOLCHAIN_ROOT,
      "--proc",
      "/proc",
      "--dev",
      "/dev",
      "--perms",
      "1777",
      "--tmpfs",
      "/dev/shm",
      "--cap-drop",
      "ALL",
      ...CAPABILITIES.flatMap((c) => ["--cap-add", `CAP_${c}`]),
      "--seccomp",
      "9",
      "--chdir",
      "/",
      "--",
      ...sandbox.image.keeper,
    ]

    /** Starts the sandbox's processes (its keeper) on its directory; resolves once it answers. */
    const launch = async (sandbox: {
      id: string
      spec: SandboxSpec
      image: Prepared
      dir: string
      cgroups: ReadonlyArray<string>
    }): Promise<Keeper> => {
      const overlay = [
        `lowerdir=${sandbox.image.rootfs}`,
        `upperdir=${join(sandbox.dir, "upper")}`,
        `workdir=${join(sandbox.dir, "work")}`,
        "redirect_dir=off",
        "metacopy=off",
        "index=off",
      ].join(",")
      const steps = [
        String(sandbox.cgroups.length),
        ...sandbox.cgroups.map((d) => join(d, "cgroup.procs")),
        overlay,
        join(sandbox.dir, "merged"),
        sandbox.image.seccomp,
      ]
      const netns = sandbox.spec.network ? netnsPath(sandbox.id) : ""
      const [file, ...argv] =
        launcher !== undefined
          ? [launcher, String(hostUid), netns, ...steps, support.bwrap, ...bwrapArgs(sandbox)]
          : [
              ...(netns === "" ? [] : [support.nsenter, `--net=${netns}`, "--"]),
              support.unshare,
              "-m",
              "--propagation",
              "private",
              "--",
              support.sh,
              "-c",
              LAUNCH,
              "t1-bwrap",
              ...steps,
              support.setpriv,
              `--reuid=${hostUid}`,
              `--regid=${hostUid}`,
              "--clear-groups",
              "--",
              support.bwrap,
              ...bwrapArgs(sandbox),
            ]
      const started = await startProcess("helper", file ?? support.unshare, argv, {
        cwd: sandbox.dir,
        env: { PATH: DEFAULT_PATH },
      })
      const keeper = new Keeper(started)
      let timer: NodeJS.Timeout | undefined
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`the sandbox did not start within ${startTimeoutMs} ms`)),
          startTimeoutMs,
        )
      })
      try {
        await Promise.race([keeper.ready, late])
      } catch (e) {
        keeper.kill()
        throw e
      } finally {
        clearTimeout(timer)
      }
      return keeper
    }

    const infra = (operation: string) => (e: unknown) =>
      isSandboxError(e) ? e : new SandboxInfraError({ operation, reason: reasonOf(e) })

    /** Why a sandbox whose keeper is gone died, as docker says it (OOM-killed or not). */
    const deathOf = (sandbox: Sandbox) => {
      const ooms = oomKills(sandbox.cgroups)
      return new SandboxDied({
        id: sandbox.id,
        reason: `${sandbox.keeper.deathReason ?? "its processes were killed"}${ooms > 0 ? ` (OOM-killed: ${ooms} kills in its memory cgroup)` : ""}`,
      })
    }

    const openSession = (sandbox: Sandbox) =>
      openShellSession({
        id: sandbox.id,
        startShell: async () => {
          if (!sandbox.keeper.alive) throw deathOf(sandbox)
          const child = await sandbox.keeper.spawn(["bash", "--noprofile", "--norc"], {
            cwd: sandbox.spec.workdir === "" ? "/" : sandbox.spec.workdir,
            env: sandbox.env,
            stdin: true,
          })
          return keeperShell(sandbox.keeper, child)
        },
        startTimeoutMs,
        ...(options.interruptGraceMs === undefined
          ? {}
          : { interruptGraceMs: options.interruptGraceMs }),
      })

    /**
     * Makes the workdir in the upper layer before the first start (no process runs yet), owned
     * by the sandbox's root; false when the image's path to it is not plain directories.
     */
    const makeWorkdir = async (dir: string, image: BwrapImage, workdir: string) => {
      const parts = posix.normalize(workdir).split("/").filter(Boolean)
      let lower = image.rootfs
      for (const part of parts) {
        lower = join(lower, part)
        const stat = existsSync(lower) ? lstatSync(lower) : undefined
        if (stat === undefined) break
        if (!stat.isDirectory()) return false
      }
      let upper = join(dir, "upper")
      for (const part of parts) {
        upper = join(upper, part)
        if (existsSync(upper)) continue
        await mkdir(upper)
        await chown(upper, hostUid, hostUid)
      }
      return true
    }

    let addressing: Promise<void> = Promise.resolve()
    /** The addresses of this root's networked sandboxes. */
    const addressesInUse = async () => {
      const taken = new Set<string>()
      for (const entry of await readdir(root).catch(() => [])) {
        if (!ID_SHAPE.test(entry)) continue
        const address = await readFile(join(root, entry, ADDRESS_FILE), "utf8").catch(() => "")
        if (address !== "") taken.add(address.trim())
      }
      return taken
    }

    const removeSandbox = async (id: string) => {
      const dir = join(root, id)
      const meta = await readMeta(dir)
      killRecordedHolder(meta?.holder ?? null)
      if (meta !== undefined && meta.cgroups.length > 0) await removeCgroups(meta.cgroups)
      await removeSandboxNetwork(id)
      await rm(dir, { recursive: true, force: true, maxRetries: 3 })
    }

    const create = (spec: SandboxSpec): Effect.Effect<SandboxInfo, SandboxError> =>
      Effect.gen(function* () {
        const problem = specProblem(spec)
        if (problem !== undefined) return yield* problem
        if (spec.user !== "" && spec.user !== "root" && spec.user !== "0" && spec.user !== "0:0")
          return yield* new InvalidSandboxSpec({
            field: "user",
            reason: `the bwrap driver runs sandboxes as their root only (its user namespace maps one uid), got ${spec.user}`,
          })
        if (spec.workdir !== "" && /(^|\/)\.\.?(\/|$)/.test(spec.workdir))
          return yield* new InvalidSandboxSpec({
            field: "workdir",
            reason: `must not contain . or .. components: ${spec.workdir}`,
          })
        const image = yield* imageFor(spec.image)
        if (spec.network)
          yield* ensureBwrapBridge().pipe(
            Effect.mapError(
              (e) =>
                new SandboxInfraError({
                  operation: "sandbox network",
                  reason: `${e.message} (networked bwrap sandboxes need root, ip and iptables)`,
                }),
            ),
          )
        const id = `bwrap-${randomBytes(8).toString("hex")}`
        const dir = join(root, id)
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
          HOME: "/root",
          ...image.env,
          HOSTNAME: id,
          ...spec.env,
        }
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
        let keeper: Keeper | undefined
        let abandoned = false
        const setUp = async () => {
          await mkdir(dir)
          for (const sub of ["upper", "work", "merged"]) await mkdir(join(dir, sub))
          await chown(join(dir, "upper"), hostUid, hostUid)
          await writeMeta(dir, meta)
          const cgroups = await createCgroups(support.cgroups, `t1-${id}`, {
            pids: spec.pidsLimit || DEFAULT_PIDS_LIMIT,
            memoryBytes: Math.round(spec.memoryMb * 1024 * 1024),
            cpus: spec.cpus,
          })
          await writeMeta(dir, { ...meta, cgroups: [...cgroups] })
          const inUpper = spec.workdir === "" || (await makeWorkdir(dir, image, spec.workdir))
          if (spec.network) {
            // One at a time, each sandbox's address kept in its directory: no two alike.
            const made = addressing.then(async () => {
              const { address } = await makeSandboxNetwork(id, await addressesInUse())
              await writeFile(join(dir, ADDRESS_FILE), address)
            })
            addressing = made.catch(() => undefined)
            await made
          }
          keeper = await launch({ id, spec, image, dir, cgroups })
          if (abandoned) {
            keeper.kill()
            throw new Error("the sandbox's creation was abandoned")
          }
          const pid = keeper.process.pid
          const startTime = processStartTime(pid) ?? ""
          const recorded = { ...meta, cgroups: [...cgroups], holder: { pid, startTime } }
          await writeMeta(dir, recorded)
          if (!inUpper) {
            const made = await runThroughKeeper(
              keeper,
              [`${TOOLCHAIN_BIN}/mkdir`, "-p", "--", spec.workdir],
              { env, timeoutMs: startTimeoutMs, maxOutputBytes: 4096 },
            )
            if (made.exitCode !== 0)
              throw new InvalidSandboxSpec({
                field: "workdir",
                reason: `cannot create ${spec.workdir}: ${new TextDecoder().decode(made.output).trim()}`,
              })
          }
          return { keeper, cgroups, meta: recorded }
        }
        return yield* Effect.gen(function* () {
          const made = yield* Effect.tryPromise({ try: setUp, catch: infra("create sandbox") })
          const sandbox: Sandbox = {
            id,
            dir,
            image,
            spec,
            env,
            cgroups: made.cgroups,
            meta: made.meta,
            keeper: made.keeper,
            session: undefined,
          }
          sandbox.session = yield* openSession(sandbox)
          sandboxes.set(id, sandbox)
          return { id, labels, createdAtMs, expiresAtMs } satisfies SandboxInfo
        }).pipe(
          Effect.onError(() =>
            Effect.promise(async () => {
              abandoned = true
              keeper?.kill()
              await removeSandbox(id).catch(() => undefined)
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

    const running = (id: string) =>
      Effect.flatMap(lookup(id), (sandbox) =>
        sandbox.keeper.alive ? Effect.succeed(sandbox) : Effect.fail(deathOf(sandbox)),
      )

    const exec: SandboxDriverShape["exec"] = (id, command, execOptions) =>
      Effect.gen(function* () {
        const sandbox = yield* lookup(id)
        if (sandbox.session === undefined) {
          if (!sandbox.keeper.alive) return yield* deathOf(sandbox)
          sandbox.session = yield* openSession(sandbox)
        }
        const session = sandbox.session
        return yield* session
          .exec(command, execOptions)
          .pipe(
            Effect.mapError(
              (e): SandboxError =>
                e._tag === "SandboxInfraError" && !sandbox.keeper.alive ? deathOf(sandbox) : e,
            ),
          )
      })

    const execArgv: NonNullable<SandboxDriverShape["execArgv"]> = (id, argv, execOptions) =>
      Effect.gen(function* () {
        if (argv.length === 0)
          return yield* new InvalidSandboxSpec({ field: "argv", reason: "argv is empty" })
        const sandbox = yield* running(id)
        const [took, result] = yield* Effect.timed(
          Effect.tryPromise({
            try: () =>
              runThroughKeeper(sandbox.keeper, argv, {
                env: sandbox.env,
                timeoutMs: execOptions.timeoutMs,
                maxOutputBytes: execOptions.maxOutputBytes,
              }),
            catch: (e) =>
              sandbox.keeper.alive
                ? new SandboxInfraError({ operation: "exec", reason: reasonOf(e) })
                : deathOf(sandbox),
          }),
        )
        return {
          ...result,
          sessionRestarted: false,
          durationMs: Math.round(Duration.toMillis(took)),
        }
      })

    /** Runs a toolchain program in the sandbox for a file transfer. */
    const transfer = (
      sandbox: Sandbox,
      path: string,
      script: string,
      input: Uint8Array | undefined,
      maxOutputBytes: number,
    ) =>
      Effect.tryPromise({
        try: async () => {
          const child = await sandbox.keeper.spawn(
            [
              `${TOOLCHAIN_BIN}/bash`,
              "--noprofile",
              "--norc",
              "-p",
              "-c",
              `PATH=${TOOLCHAIN_BIN}\n${script}`,
              "t1-transfer",
              path,
            ],
            { cwd: "/", env: { PATH: TOOLCHAIN_BIN, LANG: "C.UTF-8" }, stdin: input !== undefined },
          )
          const chunks: Uint8Array[] = []
          let size = 0
          child.onOutput((chunk) => {
            size += chunk.byteLength
            if (size <= maxOutputBytes) chunks.push(chunk)
          })
          const exit = new Promise<{ code: number | null }>((resolve) =>
            child.onExit((e) => child.onEof(() => resolve(e))),
          )
          if (input !== undefined) {
            for (let at = 0; at < input.byteLength; at += 1 << 20)
              await child.write(input.subarray(at, at + (1 << 20)))
            child.closeStdin()
          }
          const { code } = await exit
          if (!sandbox.keeper.alive) throw deathOf(sandbox)
          const output = Buffer.concat(chunks)
          if (code !== 0)
            throw new FileTransferError({
              path,
              reason: output.toString("utf8").trim().slice(-1000) || `exit ${code}`,
            })
          if (size > maxOutputBytes)
            throw new FileTransferError({ path, reason: `larger than ${maxOutputBytes} bytes` })
          return new Uint8Array(output.buffer, output.byteOffset, output.byteLength)
        },
        catch: infra("transfer"),
      })

    const put: SandboxDriverShape["put"] = (id, path, archive) =>
      Effect.gen(function* () {
        if (!path.startsWith("/"))
          return yield* new FileTransferError({ path, reason: "the path must be absolute" })
        const sandbox = yield* running(id)
        // In the sandbox, with its privileges: nothing the archive or the agent's links name
        // can reach outside it. Files belong to the sandbox's root, as docker's put gives them.
        yield* transfer(
          sandbox,
          path,
          'mkdir -p -- "$1" && exec tar -x --no-same-owner -f - -C "$1"',
          archive,
          64 * 1024,
        )
      })

    const get: SandboxDriverShape["get"] = (id, path) =>
      Effect.gen(function* () {
        if (!path.startsWith("/"))
          return yield* new FileTransferError({ path, reason: "the path must be absolute" })
        const sandbox = yield* running(id)
        const clean = posix.normalize(path).replace(/\/+$/, "") || "/"
        const parent = posix.dirname(clean)
        const name = clean === "/" ? "." : posix.basename(clean)
        return yield* transfer(
          sandbox,
          clean,
          `exec tar -c -f - -C ${shellWord(parent)} -- ${shellWord(name)} 2>/dev/null || { echo "cannot read $1" >&2; exit 2; }`,
          undefined,
          MAX_GET_BYTES,
        )
      })

    const seal: NonNullable<SandboxDriverShape["seal"]> = (id, sealOptions) =>
      Effect.gen(function* () {
        const problem = pristinePathsProblem(sealOptions.pristinePaths)
        if (problem !== undefined) return yield* problem
        if (!Number.isFinite(sealOptions.timeoutMs) || sealOptions.timeoutMs <= 0)
          return yield* new InvalidSandboxSpec({
            field: "timeoutMs",
            reason: `must be a positive number of milliseconds, got ${sealOptions.timeoutMs}`,
          })
        const started = yield* Clock.currentTimeMillis
        const sandbox = yield* running(id)
        const sealed = Effect.tryPromise({
          try: async (): Promise<SealReport> => {
            const before = await processesIn(sandbox.cgroups)
            const stopped = Math.max(0, before.length - OWN_PROCESSES)
            const session = sandbox.session
            sandbox.session = undefined
            if (session !== undefined) await Effect.runPromise(session.close)
            sandbox.keeper.kill()
            // The whole cgroup, however many the agent forked: nothing of it outlives this.
            await killCgroups(sandbox.cgroups)
            if ((await processesIn(sandbox.cgroups)).length > 0)
              throw new Error("its processes could not all be killed")
            const restore = await restorePristine(
              support.python,
              join(sandbox.dir, "upper"),
              sandbox.image.rootfs,
              sealOptions.pristinePaths,
            )
            sandbox.keeper = await relaunch(sandbox)
            const after = await processesIn(sandbox.cgroups)
            if (after.length !== OWN_PROCESSES)
              throw new Error(
                `${after.length} processes run after the restart, not the ${OWN_PROCESSES} of a fresh sandbox`,
              )
            const pid = sandbox.keeper.process.pid
            await writeMeta(sandbox.dir, {
              ...sandbox.meta,
              holder: { pid, startTime: processStartTime(pid) ?? "" },
            })
            return {
              toolchain: true,
              stopped,
              restored: restore.restored.slice(0, 200),
              restoredCount: restore.restored.length,
              removed: restore.removed.slice(0, 200),
              removedCount: restore.removed.length,
              durationMs: 0,
            }
          },
          catch: (e) =>
            isSandboxError(e)
              ? e
              : new SandboxInfraError({ operation: "seal", reason: reasonOf(e) }),
        })
        const report = yield* sealed.pipe(
          Effect.timeoutOrElse({
            duration: sealOptions.timeoutMs,
            orElse: () =>
              Effect.fail(
                new SandboxInfraError({
                  operation: "seal",
                  reason: `not done within ${sealOptions.timeoutMs} ms`,
                }),
              ),
          }),
        )
        return { ...report, durationMs: (yield* Clock.currentTimeMillis) - started }
      })

    /** A fresh keeper on the sandbox's files, retried while the old overlay is still going away. */
    const relaunch = async (sandbox: Sandbox): Promise<Keeper> => {
      let last: unknown
      for (let attempt = 0; attempt < 20; attempt++) {
        try {
          return await launch(sandbox)
        } catch (e) {
          last = e
          await new Promise((r) => setTimeout(r, 25))
        }
      }
      throw new Error(`it did not start again after its processes were stopped: ${reasonOf(last)}`)
    }

    const destroy: SandboxDriverShape["destroy"] = (id) =>
      Effect.gen(function* () {
        const sandbox = sandboxes.get(id)
        sandboxes.delete(id)
        if (sandbox !== undefined) {
          if (sandbox.session !== undefined) yield* sandbox.session.close
          sandbox.keeper.kill()
        }
        if (!ID_SHAPE.test(id)) return
        yield* Effect.tryPromise({ try: () => removeSandbox(id), catch: infra("destroy") })
      })

    const list: SandboxDriverShape["list"] = Effect.tryPromise({
      try: () => listSandboxes(root, ID_SHAPE),
      catch: infra("list"),
    })

    yield* Effect.addFinalizer(() =>
      Effect.forEach([...sandboxes.keys()], (id) => Effect.ignore(destroy(id)), {
        concurrency: 4,
        discard: true,
      }),
    )

    return {
      kind: "bwrap",
      root,
      support,
      create,
      exec,
      execArgv,
      seal,
      put,
      get,
      destroy,
      list,
    } satisfies BwrapDriver
  })

const shellWord = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`

/** The bwrap driver as the SandboxDriver service. */
export const BwrapDriverLive = (options: BwrapDriverOptions = {}) =>
  Layer.effect(SandboxDriver, makeBwrapDriver(options))

/** Kills every process of a sandbox without its driver, as a kill -9 from outside would. */
export const killBwrapSandboxProcesses = async (
  id: string,
  root: string = defaultBwrapRoot(),
): Promise<void> => {
  const meta = await readMeta(join(root, id))
  if (meta === undefined) return
  killRecordedHolder(meta.holder)
  await killCgroups(meta.cgroups)
}
