import type Dockerode from "dockerode"
import { Clock, Effect } from "effect"
import { LABELS, type SealOptions, type SealReport } from "../driver.ts"
import {
  InvalidSandboxSpec,
  SandboxDied,
  type SandboxError,
  SandboxInfraError,
  SandboxNotFound,
} from "../errors.ts"
import { pristinePathsProblem } from "../pristine.ts"
import { engineFailure, reasonOf, statusCode } from "./engine.ts"
import { RestoreFailed, restorePristine } from "./seal-restore.ts"
import { MAIN_PROCESS, TOOLCHAIN_LABEL } from "./spec.ts"

/** Reported lists of restored and removed paths keep this many (the counts are complete). */
export const SEAL_LIST_CAP = 200

/** How long the fresh init has to start its main process before the seal gives up on it. */
const MAIN_START_MS = 15_000

interface Row {
  readonly pid: number
  readonly ppid: number
  readonly args: string
}

/** `docker top -o pid,ppid,args`: host pids, the command line last (spaces kept). */
const rowsOf = (top: unknown): ReadonlyArray<Row> => {
  const processes: unknown =
    typeof top === "object" && top !== null ? (top as { Processes?: unknown }).Processes : undefined
  if (!Array.isArray(processes)) return []
  return processes.flatMap((row: unknown) =>
    Array.isArray(row) && row.length >= 3
      ? [{ pid: Number(row[0]), ppid: Number(row[1]), args: row.slice(2).map(String).join(" ") }]
      : [],
  )
}

const mainArgs = MAIN_PROCESS.join(" ")
const execingMain = `[${(MAIN_PROCESS[0] ?? "").split("/").pop()}]`

/**
 * What runs in a freshly started sandbox: "ok" when exactly its init (host pid `initPid`) and
 * the toolchain's sleep under it, "starting" while init has not started the sleep yet, else why
 * not.
 */
const others = (rows: ReadonlyArray<Row>, initPid: number) => rows.filter((r) => r.pid !== initPid)

export const freshProcesses = (rows: ReadonlyArray<Row>, initPid: number): string => {
  const init = rows.find((r) => r.pid === initPid)
  // Listed before the runtime's own init stage has executed docker-init (seen on a loaded
  // machine): still starting. Nothing of the agent's runs in the fresh namespace to fake it;
  // past the deadline the caller fails with the message.
  if (init === undefined || !init.args.endsWith(` -- ${mainArgs}`))
    return others(rows, initPid).length === 0 ||
      init === undefined ||
      !init.args.includes("docker-init")
      ? "starting"
      : `its init (pid ${initPid}) is not running docker-init with ${mainArgs}`
  const rest = others(rows, initPid)
  const [only] = rest
  if (only === undefined) return "starting"
  if (rest.length === 1 && only.ppid === initPid) {
    if (only.args === mainArgs) return "ok"
    // Forked by init, not yet the sleep it executes; or inside that exec, where the kernel has
    // named the process but not yet laid out its arguments (ps prints the name in brackets).
    if (only.args === init.args || only.args === execingMain) return "starting"
  }
  return `unexpected processes after the restart: ${rest
    .map((r) => `${r.pid} (parent ${r.ppid}) ${JSON.stringify(r.args.slice(0, 200))}`)
    .join("; ")}`
}

const capped = (paths: ReadonlyArray<string>) => paths.slice(0, SEAL_LIST_CAP)

/**
 * Seals a docker sandbox for the verifier (SandboxDriverShape.seal): counts the processes besides
 * its init and main process, kills its whole PID namespace at once (SIGKILL to its init: a
 * dying namespace cannot fork), starts it again on the same file system (a fresh docker-init and
 * the toolchain's sleep, nothing the agent could have replaced), checks from the host that
 * exactly those two run, then restores the pristine paths (seal-restore.ts). `closeSession` ends
 * the driver's shell session of the sandbox, dead with the namespace.
 */
export const sealSandbox = (
  docker: Dockerode,
  closeSession: (id: string) => Effect.Effect<void>,
  id: string,
  options: SealOptions,
): Effect.Effect<SealReport, SandboxError> =>
  Effect.gen(function* () {
    const problem = pristinePathsProblem(options.pristinePaths)
    if (problem !== undefined) return yield* problem
    if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0)
      return yield* new InvalidSandboxSpec({
        field: "timeoutMs",
        reason: `must be a positive number of milliseconds, got ${options.timeoutMs}`,
      })
    const started = yield* Clock.currentTimeMillis
    const container = docker.getContainer(id)
    const engine = <A>(operation: string, run: () => Promise<A>) =>
      Effect.tryPromise({
        try: run,
        catch: (error): SandboxError => {
          const status = statusCode(error)
          if (status === undefined) return engineFailure(docker, operation, error)
          if (status === 404) return new SandboxNotFound({ id })
          return new SandboxInfraError({ operation, reason: `${status}: ${reasonOf(error)}` })
        },
      })
    const inspect = engine("seal: inspect sandbox", () => container.inspect())
    const top = engine("seal: list processes", () =>
      container.top({ ps_args: "-o pid,ppid,args" }),
    ).pipe(Effect.map(rowsOf))

    const sealed = Effect.gen(function* () {
      const info = yield* inspect
      const labels = info.Config.Labels ?? {}
      if (labels[LABELS.managed] !== "true") return yield* new SandboxNotFound({ id })
      const volume = labels[TOOLCHAIN_LABEL]
      if (volume === undefined)
        return { toolchain: false, stopped: 0, restored: [], removed: [] } as const
      const entrypoint = [...(info.Config.Entrypoint ?? [])].join(" ")
      if (entrypoint !== mainArgs || (info.Config.Cmd ?? []).length > 0)
        return yield* new SandboxInfraError({
          operation: "seal",
          reason: `the sandbox's main process is ${JSON.stringify(entrypoint)}, not ${mainArgs} (created by an older driver?): after a restart the agent could have replaced it`,
        })
      // A sandbox that died under its episode (killed, OOM) is the machinery's failure, as an
      // exec would find it: the episode is re-run, never verified on what was left.
      if (!info.State.Running)
        return yield* new SandboxDied({
          id,
          reason: `the container is ${info.State.Status} (exit ${info.State.ExitCode}${info.State.OOMKilled ? ", OOM-killed" : ""})`,
        })
      const rows = yield* top
      const initPid = info.State.Pid
      const main = rows.find((r) => r.ppid === initPid && r.args === mainArgs)
      const stopped = rows.filter((r) => r.pid !== initPid && r !== main).length
      yield* closeSession(id)
      yield* engine("seal: kill sandbox", () => container.kill({ signal: "SIGKILL" })).pipe(
        Effect.catchTag("SandboxInfraError", (error) =>
          // 409: it stopped meanwhile, which is as good.
          error.reason.startsWith("409") ? Effect.void : Effect.fail(error),
        ),
      )
      yield* engine("seal: wait for the sandbox to stop", () =>
        container.wait({ condition: "not-running" }),
      )
      // Taken while nothing runs (the namespace's init exits only once all its processes are
      // gone), beside the restart, whose init and sleep write nothing.
      const restart = Effect.gen(function* () {
        yield* engine("seal: start sandbox", () => container.start()).pipe(
          Effect.catchTag("SandboxInfraError", (error) =>
            Effect.fail(
              new SandboxDied({
                id,
                reason: `it did not start again after its processes were stopped: ${error.reason}`,
              }),
            ),
          ),
        )
        // A session opened while it was down is of the dead namespace too.
        yield* closeSession(id)
        const deadline = (yield* Clock.currentTimeMillis) + MAIN_START_MS
        let pause = 20
        for (;;) {
          const fresh = yield* inspect
          if (!fresh.State.Running)
            return yield* new SandboxDied({
              id,
              reason: `it stopped right after the restart (exit ${fresh.State.ExitCode})`,
            })
          const verdict = freshProcesses(yield* top, fresh.State.Pid)
          if (verdict === "ok") break
          if (verdict !== "starting" || (yield* Clock.currentTimeMillis) > deadline)
            return yield* new SandboxInfraError({
              operation: "seal",
              reason: verdict === "starting" ? `${mainArgs} did not start` : verdict,
            })
          // Each look is a `ps` by the engine: back off, as a loaded engine starts slowly anyway.
          yield* Effect.sleep(pause)
          pause = Math.min(pause * 2, 320)
        }
      })
      const [diff] = yield* Effect.all(
        [
          engine("seal: list changed files", () =>
            options.pristinePaths.length === 0 ? Promise.resolve([]) : container.changes(),
          ),
          restart,
        ],
        { concurrency: 2 },
      )
      const restore = yield* Effect.tryPromise({
        try: (signal) =>
          restorePristine(docker, id, info.Image, volume, options.pristinePaths, diff, signal),
        catch: (error): SandboxError => {
          if (error instanceof RestoreFailed)
            return new SandboxInfraError({ operation: "seal: restore", reason: error.message })
          const status = statusCode(error)
          if (status === undefined) return engineFailure(docker, "seal: restore", error)
          return new SandboxInfraError({
            operation: "seal: restore",
            reason: `${status}: ${reasonOf(error)}`,
          })
        },
      })
      return { toolchain: true, stopped, ...restore }
    })

    const done = yield* sealed.pipe(
      Effect.timeoutOrElse({
        duration: options.timeoutMs,
        orElse: () =>
          Effect.fail(
            new SandboxInfraError({
              operation: "seal",
              reason: `not done within ${options.timeoutMs} ms`,
            }),
          ),
      }),
    )
    return {
      toolchain: done.toolchain,
      stopped: done.stopped,
      restored: capped(done.restored),
      restoredCount: done.restored.length,
      removed: capped(done.removed),
      removedCount: done.removed.length,
      durationMs: (yield* Clock.currentTimeMillis) - started,
    }
  })
