import { randomUUID } from "node:crypto"
import { readFile } from "node:fs/promises"
import { basename } from "node:path"
import { Console, Data, Effect, type Layer } from "effect"
import { DockerDriverLive, dockerEngineAvailable } from "../actors/sandbox/docker/index.ts"
import { SandboxDriver, type SandboxDriverShape, sandboxSpec } from "../actors/sandbox/driver.ts"
import { LocalDriverLive } from "../actors/sandbox/local/index.ts"
import { packFiles } from "../actors/sandbox/tar-bytes.ts"
import { driverSandbox, type VerifierOutcome, verifyEpisode } from "../actors/verifier/index.ts"
import { resolveTaskImage } from "./image.ts"
import { loadTasks } from "./load/index.ts"
import type { Task } from "./task.ts"

export class TaskCheckFailed extends Data.TaggedError("TaskCheckFailed")<{
  readonly failed: ReadonlyArray<string>
}> {
  override get message(): string {
    return `${this.failed.length} task(s) failed the check: ${this.failed.join(", ")}`
  }
}

export interface CheckRow {
  readonly task: string
  readonly reference: VerifierOutcome | string
  readonly noop: VerifierOutcome | string
  readonly seconds: number
  /** The reference solution resolves the task and a no-op agent does not. */
  readonly ok: boolean
}

const SCRIPTS = "/tmp/t1-check"

/** Runs one episode stand-in: setup, then the reference solution (or nothing), then the tests. */
const runOnce = (driver: SandboxDriverShape, task: Task, image: string, solve: boolean) =>
  Effect.acquireUseRelease(
    driver.create(
      sandboxSpec({
        image,
        workdir: task.environment.workdir,
        network: task.environment.allowInternet,
        cpus: task.environment.cpus,
        memoryMb: task.environment.memoryMb,
        labels: {
          "t1.job": "tasks-check",
          "t1.episode": `${task.id}:${solve ? "reference" : "noop"}`,
        },
        ttlMs: 30 * 60_000,
      }),
    ),
    (info) =>
      Effect.gen(function* () {
        const scripts: Record<string, string> = {}
        const read = (path: string) =>
          Effect.tryPromise({
            try: () => readFile(path, "utf8"),
            catch: (e) => new Error(`cannot read ${path}: ${String(e)}`),
          })
        if (task.environment.setupScript !== undefined) {
          scripts["setup.sh"] = yield* read(task.environment.setupScript)
        }
        if (solve) {
          if (task.solution === undefined) return "no reference solution"
          scripts["solve.sh"] = yield* read(task.solution)
        }
        if (Object.keys(scripts).length > 0) {
          const tarball = yield* Effect.tryPromise({
            try: () => packFiles(scripts, 0o755),
            catch: (e) => new Error(`packing scripts: ${String(e)}`),
          })
          yield* driver.put(info.id, SCRIPTS, tarball)
        }
        const timeoutMs = Math.max(1, task.agentTimeoutSec) * 1000
        for (const name of ["setup.sh", "solve.sh"]) {
          if (scripts[name] === undefined) continue
          const r = yield* driver.exec(info.id, `bash ${SCRIPTS}/${name}`, {
            timeoutMs,
            maxOutputBytes: 16_384,
          })
          if (name === "setup.sh" && r.exitCode !== 0) {
            return `setup.sh exited ${r.exitCode}: ${new TextDecoder().decode(r.output).slice(-400)}`
          }
        }
        return yield* verifyEpisode(driverSandbox(driver, info.id), task)
      }),
    (info) => Effect.ignore(driver.destroy(info.id)),
  ).pipe(Effect.catch((e) => Effect.succeed(`error: ${e.message}`)))

const score = (o: VerifierOutcome | string) =>
  typeof o === "string" ? o : `${o.passed}/${o.total}`

const table = (rows: ReadonlyArray<CheckRow>): string => {
  const header = ["task", "reference", "no-op", "seconds", "result"]
  const lines = rows.map((r) => [
    r.task,
    score(r.reference),
    score(r.noop),
    r.seconds.toFixed(1),
    r.ok ? "ok" : "FAIL",
  ])
  const widths = header.map((h, i) =>
    Math.max(h.length, ...lines.map((l) => Math.min(60, (l[i] ?? "").length))),
  )
  const fmt = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => c.slice(0, 60).padEnd(widths[i] ?? 0)).join("  ")
  return [fmt(header), ...lines.map(fmt)].join("\n")
}

const driverLayer = (
  choice: "docker" | "local" | "auto",
): Effect.Effect<Layer.Layer<SandboxDriver, unknown>> =>
  Effect.gen(function* () {
    const owner = `tasks-check-${randomUUID().slice(0, 8)}`
    const docker = choice === "local" ? false : yield* dockerEngineAvailable()
    if (choice === "docker" && !docker) {
      return yield* Effect.die(
        new Error("--driver docker: no Docker engine answers (is dockerd running?)"),
      )
    }
    return docker ? DockerDriverLive({ ownerId: owner }) : LocalDriverLive({ owner })
  })

/**
 * For each task: its reference solution must resolve it and a no-op agent must not. Prints a
 * table and fails when any task does not hold up. How users validate a task set before training.
 */
export const checkTasks = (
  dirs: ReadonlyArray<string>,
  options: { readonly driver: "docker" | "local" | "auto"; readonly concurrency?: number },
): Effect.Effect<ReadonlyArray<CheckRow>, unknown> =>
  Effect.gen(function* () {
    const tasks = yield* loadTasks(dirs)
    const layer = yield* driverLayer(options.driver)
    const rows = yield* Effect.gen(function* () {
      const driver = yield* SandboxDriver
      return yield* Effect.forEach(
        tasks,
        (task) =>
          Effect.gen(function* () {
            const started = Date.now()
            const image =
              driver.kind === "docker"
                ? yield* resolveTaskImage(task).pipe(
                    Effect.map((r) => r.image),
                    Effect.catch((e) => Effect.succeed(new Error(e.message))),
                  )
                : "local"
            if (image instanceof Error) {
              return {
                task: task.id,
                reference: `image: ${image.message}`,
                noop: "-",
                seconds: 0,
                ok: false,
              }
            }
            const reference = yield* runOnce(driver, task, image, true)
            const noop = yield* runOnce(driver, task, image, false)
            const ok =
              typeof reference !== "string" &&
              reference.resolved &&
              (typeof noop === "string" ? false : !noop.resolved)
            const row: CheckRow = {
              task: task.id || basename(task.dir),
              reference,
              noop,
              seconds: (Date.now() - started) / 1000,
              ok,
            }
            yield* Console.error(
              `${row.ok ? "ok  " : "FAIL"} ${row.task} reference ${score(reference)} no-op ${score(noop)}`,
            )
            return row
          }),
        { concurrency: options.concurrency ?? 2 },
      )
    }).pipe(Effect.scoped, Effect.provide(layer))
    yield* Console.log(table(rows))
    const failed = rows.filter((r) => !r.ok).map((r) => r.task)
    if (failed.length > 0) return yield* new TaskCheckFailed({ failed })
    return rows
  })
