/**
 * `t1 tasks check`: for each task, its reference solution must resolve it and a no-op agent must
 * not. How users validate a task set before training on it.
 *
 * The reference solution runs as Harbor runs it: the task's whole `solution/` folder is copied to
 * /solution in the sandbox and `bash /solution/solve.sh` runs from the task's workdir. A TB1
 * `solution.sh` (or the script made from its `solution.yaml`) goes to /solution/solution.sh and
 * runs the same way. (The local driver puts files only under the workdir: there the folder goes
 * to `<workdir>/.t1-check/solution`.)
 */
import { randomUUID } from "node:crypto"
import { readFile } from "node:fs/promises"
import { basename, dirname } from "node:path"
import { Console, Data, Effect, Layer } from "effect"
import type { BuildNetwork } from "../actors/sandbox/index.ts"
import {
  makeChosenDriver,
  resolveTaskImage,
  SandboxDriver,
  type SandboxDriverChoice,
  type SandboxDriverShape,
  sandboxSpec,
} from "../actors/sandbox/index.ts"
import {
  driverSandboxLayer,
  packDirectory,
  shellQuote,
  type VerifierOutcome,
  verifyEpisode,
} from "../actors/verifier/index.ts"
import { packFiles } from "../services/tar/index.ts"
import { loadTasks, type Task } from "../tasks/index.ts"

/**
 * ok: the reference resolves and the no-op does not; forged: the verifier found a run's tests
 * tampered with (its canaries or test files; a task whose own tests trip them shows here too);
 * unverifiable: the tests cannot run here.
 */
export type CheckStatus = "ok" | "failed" | "forged" | "unverifiable"

/** How the reference solution's script ended. */
export interface SolveRun {
  readonly exitCode: number
  readonly timedOut: boolean
  /** Its last lines of output. */
  readonly outputTail: string
}

/** One run (reference or no-op): what the verifier found, or why there is nothing to show. */
export type RunResult =
  | {
      readonly kind: "verified"
      readonly outcome: VerifierOutcome
      readonly solve?: SolveRun
      /** The sandbox's id, when kept (--keep). */
      readonly sandbox?: string
    }
  | {
      readonly kind: "error"
      readonly error: string
      readonly solve?: SolveRun
      readonly sandbox?: string
    }

export interface CheckRow {
  readonly task: string
  /** The image both runs used; "" when it could not be resolved. */
  readonly image: string
  readonly reference: RunResult
  readonly noop: RunResult
  readonly seconds: number
  readonly status: CheckStatus
  /** status === "ok". */
  readonly ok: boolean
  /** Why it is not ok, one sentence each; empty when ok. */
  readonly problems: ReadonlyArray<string>
}

export interface CheckReport {
  readonly rows: ReadonlyArray<CheckRow>
  /** 0 all ok, 1 some task failed or was forged, 3 none failed but some are unverifiable here. */
  readonly exitCode: 0 | 1 | 3
}

export interface CheckOptions {
  readonly driver: SandboxDriverChoice
  readonly concurrency?: number
  /** JSON Lines on stdout, one object per task as it finishes; the table goes to stderr. */
  readonly json?: boolean
  /** Leave the sandboxes for inspection (ttl KEEP_TTL_MS); docker driver only. */
  readonly keep?: boolean
  /** The network of task image builds; default: each task's own (allowInternet). */
  readonly buildNetwork?: BuildNetwork
}

export class TaskCheckFailed extends Data.TaggedError("TaskCheckFailed")<{
  readonly failed: ReadonlyArray<string>
  readonly unverifiable: ReadonlyArray<string>
}> {
  override get message(): string {
    const also =
      this.unverifiable.length === 0
        ? ""
        : `; ${this.unverifiable.length} unverifiable here: ${this.unverifiable.join(", ")}`
    return `${this.failed.length} task(s) failed the check: ${this.failed.join(", ")}${also}`
  }
}

/** Kept sandboxes live this long, so that no reaper removes them while someone looks. */
export const KEEP_TTL_MS = 7 * 24 * 3600_000
/** The reference solution's time limit when the task sets no agent timeout. */
export const DEFAULT_SOLVE_TIMEOUT_SEC = 1800
/** Lines of output shown for a failing run (the verifier's, the solution's). */
export const TAIL_LINES = 20
const CELL_CHARS = 60

const decoder = new TextDecoder()

/** The last `n` lines of a text, without trailing blank lines. */
export const lastLines = (text: string | Uint8Array, n: number = TAIL_LINES): string => {
  const s = typeof text === "string" ? text : decoder.decode(text)
  const lines = s.replace(/\s+$/, "").split(/\r?\n/)
  return lines.slice(-n).join("\n")
}

const firstLine = (text: string): string => text.split("\n")[0] ?? ""

const messageOf = (error: unknown): string =>
  error instanceof Error
    ? error.message
    : typeof error === "object" && error !== null && "message" in error
      ? String(error.message)
      : String(error)

const missingText = (missing: ReadonlyArray<string>) =>
  missing.length === 0 ? "" : ` (missing: ${missing.join(", ")})`

/** What a run shows in the table: passed/total, unverifiable (missing: …) or the error. */
export const scoreCell = (run: RunResult): string => {
  if (run.kind === "error") return `error: ${firstLine(run.error)}`
  const o = run.outcome
  if (o.kind === "unverifiable") return `unverifiable${missingText(o.missing)}`
  if (o.kind === "forged") return `FORGED 0/${o.total}`
  return `${o.passed}/${o.total}${o.timedOut ? " (timed out)" : ""}`
}

/** Tests that did not pass, with their outcome. */
export const failingTests = (o: VerifierOutcome): ReadonlyArray<string> =>
  o.tests.filter((t) => t.outcome !== "passed").map((t) => t.name)

/** Whether the pair of runs holds up, and why not. */
export const judge = (
  reference: RunResult,
  noop: RunResult,
): { readonly status: CheckStatus; readonly problems: ReadonlyArray<string> } => {
  const failures: string[] = []
  const missing = new Set<string>()
  let unverifiable = false
  if (reference.kind === "error") failures.push(`reference run: ${firstLine(reference.error)}`)
  else if (reference.outcome.kind === "unverifiable") {
    unverifiable = true
    for (const m of reference.outcome.missing) missing.add(m)
  } else if (reference.outcome.kind !== "forged" && !reference.outcome.resolved) {
    const o = reference.outcome
    const exit =
      reference.solve === undefined || reference.solve.exitCode === 0
        ? ""
        : reference.solve.timedOut
          ? "; the solution timed out"
          : `; the solution exited ${reference.solve.exitCode}`
    failures.push(
      `the reference solution passes ${o.passed}/${o.total} tests${o.timedOut ? " (the tests timed out)" : ""}${exit}`,
    )
  }
  if (noop.kind === "error") failures.push(`no-op run: ${firstLine(noop.error)}`)
  else if (noop.outcome.kind === "unverifiable") {
    unverifiable = true
    for (const m of noop.outcome.missing) missing.add(m)
  } else if (noop.outcome.resolved)
    failures.push(
      `a no-op agent resolves the task (${noop.outcome.passed}/${noop.outcome.total}): the tests check nothing the agent must do`,
    )
  const forgery = [
    ...(reference.kind === "verified" && reference.outcome.kind === "forged"
      ? reference.outcome.forgery.map((e) => `reference run FORGED: ${e}`)
      : []),
    ...(noop.kind === "verified" && noop.outcome.kind === "forged"
      ? noop.outcome.forgery.map((e) => `no-op run FORGED: ${e}`)
      : []),
  ]
  if (forgery.length > 0) return { status: "forged", problems: [...forgery, ...failures] }
  if (failures.length > 0) return { status: "failed", problems: failures }
  if (unverifiable)
    return {
      status: "unverifiable",
      problems: [
        `unverifiable here: the tests need what the sandbox lacks${missingText([...missing])}`,
      ],
    }
  return { status: "ok", problems: [] }
}

/** A row for a task whose image could not be made: neither run happened. */
export const imageFailureRow = (task: string, error: string): CheckRow => ({
  task,
  image: "",
  reference: { kind: "error", error: `image: ${error}` },
  noop: { kind: "error", error: "not run: no image" },
  seconds: 0,
  status: "failed",
  ok: false,
  problems: [`image: ${firstLine(error)}`],
})

/** Exit status of a check: 1 when any task failed or was forged, else 3 when any is unverifiable, else 0. */
export const checkExitCode = (rows: ReadonlyArray<CheckRow>): 0 | 1 | 3 =>
  rows.some((r) => r.status === "failed" || r.status === "forged")
    ? 1
    : rows.some((r) => r.status === "unverifiable")
      ? 3
      : 0

const statusCell = (status: CheckStatus) =>
  status === "ok"
    ? "ok"
    : status === "failed"
      ? "FAIL"
      : status === "forged"
        ? "FORGED"
        : "UNVERIFIABLE"

const cut = (c: string, chars = CELL_CHARS) => (c.length > chars ? `${c.slice(0, chars - 1)}…` : c)

/** The summary table; cells are one line of at most 60 characters. */
export const formatTable = (rows: ReadonlyArray<CheckRow>): string => {
  const header = ["task", "reference", "no-op", "seconds", "result"]
  const lines = rows.map((r) => [
    r.task,
    scoreCell(r.reference),
    scoreCell(r.noop),
    r.seconds.toFixed(1),
    statusCell(r.status),
  ])
  const widths = header.map((h, i) =>
    Math.max(h.length, ...lines.map((l) => cut(l[i] ?? "").length)),
  )
  const fmt = (cells: ReadonlyArray<string>) =>
    cells
      .map((c, i) => cut(c).padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd()
  return [fmt(header), ...lines.map(fmt)].join("\n")
}

const indent = (text: string, by: string) =>
  text
    .split("\n")
    .map((l) => `${by}${l}`)
    .join("\n")

const runDetails = (name: string, run: RunResult): string[] => {
  const out = [`  ${name} run:`]
  if (run.kind === "error") out.push(indent(run.error, "    "))
  else {
    const o = run.outcome
    out.push(
      `    result: ${o.kind === "unverifiable" ? `unverifiable${missingText(o.missing)}` : o.kind === "forged" ? `FORGED, scored 0 of ${o.total}` : `${o.passed}/${o.total} passed${o.timedOut ? ", the tests timed out" : ""}`} (mode ${o.mode}, exit ${o.exitCode})`,
      `    path: ${o.path}${o.pathReason === "" ? "" : `: ${o.pathReason}`}`,
    )
    if (o.forgery.length > 0) {
      out.push("    forgery evidence:")
      for (const e of o.forgery) out.push(indent(e, "      - ").replace(/\n {6}- /g, "\n        "))
    }
    const failing = o.tests.filter((t) => t.outcome !== "passed")
    if (failing.length > 0) {
      out.push("    tests not passed:")
      for (const t of failing)
        out.push(
          `      ${t.name} (${t.outcome})${t.message === "" ? "" : `: ${firstLine(t.message).slice(0, 200)}`}`,
        )
    }
    if (o.notes.length > 0) {
      out.push("    notes:")
      for (const note of o.notes)
        out.push(indent(note, "      - ").replace(/\n {6}- /g, "\n        "))
    }
    const tail = lastLines(o.outputTail)
    if (tail !== "")
      out.push(`    verifier output (last ${TAIL_LINES} lines):`, indent(tail, "      | "))
  }
  if (run.solve !== undefined) {
    const s = run.solve
    out.push(
      `    solution: ${s.timedOut ? "timed out" : `exited ${s.exitCode}`}${s.outputTail === "" ? ", no output" : `; its output (last ${TAIL_LINES} lines):`}`,
    )
    if (s.outputTail !== "") out.push(indent(s.outputTail, "      | "))
  }
  if (run.sandbox !== undefined) out.push(`    sandbox: ${run.sandbox}`)
  return out
}

/**
 * Per task that is not ok: its problems, then for each run involved the full error, or the
 * verifier's result, path, tests not passed, notes and output tail (and the solution's).
 */
export const formatDetails = (rows: ReadonlyArray<CheckRow>): string =>
  rows
    .filter((r) => !r.ok)
    .map((r) => {
      const out = [`--- ${r.task}: ${statusCell(r.status)}`]
      for (const p of r.problems) out.push(`  - ${p}`)
      if (r.image === "" && r.reference.kind === "error") {
        out.push("  image build:", indent(r.reference.error.replace(/^image: /, ""), "    "))
        return out.join("\n")
      }
      const referenceShown =
        r.reference.kind === "error" ||
        r.reference.outcome.kind !== "scored" ||
        !r.reference.outcome.resolved
      if (referenceShown) out.push(...runDetails("reference", r.reference))
      const noopShown =
        !(r.noop.kind === "error" && r.reference.kind === "error") &&
        (r.noop.kind === "error" || r.noop.outcome.kind !== "scored" || r.noop.outcome.resolved)
      if (noopShown) out.push(...runDetails("no-op", r.noop))
      return out.join("\n")
    })
    .join("\n")

const runJson = (run: RunResult): Record<string, unknown> => {
  const extra = {
    ...(run.solve === undefined
      ? {}
      : { solve: { exitCode: run.solve.exitCode, timedOut: run.solve.timedOut } }),
    ...(run.sandbox === undefined ? {} : { sandbox: run.sandbox }),
  }
  if (run.kind === "error") return { error: run.error, ...extra }
  const o = run.outcome
  return {
    passed: o.passed,
    total: o.total,
    resolved: o.resolved,
    kind: o.kind,
    missing: o.missing,
    forgery: o.forgery,
    path: o.path,
    pathReason: o.pathReason,
    mode: o.mode,
    timedOut: o.timedOut,
    exitCode: o.exitCode,
    failingTests: failingTests(o),
    notes: o.notes,
    outputTail: lastLines(o.outputTail),
    ...extra,
  }
}

/** One task as a JSON object (one line of `--json`'s JSON Lines). */
export const rowJson = (row: CheckRow): Record<string, unknown> => ({
  task: row.task,
  image: row.image,
  reference: runJson(row.reference),
  noop: runJson(row.noop),
  seconds: Math.round(row.seconds * 10) / 10,
  status: row.status,
  ok: row.ok,
  problems: row.problems,
})

const solveTimeoutMs = (task: Task) =>
  (task.agentTimeoutSec > 0 ? task.agentTimeoutSec : DEFAULT_SOLVE_TIMEOUT_SEC) * 1000

/** TB2 and native tasks keep solve.sh in a solution/ folder that goes in whole. */
const solutionFolder = (task: Task, solution: string): string | undefined =>
  task.format !== "tb1" &&
  basename(solution) === "solve.sh" &&
  basename(dirname(solution)) === "solution"
    ? dirname(solution)
    : undefined

/** Where the check's files go in the sandbox: absolute for docker and bwrap, under the workdir for local. */
const places = (driver: SandboxDriverShape) =>
  driver.kind !== "local"
    ? { scripts: "/tmp/t1-check", solution: "/solution" }
    : { scripts: ".t1-check", solution: ".t1-check/solution" }

const inWorkdir = (task: Task, command: string) =>
  task.environment.workdir === ""
    ? command
    : `cd -- ${shellQuote(task.environment.workdir)} && ${command}`

/** Runs one episode stand-in: setup, then the reference solution (or nothing), then the tests. */
const runOnce = (
  driver: SandboxDriverShape,
  task: Task,
  image: string,
  solve: boolean,
  keep: boolean,
): Effect.Effect<RunResult> => {
  const timeoutMs = solveTimeoutMs(task)
  const at = places(driver)
  return Effect.acquireUseRelease(
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
        ttlMs: keep
          ? KEEP_TTL_MS
          : Math.max(30 * 60_000, timeoutMs + task.verifier.timeoutSec * 1000 + 10 * 60_000),
      }),
    ),
    (info) => {
      let solveRun: SolveRun | undefined
      const withSolve = (result: RunResult): RunResult => ({
        ...result,
        ...(solveRun === undefined ? {} : { solve: solveRun }),
        ...(keep ? { sandbox: info.id } : {}),
      })
      const promise = <A>(what: string, run: () => Promise<A>) =>
        Effect.tryPromise({ try: run, catch: (e) => new Error(`${what}: ${messageOf(e)}`) })
      return Effect.gen(function* () {
        const setup = task.environment.setupScript
        if (setup !== undefined) {
          const text = yield* promise(`reading ${setup}`, () => readFile(setup, "utf8"))
          const tar = yield* promise("packing setup.sh", () =>
            packFiles({ "setup.sh": text }, 0o755),
          )
          yield* driver.put(info.id, at.scripts, tar)
          const r = yield* driver.exec(info.id, inWorkdir(task, `bash ${at.scripts}/setup.sh`), {
            timeoutMs,
            maxOutputBytes: 16_384,
          })
          if (r.exitCode !== 0)
            return withSolve({
              kind: "error",
              error: `setup.sh exited ${r.exitCode}:\n${lastLines(r.output)}`,
            })
        }
        if (solve) {
          const solution = task.solution
          if (solution === undefined)
            return withSolve({ kind: "error", error: "the task has no reference solution" })
          const folder = solutionFolder(task, solution)
          const tar =
            folder === undefined
              ? yield* promise(`reading ${solution}`, async () =>
                  packFiles({ "solution.sh": await readFile(solution, "utf8") }, 0o755),
                )
              : (yield* promise(`packing ${folder}`, () => packDirectory(folder))).tar
          const script = `${at.solution}/${folder === undefined ? "solution.sh" : basename(solution)}`
          yield* driver.put(info.id, at.solution, tar)
          const r = yield* driver.exec(info.id, inWorkdir(task, `bash ${shellQuote(script)}`), {
            timeoutMs,
            maxOutputBytes: 16_384,
          })
          solveRun = { exitCode: r.exitCode, timedOut: r.timedOut, outputTail: lastLines(r.output) }
        }
        const outcome = yield* verifyEpisode(task).pipe(
          Effect.provide(driverSandboxLayer(driver, info.id)),
        )
        return withSolve({ kind: "verified", outcome })
      }).pipe(
        Effect.catch((e) => Effect.succeed(withSolve({ kind: "error", error: messageOf(e) }))),
      )
    },
    (info) => (keep ? Effect.void : Effect.ignore(driver.destroy(info.id))),
  ).pipe(
    Effect.catch((e) =>
      Effect.succeed<RunResult>({ kind: "error", error: `sandbox: ${messageOf(e)}` }),
    ),
  )
}

/** The chosen driver (sandbox/choice.ts); kept sandboxes are containers, so --keep makes auto docker. */
const driverLayer = (
  choice: SandboxDriverChoice,
  keep: boolean,
): Effect.Effect<Layer.Layer<SandboxDriver, unknown>> =>
  Effect.succeed(
    Layer.effect(
      SandboxDriver,
      makeChosenDriver(keep && choice === "auto" ? "docker" : choice, {
        owner: `tasks-check-${randomUUID().slice(0, 8)}`,
      }),
    ),
  )

const shortId = (id: string) => (/^[0-9a-f]{64}$/.test(id) ? id.slice(0, 12) : id)

const keptLine = (driver: SandboxDriverShape, task: string, name: string, run: RunResult) =>
  run.sandbox === undefined
    ? []
    : [
        `kept ${task} ${name} sandbox ${shortId(run.sandbox)}: ${driver.kind === "docker" ? `docker exec -it ${shortId(run.sandbox)} bash` : "(local)"}`,
      ]

/** Runs the check of every task (`concurrency` at a time) and prints the report. */
export const checkTasks = (
  dirs: ReadonlyArray<string>,
  options: CheckOptions,
): Effect.Effect<CheckReport, unknown> =>
  Effect.gen(function* () {
    const keep = options.keep === true
    const json = options.json === true
    const tasks = yield* loadTasks(dirs)
    const layer = yield* driverLayer(options.driver, keep)
    const kept: string[] = []
    const rows = yield* Effect.gen(function* () {
      const driver = yield* SandboxDriver
      if (keep && driver.kind !== "docker")
        return yield* Effect.fail(
          new Error("--keep needs the docker driver: local sandboxes end with this process"),
        )
      return yield* Effect.forEach(
        tasks,
        (task) =>
          Effect.gen(function* () {
            const started = Date.now()
            const name = task.id || basename(task.dir)
            const image =
              driver.kind !== "local"
                ? yield* resolveTaskImage(task, { buildNetwork: options.buildNetwork }).pipe(
                    Effect.map((r) => r.image),
                    Effect.catch((e) => Effect.succeed(new Error(messageOf(e)))),
                  )
                : "local"
            let row: CheckRow
            if (image instanceof Error) row = imageFailureRow(name, image.message)
            else {
              const reference = yield* runOnce(driver, task, image, true, keep)
              const noop = yield* runOnce(driver, task, image, false, keep)
              const { status, problems } = judge(reference, noop)
              row = {
                task: name,
                image,
                reference,
                noop,
                seconds: (Date.now() - started) / 1000,
                status,
                ok: status === "ok",
                problems,
              }
            }
            yield* Console.error(
              `${statusCell(row.status).padEnd(4)} ${row.task} reference ${cut(scoreCell(row.reference), 100)} no-op ${cut(scoreCell(row.noop), 100)}`,
            )
            const keptNow = [
              ...keptLine(driver, row.task, "reference", row.reference),
              ...keptLine(driver, row.task, "no-op", row.noop),
            ]
            for (const line of keptNow) yield* Console.error(line)
            for (const run of [row.reference, row.noop])
              if (run.sandbox !== undefined) kept.push(shortId(run.sandbox))
            if (json) yield* Console.log(JSON.stringify(rowJson(row)))
            return row
          }),
        { concurrency: options.concurrency ?? 2 },
      )
    }).pipe(Effect.scoped, Effect.provide(layer))
    const details = formatDetails(rows)
    const report = [formatTable(rows), ...(details === "" ? [] : ["", details])].join("\n")
    if (json) yield* Console.error(report)
    else yield* Console.log(report)
    if (kept.length > 0)
      yield* Console.error(
        `${kept.length} sandbox(es) kept for ${KEEP_TTL_MS / 3600_000} h; remove them with: docker rm -f ${kept.join(" ")}`,
      )
    return { rows, exitCode: checkExitCode(rows) }
  })
