/**
 * The load test as a function: starts a sandbox host, a verifier and a gateway as separate `t1`
 * processes on one NATS server (a private one unless given), runs the episode phase (the sampler
 * in this process) and the watch phase, checks that nothing leaked, stops everything, and returns
 * the figures. `main.ts` prints them; `load.test.ts` runs a small version.
 */
import { randomUUID } from "node:crypto"
import { rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Dockerode from "dockerode"
import { startNatsServer } from "../support/nats-server.ts"
import { freePort, metricValue, type System, startSystem } from "../support/system.ts"
import { runEpisodePhase } from "./episodes.ts"
import {
  deleteRunStreams,
  jobEventConsumers,
  ownedBwrapSandboxes,
  ownedContainers,
  removeBwrapSandboxes,
  removeOwnedContainers,
} from "./leaks.ts"
import {
  activeResources,
  cpuSeconds,
  httpText,
  MemoryWatch,
  MIB,
  percentile,
  resourcesBeyond,
  settle,
  total,
} from "./measure.ts"
import { type LoadRuntime, loadRuntime } from "./runtime.ts"
import { Teardown } from "./teardown.ts"
import { runWatchPhase } from "./watches.ts"

/** The sandbox host's drivers the load test runs on (both run the base image's files). */
export const LOAD_DRIVERS = ["docker", "bwrap"] as const
export type LoadDriver = (typeof LOAD_DRIVERS)[number]

export interface LoadOptions {
  /** The sandbox host's driver (default docker). */
  readonly driver?: LoadDriver
  readonly episodes: number
  readonly watches: number
  /** Command turns per episode; each episode also has its completion turn. */
  readonly turns: number
  /** Events appended while the watches are open. */
  readonly events: number
  /** Use this NATS server instead of starting a private one. */
  readonly natsUrl?: string
  readonly log?: (line: string) => void
  /** Stopped by `runLoad` at the end; a signal handler may run it earlier. */
  readonly teardown?: Teardown
}

export interface LeakFigures {
  /**
   * Sandboxes of the host's driver left after the episodes ended: containers labelled with its
   * owner, or bwrap sandbox directories under its root.
   */
  readonly containers: number
  /** Consumers left on the job event stream after every watch closed. */
  readonly consumers: number
  /** The gateway's t1_gateway_watch_streams after every watch closed. */
  readonly watch_streams: number
  /** The sandbox host's t1_sandbox_sandboxes (all states) after the episodes ended. */
  readonly sandboxes: number
  /** Resources keeping this process alive after the run, beyond those before it. */
  readonly handles_delta: number
}

/** Every figure of a run; NaN where a phase did not get that far (printed as null in JSON). */
export interface LoadFigures {
  readonly episodes: number
  readonly episodes_ended: number
  readonly episodes_failed: number
  readonly turns: number
  readonly episode_phase_s: number
  readonly episodes_per_s: number
  readonly turns_per_s: number
  readonly turn_exec_p50_ms: number
  readonly turn_exec_p99_ms: number
  readonly episode_wall_p50_ms: number
  readonly episode_wall_p99_ms: number
  /** Parts of an episode's wall time: sandbox create (cold), and the verifier's run. */
  readonly episode_sandbox_p50_ms: number
  readonly episode_verify_p50_ms: number
  /** CPU seconds each process used during the episode phase (the sampler is this process). */
  readonly sampler_cpu_s: number
  readonly sandbox_cpu_s: number
  readonly verifier_cpu_s: number
  readonly sampler_rss_peak_mb: number
  readonly sampler_rss_after_mb: number
  readonly sandbox_rss_peak_mb: number
  readonly sandbox_rss_after_mb: number
  readonly watch_streams: number
  readonly watch_events: number
  readonly watch_phase_s: number
  readonly watch_fanout_p50_ms: number
  readonly watch_fanout_p99_ms: number
  /** CPU seconds the gateway used during the watch phase. */
  readonly gateway_cpu_s: number
  readonly gateway_rss_peak_mb: number
  readonly gateway_rss_after_mb: number
  readonly leaks: LeakFigures
  readonly wall_s: number
}

export interface LoadReport {
  readonly figures: LoadFigures
  /** Failed episodes or watches, phases that did not finish, leaks; empty when all is well. */
  readonly problems: ReadonlyArray<string>
}

const mb = (bytes: number) => Math.round((bytes / MIB) * 10) / 10
const ms = (value: number) => Math.round(value * 100) / 100
const message = (e: unknown) => (e instanceof Error ? e.message : String(e))

export const runLoad = async (options: LoadOptions): Promise<LoadReport> => {
  const began = performance.now()
  const log = options.log ?? (() => {})
  const baseline = activeResources()
  const teardown = options.teardown ?? new Teardown(log)
  const problems: string[] = []
  const figures: { -readonly [K in keyof LoadFigures]: LoadFigures[K] } = {
    episodes: options.episodes,
    episodes_ended: 0,
    episodes_failed: options.episodes,
    turns: 0,
    episode_phase_s: Number.NaN,
    episodes_per_s: Number.NaN,
    turns_per_s: Number.NaN,
    turn_exec_p50_ms: Number.NaN,
    turn_exec_p99_ms: Number.NaN,
    episode_wall_p50_ms: Number.NaN,
    episode_wall_p99_ms: Number.NaN,
    episode_sandbox_p50_ms: Number.NaN,
    episode_verify_p50_ms: Number.NaN,
    sampler_cpu_s: Number.NaN,
    sandbox_cpu_s: Number.NaN,
    verifier_cpu_s: Number.NaN,
    sampler_rss_peak_mb: Number.NaN,
    sampler_rss_after_mb: Number.NaN,
    sandbox_rss_peak_mb: Number.NaN,
    sandbox_rss_after_mb: Number.NaN,
    watch_streams: Number.NaN,
    watch_events: options.events,
    watch_phase_s: Number.NaN,
    watch_fanout_p50_ms: Number.NaN,
    watch_fanout_p99_ms: Number.NaN,
    gateway_cpu_s: Number.NaN,
    gateway_rss_peak_mb: Number.NaN,
    gateway_rss_after_mb: Number.NaN,
    leaks: {
      containers: Number.NaN,
      consumers: Number.NaN,
      watch_streams: Number.NaN,
      sandboxes: Number.NaN,
      handles_delta: Number.NaN,
    },
    wall_s: Number.NaN,
  }
  const leaks: { -readonly [K in keyof LeakFigures]: LeakFigures[K] } = { ...figures.leaks }

  const id = randomUUID().replaceAll("-", "").slice(0, 10)
  const owner = `t1-load-${id}`
  const docker = new Dockerode()
  const driver = options.driver ?? "docker"
  // A root of this run's own: what is under it after the episodes is what the host left.
  const bwrapRoot = join(tmpdir(), `t1-load-bwrap-${id}`)
  const memory = new MemoryWatch()
  let system: System | undefined
  let runtime: LoadRuntime | undefined
  try {
    let natsUrl = options.natsUrl
    if (natsUrl === undefined) {
      const nats = await startNatsServer()
      teardown.add("nats-server", () => nats.stop())
      natsUrl = nats.url
    }
    const started = await loadRuntime(natsUrl, `load${id}`)
    runtime = started
    teardown.add("load process NATS connection", async () => {
      await deleteRunStreams(started)
      await started.close()
    })
    if (driver === "docker")
      teardown.add("containers", () => removeOwnedContainers(docker, owner).then(() => undefined))
    else
      teardown.add("bwrap sandboxes", () => removeBwrapSandboxes(bwrapRoot).then(() => undefined))
    const members = startSystem({ natsUrl, prefix: started.subjects.prefix })
    system = members
    teardown.add("t1 processes", () => members.shutdown())
    teardown.add("memory watch", () => memory.stop())

    const listen = `127.0.0.1:${await freePort()}`
    log(`starting sandbox host (${driver}), verifier and gateway (logs in ${members.logDir})`)
    const [sandbox, verifier, gateway] = await Promise.all([
      members.start({
        name: "sandbox",
        args: [
          "actor",
          "sandbox",
          "--driver",
          driver,
          ...(driver === "bwrap" ? ["--sandbox-root", bwrapRoot] : []),
          "--owner",
          owner,
          "--concurrency",
          String(Math.max(64, options.episodes)),
          "--shutdown-grace-ms",
          "5000",
        ],
      }),
      members.start({
        name: "verifier",
        // At most 16 test runs at once: 64 pytest runs on two busy cores missed the verifier's
        // exec timeout (infra failures), 16 did not.
        args: ["actor", "verifier", "--concurrency", String(Math.min(16, options.episodes))],
      }),
      members.start({
        name: "gateway",
        args: ["gateway", "--listen", listen, "--shutdown-grace-ms", "2000"],
      }),
    ])
    const pids = {
      sampler: process.pid,
      sandbox: sandbox.child.pid ?? -1,
      verifier: verifier.child.pid ?? -1,
      gateway: gateway.child.pid ?? -1,
    }
    for (const [name, pid] of Object.entries(pids)) memory.track(name, pid)
    /** CPU seconds each process uses from now until the returned function is called. */
    const cpuFrom = () => {
      const at = Object.fromEntries(
        Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid) ?? Number.NaN]),
      )
      return (name: keyof typeof pids) =>
        ms((cpuSeconds(pids[name]) ?? Number.NaN) - (at[name] ?? Number.NaN))
    }
    const metric = (name: string, metricName: string) => async () =>
      metricValue(
        await httpText(`http://127.0.0.1:${members.members.get(name)?.metricsPort}/metrics`),
        metricName,
      )

    // Episodes.
    log(`episode phase: ${options.episodes} episodes × ${options.turns} command turns`)
    memory.resetPeak("sampler")
    memory.resetPeak("sandbox")
    const episodeCpu = cpuFrom()
    try {
      const result = await runEpisodePhase({
        runtime: started,
        teardown,
        episodes: options.episodes,
        turns: options.turns,
        // A liveness bound, not a speed target (the figures report speed): a CI machine shared
        // with other work ran the phase in 2–4 minutes.
        timeoutMs: 600_000,
        log,
      })
      // The completion turn runs no command (0 ms); a command through NATS and the shell takes more.
      const execMs = result.turnExecMs.filter((t) => t > 0)
      const timing = (part: "totalMs" | "sandboxMs" | "verifyMs") =>
        result.ends.map((end) => end.timings?.[part] ?? Number.NaN)
      const wall = timing("totalMs")
      problems.push(...result.problems)
      Object.assign(figures, {
        episodes_ended: result.ends.length,
        episodes_failed: result.failed,
        turns: result.turns,
        episode_phase_s: ms(result.seconds),
        episodes_per_s: ms(result.ends.length / result.seconds),
        turns_per_s: ms(result.turns / result.seconds),
        turn_exec_p50_ms: ms(percentile(execMs, 50)),
        turn_exec_p99_ms: ms(percentile(execMs, 99)),
        episode_wall_p50_ms: ms(percentile(wall, 50)),
        episode_wall_p99_ms: ms(percentile(wall, 99)),
        episode_sandbox_p50_ms: ms(percentile(timing("sandboxMs"), 50)),
        episode_verify_p50_ms: ms(percentile(timing("verifyMs"), 50)),
      })
    } catch (e) {
      problems.push(`episode phase: ${message(e)}`)
    }
    figures.sampler_cpu_s = episodeCpu("sampler")
    figures.sandbox_cpu_s = episodeCpu("sandbox")
    figures.verifier_cpu_s = episodeCpu("verifier")
    figures.sampler_rss_peak_mb = mb(memory.peak("sampler"))
    figures.sandbox_rss_peak_mb = mb(memory.peak("sandbox"))
    leaks.sandboxes = await settle(metric("sandbox", "t1_sandbox_sandboxes"), 30_000)
    leaks.containers = await settle(
      async () =>
        driver === "docker"
          ? ownedContainers(docker, owner)
          : (await ownedBwrapSandboxes(bwrapRoot)).length,
      30_000,
    )
    figures.sampler_rss_after_mb = mb(memory.current("sampler"))
    figures.sandbox_rss_after_mb = mb(memory.current("sandbox"))
    log(`episode phase done: ${figures.episodes_ended} ended, ${figures.episodes_failed} failed`)

    // Watches.
    log(`watch phase: ${options.watches} watches × ${options.events} events`)
    memory.resetPeak("gateway")
    const watchCpu = cpuFrom()
    try {
      const result = await runWatchPhase({
        runtime: started,
        teardown,
        address: listen,
        watches: options.watches,
        events: options.events,
        connections: 4,
        openStreams: metric("gateway", "t1_gateway_watch_streams"),
        timeoutMs: 90_000,
        log,
      })
      problems.push(...result.problems)
      Object.assign(figures, {
        watch_streams: result.openStreams,
        watch_phase_s: ms(result.seconds),
        watch_fanout_p50_ms: ms(percentile(result.fanoutMs, 50)),
        watch_fanout_p99_ms: ms(percentile(result.fanoutMs, 99)),
      })
      if (result.openStreams !== options.watches)
        problems.push(
          `the gateway reported ${result.openStreams} open watch streams, expected ${options.watches}`,
        )
    } catch (e) {
      problems.push(`watch phase: ${message(e)}`)
    }
    figures.gateway_cpu_s = watchCpu("gateway")
    figures.gateway_rss_peak_mb = mb(memory.peak("gateway"))
    leaks.watch_streams = await settle(metric("gateway", "t1_gateway_watch_streams"), 30_000)
    leaks.consumers = await settle(() => jobEventConsumers(started), 30_000)
    figures.gateway_rss_after_mb = mb(memory.current("gateway"))
    log("watch phase done")
  } catch (e) {
    problems.push(`set-up: ${message(e)}`)
    if (system !== undefined) problems.push(system.dump())
  } finally {
    log("stopping everything")
    problems.push(...(await teardown.run()).map((f) => `teardown: ${f}`))
  }
  if (runtime === undefined) problems.push("no NATS connection: nothing ran")

  const settling = performance.now()
  const extra = await (async () => {
    const until = Date.now() + 20_000
    for (;;) {
      const beyond = resourcesBeyond(baseline)
      if (total(beyond) === 0 || Date.now() > until) return beyond
      await new Promise((r) => setTimeout(r, 250))
    }
  })()
  log(
    `handles: ${total(extra)} beyond the baseline after ${Math.round(performance.now() - settling)} ms`,
  )
  leaks.handles_delta = total(extra)
  if (leaks.handles_delta > 0)
    problems.push(
      `open handles beyond the baseline: ${[...extra].map(([k, n]) => `${k} ×${n}`).join(", ")}`,
    )
  for (const [what, n] of Object.entries(leaks))
    if (n !== 0 && what !== "handles_delta") problems.push(`leak: ${what} = ${n}`)
  figures.leaks = leaks
  figures.wall_s = ms((performance.now() - began) / 1000)
  // The processes' logs are kept only when something went wrong.
  if (system !== undefined) {
    if (problems.length === 0) rmSync(system.logDir, { recursive: true, force: true })
    else problems.push(`the t1 processes' logs are in ${system.logDir}`)
  }
  return { figures, problems }
}
