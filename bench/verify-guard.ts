/**
 * What guarding a verification costs, before and after the host-side seal, in one run on the
 * local Docker engine. Each iteration makes three fresh sandboxes, does the same honest work in
 * each (2 of 5 answers) and times one verification of a small pytest task:
 *   - own: verified with the sandbox's own shell and Python (no guard: the floor),
 *   - before: t1 as of BEFORE_COMMIT (an in-container reaper, then the toolchain), run from a git
 *     worktree of that commit,
 *   - after: t1 now (the sandbox sealed from outside: killed and restarted with a fresh init,
 *     site directories restored; a toolchain probe; canaries and a tripwire on the tests).
 * The three are interleaved so that the machine's load falls on all of them alike.
 *
 *   npm run bench:verify [-- --json] [--iterations N]
 */
import { execFileSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { existsSync, mkdtempSync, rmSync, symlinkSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { Effect, Logger, ManagedRuntime } from "effect"
import {
  buildBaseImage,
  connectDocker,
  DockerDriverLive,
  SandboxDriver,
  sandboxSpec,
} from "../actors/sandbox/index.ts"
import { driverSandbox, VerifierSandbox, verifyEpisode } from "../actors/verifier/index.ts"
import { HONEST, writePytestTask } from "./pytest-task.ts"
import { median } from "./stats.ts"

/** The last commit before the seal, canaries and fail-closed guard (issue 40). */
const BEFORE_COMMIT = "b0f9a1d"

const usage = `usage: npm run bench:verify -- [--json] [--iterations N]
  --iterations N   verifications of each kind (default 6)
  --json           print one JSON object as the last line`

const parsed = (() => {
  try {
    return parseArgs({
      strict: true,
      options: {
        json: { type: "boolean" },
        iterations: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }).values
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n${usage}\n`)
    process.exit(2)
  }
})()
if (parsed.help === true) {
  process.stdout.write(`${usage}\n`)
  process.exit(0)
}
const iterations = (() => {
  const raw = parsed.iterations
  if (raw === undefined) return 6
  if (!/^\d+$/.test(raw) || Number(raw) < 1) {
    process.stderr.write(`--iterations must be a positive integer, got ${raw}\n${usage}\n`)
    process.exit(2)
  }
  return Number(raw)
})()

const hostDir = mkdtempSync(join(tmpdir(), "t1-bench-verify-"))
const TASK = writePytestTask(hostDir, "bench-verify")

/** The modules a verification needs, from this tree or the worktree of BEFORE_COMMIT. */
interface Side {
  readonly DockerDriverLive: typeof DockerDriverLive
  readonly SandboxDriver: typeof SandboxDriver
  readonly driverSandbox: typeof driverSandbox
  readonly VerifierSandbox: typeof VerifierSandbox
  readonly verifyEpisode: typeof verifyEpisode
}

const repoRoot = new URL("..", import.meta.url).pathname
const worktree = join(hostDir, "before")

const beforeSide = async (): Promise<Side> => {
  try {
    execFileSync("git", ["-C", repoRoot, "worktree", "add", "--detach", worktree, BEFORE_COMMIT], {
      stdio: "pipe",
    })
  } catch (e) {
    throw new Error(
      `cannot check out ${BEFORE_COMMIT} (the baseline) into a worktree: ${e instanceof Error ? e.message : String(e)}; the bench needs a full clone of t1's repository`,
    )
  }
  symlinkSync(join(repoRoot, "node_modules"), join(worktree, "node_modules"))
  const at = (path: string) => join(worktree, path)
  const docker = await import(at("actors/sandbox/docker/index.ts"))
  const driver = await import(at("actors/sandbox/driver.ts"))
  const port = await import(at("actors/verifier/port.ts"))
  const verify = await import(at("actors/verifier/verify.ts"))
  return {
    DockerDriverLive: docker.DockerDriverLive,
    SandboxDriver: driver.SandboxDriver,
    driverSandbox: port.driverSandbox,
    VerifierSandbox: port.VerifierSandbox,
    verifyEpisode: verify.verifyEpisode,
  }
}

type Kind = "own" | "before" | "after"

const main = async () => {
  const docker = connectDocker()
  // Found in milliseconds when the engine has it; built offline (about a minute) when not.
  await Effect.runPromise(buildBaseImage({ docker }))
  const after: Side = {
    DockerDriverLive,
    SandboxDriver,
    driverSandbox,
    VerifierSandbox,
    verifyEpisode,
  }
  const before = await beforeSide()
  const owner = `bench-verify-${randomUUID().slice(0, 6)}`
  const runtimes = {
    before: ManagedRuntime.make(before.DockerDriverLive({ ownerId: `${owner}-b`, docker })),
    after: ManagedRuntime.make(after.DockerDriverLive({ ownerId: `${owner}-a`, docker })),
  }
  const once = (kind: Kind) => {
    const side = kind === "before" ? before : after
    const runtime = kind === "before" ? runtimes.before : runtimes.after
    return runtime.runPromise(
      Effect.gen(function* () {
        const driver = yield* side.SandboxDriver
        const info = yield* driver.create(sandboxSpec({ cpus: 1, memoryMb: 512, ttlMs: 300_000 }))
        return yield* Effect.gen(function* () {
          const r = yield* driver.exec(info.id, HONEST, { timeoutMs: 30_000, maxOutputBytes: 4096 })
          if (r.exitCode !== 0) return yield* Effect.die(new Error("the honest step failed"))
          const sandbox = side.driverSandbox(driver, info.id)
          const start = performance.now()
          const outcome = yield* side
            .verifyEpisode(TASK)
            .pipe(
              Effect.provideService(
                side.VerifierSandbox,
                kind === "own" ? { ...sandbox, execArgv: undefined, seal: undefined } : sandbox,
              ),
            )
          const ms = performance.now() - start
          if (outcome.passed !== 2 || outcome.total !== 5)
            return yield* Effect.die(
              new Error(
                `${kind}: scored ${outcome.passed}/${outcome.total}, expected 2/5: ${outcome.notes.join("; ")}`,
              ),
            )
          return ms
        }).pipe(Effect.ensuring(Effect.ignore(driver.destroy(info.id))))
      }).pipe(Effect.provide(Logger.layer([]))),
    )
  }
  try {
    // A first verification of each kind builds what is missing (toolchain volumes) untimed.
    for (const kind of ["before", "after"] as const) await once(kind)
    const times: Record<Kind, number[]> = { own: [], before: [], after: [] }
    for (let i = 0; i < iterations; i++)
      for (const kind of ["own", "before", "after"] as const) times[kind].push(await once(kind))
    const figures = {
      iterations,
      before_commit: BEFORE_COMMIT,
      own_programs_median_ms: Math.round(median(times.own)),
      before_guarded_median_ms: Math.round(median(times.before)),
      after_guarded_median_ms: Math.round(median(times.after)),
      after_over_before: Number((median(times.after) / median(times.before)).toFixed(2)),
      after_over_own: Number((median(times.after) / median(times.own)).toFixed(2)),
    }
    process.stdout.write(
      [
        `verification of a 5-test pytest task on the docker driver, median of ${iterations}:`,
        `  the sandbox's own programs (no guard)   ${figures.own_programs_median_ms} ms`,
        `  before (${BEFORE_COMMIT}: in-container reaper) ${figures.before_guarded_median_ms} ms`,
        `  after (sealed from outside, canaries)   ${figures.after_guarded_median_ms} ms`,
        `  after / before ${figures.after_over_before}×, after / own ${figures.after_over_own}×`,
        "",
      ].join("\n"),
    )
    if (parsed.json === true) process.stdout.write(`${JSON.stringify(figures)}\n`)
  } finally {
    await runtimes.before.dispose()
    await runtimes.after.dispose()
    try {
      execFileSync("git", ["-C", repoRoot, "worktree", "remove", "--force", worktree], {
        stdio: "pipe",
      })
    } catch {
      // Removed with hostDir below; `git worktree prune` forgets it.
    }
    rmSync(hostDir, { recursive: true, force: true })
    if (existsSync(worktree)) execFileSync("git", ["-C", repoRoot, "worktree", "prune"])
  }
}

main().catch((e) => {
  process.stderr.write(`bench:verify: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`)
  process.exit(1)
})
