/**
 * What one episode's sandbox work costs on the bwrap driver against the local driver (the
 * baseline: the host's own shell, unguarded), in one run: create, one command, verification
 * (bwrap: sealed from outside and guarded through the toolchain; local: the sandbox's own shell
 * and Python) and destroy, for a small pytest task.
 *   - one episode at a time, the drivers interleaved: the median of each phase;
 *   - `--concurrency` episodes at once (as an RL update runs them), rounds alternating between
 *     the drivers: episodes per second.
 *
 *   npm run bench:episode [-- --json] [--iterations N] [--concurrency C] [--rounds R]
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { Effect, Logger } from "effect"
import {
  connectDocker,
  makeBwrapDriver,
  makeLocalDriver,
  type SandboxDriverShape,
  sandboxSpec,
} from "../actors/sandbox/index.ts"
import { driverSandbox, VerifierSandbox, verifyEpisode } from "../actors/verifier/index.ts"
import { HONEST, writePytestTask } from "./pytest-task.ts"
import { median } from "./stats.ts"

const usage = `usage: npm run bench:episode -- [--json] [--iterations N] [--concurrency C] [--rounds R]
  --iterations N   episodes one at a time per driver (default 10)
  --concurrency C  episodes at once in the throughput rounds (default 6, exp:learn's)
  --rounds R       throughput rounds per driver, of 2×C episodes each (default 3)
  --json           print one JSON object as the last line`

const parsed = (() => {
  try {
    return parseArgs({
      strict: true,
      options: {
        json: { type: "boolean" },
        iterations: { type: "string" },
        concurrency: { type: "string" },
        rounds: { type: "string" },
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
const positive = (name: string, raw: string | undefined, fallback: number) => {
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw) || Number(raw) < 1) {
    process.stderr.write(`--${name} must be a positive integer, got ${raw}\n${usage}\n`)
    process.exit(2)
  }
  return Number(raw)
}
const iterations = positive("iterations", parsed.iterations, 10)
const concurrency = positive("concurrency", parsed.concurrency, 6)
const rounds = positive("rounds", parsed.rounds, 3)

const hostDir = mkdtempSync(join(tmpdir(), "t1-bench-episode-"))
const TASK = writePytestTask(hostDir, "bench-episode")

type Name = "local" | "bwrap"
interface Phases {
  readonly create: number
  readonly command: number
  readonly verify: number
  readonly destroy: number
  readonly total: number
}

const episode = (driver: SandboxDriverShape, name: Name) =>
  Effect.gen(function* () {
    const t0 = performance.now()
    const info = yield* driver.create(
      sandboxSpec({ cpus: 1, memoryMb: 512, ttlMs: 300_000, workdir: "/app" }),
    )
    const t1 = performance.now()
    const r = yield* driver.exec(info.id, HONEST, { timeoutMs: 30_000, maxOutputBytes: 4096 })
    if (r.exitCode !== 0) return yield* Effect.die(new Error(`${name}: the honest step failed`))
    const t2 = performance.now()
    const outcome = yield* verifyEpisode(TASK).pipe(
      Effect.provideService(VerifierSandbox, driverSandbox(driver, info.id)),
    )
    const t3 = performance.now()
    yield* driver.destroy(info.id)
    const t4 = performance.now()
    if (outcome.passed !== 2 || outcome.total !== 5)
      return yield* Effect.die(
        new Error(
          `${name}: scored ${outcome.passed}/${outcome.total}: ${outcome.notes.join("; ")}`,
        ),
      )
    if (outcome.guarded !== (name === "bwrap"))
      return yield* Effect.die(new Error(`${name}: guarded is ${outcome.guarded}`))
    return {
      create: t1 - t0,
      command: t2 - t1,
      verify: t3 - t2,
      destroy: t4 - t3,
      total: t4 - t0,
    } satisfies Phases
  })

const main = Effect.gen(function* () {
  const drivers: Record<Name, SandboxDriverShape> = {
    local: yield* makeLocalDriver({}),
    bwrap: yield* makeBwrapDriver({ docker: connectDocker() }),
  }
  const names: ReadonlyArray<Name> = ["local", "bwrap"]
  // Untimed: the first of each prepares what its driver caches (an image export, a toolchain).
  for (const name of names) yield* episode(drivers[name], name)
  const sequential: Record<Name, Phases[]> = { local: [], bwrap: [] }
  for (let i = 0; i < iterations; i++)
    for (const name of names) sequential[name].push(yield* episode(drivers[name], name))
  const rates: Record<Name, number[]> = { local: [], bwrap: [] }
  for (let round = 0; round < rounds; round++)
    for (const name of names) {
      const started = performance.now()
      yield* Effect.forEach(
        Array.from({ length: 2 * concurrency }),
        () => episode(drivers[name], name),
        { concurrency },
      )
      rates[name].push((2 * concurrency) / ((performance.now() - started) / 1000))
    }
  const phase = (name: Name, key: keyof Phases) =>
    Number(median(sequential[name].map((p) => p[key])).toFixed(1))
  const figures = {
    iterations,
    concurrency,
    rounds,
    ...Object.fromEntries(
      names.flatMap((name) => [
        [`${name}_create_p50_ms`, phase(name, "create")],
        [`${name}_verify_p50_ms`, phase(name, "verify")],
        [`${name}_destroy_p50_ms`, phase(name, "destroy")],
        [`${name}_episode_p50_ms`, phase(name, "total")],
        [`${name}_episodes_per_s`, Number(median(rates[name]).toFixed(2))],
      ]),
    ),
    bwrap_over_local_episode_ms: Number(
      (phase("bwrap", "total") / phase("local", "total")).toFixed(2),
    ),
    bwrap_over_local_episodes_per_s: Number((median(rates.bwrap) / median(rates.local)).toFixed(2)),
  }
  const row = (name: Name) =>
    `  ${name.padEnd(6)} create ${phase(name, "create")} ms, verify ${phase(name, "verify")} ms, destroy ${phase(name, "destroy")} ms, episode ${phase(name, "total")} ms; ${median(rates[name]).toFixed(2)} episodes/s at ${concurrency} at once`
  process.stdout.write(
    [
      `one episode's sandbox work (a 5-test pytest task), medians of ${iterations} one at a time and ${rounds} rounds of ${2 * concurrency} at ${concurrency} at once:`,
      row("local"),
      row("bwrap"),
      `  bwrap / local: ${figures.bwrap_over_local_episode_ms}× the episode time, ${figures.bwrap_over_local_episodes_per_s}× the episodes per second`,
      "",
    ].join("\n"),
  )
  if (parsed.json === true) process.stdout.write(`${JSON.stringify(figures)}\n`)
})

Effect.runPromise(main.pipe(Effect.scoped, Effect.provide(Logger.layer([]))))
  .catch((e) => {
    process.stderr.write(
      `bench:episode: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
    )
    process.exitCode = 1
  })
  .finally(() => rmSync(hostDir, { recursive: true, force: true }))
