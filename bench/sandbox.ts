/**
 * Sandbox latency and throughput, measured in one run against the local Docker engine:
 *   - each driver (docker, local, bwrap) in this process: create to first exec, exec p50/p99,
 *   - `true` through the sandbox actor over NATS (client bus → host bus → persistent shell),
 *   - the same command through `docker exec` on the command line and dockerode's one-shot exec
 *     (the baselines: what a harness without persistent sessions pays per command),
 *   - warm-pool acquire and cold create-to-first-exec, as a client of the actor sees them,
 *   - exec throughput with 16 sessions running at once.
 *
 *   npm run bench:sandbox [-- --json] [--iterations N] [--seconds S]
 */
import { execFile } from "node:child_process"
import { randomUUID } from "node:crypto"
import { parseArgs, promisify } from "node:util"
import { fromBinary } from "@bufbuild/protobuf"
import Dockerode from "dockerode"
import { Context, Effect, Layer, Logger, Stream } from "effect"
import {
  BASE_IMAGE,
  BwrapDriverLive,
  DockerDriverLive,
  LocalDriverLive,
  runSandboxHost,
  SandboxDriver,
  type SandboxError,
  sandboxClient,
  sandboxSpec,
} from "../actors/sandbox/index.ts"
import { SandboxHostHeartbeatSchema } from "../proto/index.ts"
import { Bus, NatsBusLive, subjectsFor } from "../services/bus/index.ts"
import { Metrics, makeMetrics } from "../services/metrics/index.ts"
import { startNatsServer } from "../test/support/nats-server.ts"

const run = promisify(execFile)

const usage = `usage: npm run bench:sandbox -- [--json] [--iterations N] [--seconds S] [--warm N]
  --iterations N   exec round trips through the actor (default 300; baselines use N/10 and N/3)
  --seconds S      duration of the 16-session throughput run (default 5)
  --warm N         warm pool size (default 8)
  --json           print one JSON object as the last line`

const parsed = (() => {
  try {
    return parseArgs({
      strict: true,
      options: {
        json: { type: "boolean" },
        iterations: { type: "string" },
        seconds: { type: "string" },
        warm: { type: "string" },
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
    process.stderr.write(`--${name} must be a positive integer\n${usage}\n`)
    process.exit(2)
  }
  return Number(raw)
}
const iterations = positive("iterations", parsed.iterations, 300)
const seconds = positive("seconds", parsed.seconds, 5)
const warmSize = positive("warm", parsed.warm, 8)

const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN
}
const ms = (since: bigint) => Number(process.hrtime.bigint() - since) / 1e6
const log = (line: string) => process.stderr.write(`${line}\n`)

const subjects = subjectsFor(`bench${randomUUID().slice(0, 6)}`)
const owner = `bench-${randomUUID().slice(0, 8)}`
const template = sandboxSpec({ image: BASE_IMAGE, ttlMs: 600_000 })
/** The same spec as a client sends it (limits left at the host's defaults). */
const request = { image: BASE_IMAGE, workdir: template.workdir }

/**
 * One driver in this process, no bus: create to first exec of `true` (`creates` times), then
 * `true` in one sandbox's persistent shell (`execs` times). The same for every driver, so the
 * drivers compare with each other (the actor numbers above add the bus).
 */
const driverLatency = (
  name: string,
  layer: Layer.Layer<SandboxDriver, SandboxError>,
  spec: ReturnType<typeof sandboxSpec>,
  creates: number,
  execs: number,
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const driver = yield* SandboxDriver
      const options = { timeoutMs: 30_000, maxOutputBytes: 65_536 }
      // The first create prepares what the driver caches (an image export, a toolchain).
      const first = yield* driver.create(spec)
      yield* driver.exec(first.id, "true", options)
      const create: number[] = []
      for (let i = 0; i < creates; i++) {
        const t = process.hrtime.bigint()
        const info = yield* driver.create(spec)
        yield* driver.exec(info.id, "true", options)
        create.push(ms(t))
        yield* driver.destroy(info.id)
      }
      const exec: number[] = []
      for (let i = 0; i < execs; i++) {
        const t = process.hrtime.bigint()
        yield* driver.exec(first.id, "true", options)
        exec.push(ms(t))
      }
      yield* driver.destroy(first.id)
      const result = {
        create_p50_ms: quantile(create, 0.5),
        exec_p50_ms: quantile(exec, 0.5),
        exec_p99_ms: quantile(exec, 0.99),
      }
      log(
        `${name} driver: create-to-first-exec p50 ${result.create_p50_ms.toFixed(1)} ms, exec p50 ${result.exec_p50_ms.toFixed(2)} ms, p99 ${result.exec_p99_ms.toFixed(2)} ms`,
      )
      return result
    }).pipe(Effect.provide(layer)),
  )

const bench = Effect.gen(function* () {
  const docker = new Dockerode()
  yield* Effect.tryPromise({
    try: () => docker.getImage(BASE_IMAGE).inspect(),
    catch: () => new Error(`${BASE_IMAGE} is missing: build it with npx t1 image build-base`),
  })
  const server = yield* Effect.acquireRelease(
    Effect.promise(() => startNatsServer()),
    (s) => Effect.promise(() => s.stop()),
  )
  const busOf = (name: string) =>
    Layer.build(NatsBusLive({ servers: server.url, name })).pipe(
      Effect.map((c) => Context.get(c, Bus)),
    )
  const hostBus = yield* busOf("bench-sandbox-host")
  const clientBus = yield* busOf("bench-sandbox-client")
  const metrics = makeMetrics({ defaultMetrics: false })

  yield* Effect.forkScoped(
    runSandboxHost({
      subjects,
      owner,
      defaults: {
        image: BASE_IMAGE,
        workdir: "/app",
        ttlMs: 600_000,
        execTimeoutMs: 30_000,
        maxOutputBytes: 65_536,
        maxGetBytes: 1 << 20,
      },
      pool: {
        warm: [{ spec: template, size: warmSize }],
        maxStarting: 4,
        createPerSecond: 20,
        createBurst: 8,
      },
      reapIntervalMs: 60_000,
      heartbeatMs: 200,
      perSandboxConcurrency: 4,
    }).pipe(
      Effect.provideService(Bus, hostBus),
      Effect.provideService(Metrics, metrics),
      Effect.provide(DockerDriverLive({ ownerId: owner })),
    ),
  )
  const client = sandboxClient(clientBus, subjects)

  const heartbeats = yield* clientBus.subscribe(`${subjects.prefix}.sandbox.heartbeat`)
  const waitForWarm = Stream.runHead(
    heartbeats.pipe(
      Stream.map((m) => fromBinary(SandboxHostHeartbeatSchema, m.data)),
      Stream.filter((h) => h.warm >= warmSize),
    ),
  ).pipe(Effect.timeout("120 seconds"))
  log(`waiting for ${warmSize} warm sandboxes…`)
  yield* waitForWarm

  // Warm acquire: a create request answered from the pool, as the client sees it.
  const warmAcquire: number[] = []
  for (let round = 0; round < 3; round++) {
    const ids: string[] = []
    for (let i = 0; i < Math.min(warmSize, 8); i++) {
      const t = process.hrtime.bigint()
      const r = yield* client.create(request)
      warmAcquire.push(ms(t))
      ids.push(r.sandboxId)
    }
    yield* Effect.forEach(ids, (id) => client.destroy(id), { concurrency: 8 })
    yield* waitForWarm
  }
  log(`warm acquire p50 ${quantile(warmAcquire, 0.5).toFixed(2)} ms`)

  // Cold: a spec no warm template matches, then its first command.
  const cold: number[] = []
  for (let i = 0; i < 5; i++) {
    const t = process.hrtime.bigint()
    const r = yield* client.create({ ...request, env: { COLD: String(i) } })
    yield* client.exec(r.sandboxId, "true")
    cold.push(ms(t))
    yield* client.destroy(r.sandboxId)
  }
  log(`cold create-to-first-exec p50 ${quantile(cold, 0.5).toFixed(1)} ms`)

  const { sandboxId } = yield* client.create(request)
  yield* client.exec(sandboxId, "true")
  const actor: number[] = []
  for (let i = 0; i < iterations; i++) {
    const t = process.hrtime.bigint()
    const r = yield* client.exec(sandboxId, "true")
    actor.push(ms(t))
    if (r.exitCode !== 0) return yield* Effect.fail(new Error(`true exited ${r.exitCode}`))
  }
  log(`actor exec p50 ${quantile(actor, 0.5).toFixed(2)} ms`)

  const cli: number[] = []
  for (let i = 0; i < Math.max(10, Math.floor(iterations / 10)); i++) {
    const t = process.hrtime.bigint()
    yield* Effect.promise(() => run("docker", ["exec", sandboxId, "true"]))
    cli.push(ms(t))
  }
  log(`docker exec CLI p50 ${quantile(cli, 0.5).toFixed(1)} ms`)

  const container = docker.getContainer(sandboxId)
  const oneShot: number[] = []
  for (let i = 0; i < Math.max(10, Math.floor(iterations / 3)); i++) {
    const t = process.hrtime.bigint()
    yield* Effect.promise(async () => {
      const exec = await container.exec({ Cmd: ["true"], AttachStdout: true, AttachStderr: true })
      const stream = await exec.start({ hijack: true, stdin: false })
      await new Promise<void>((resolve, reject) => {
        stream.on("end", () => resolve())
        stream.on("error", reject)
        stream.resume()
      })
      const info = await exec.inspect()
      if (info.ExitCode !== 0) throw new Error(`exit ${info.ExitCode}`)
    })
    oneShot.push(ms(t))
  }
  log(`dockerode one-shot exec p50 ${quantile(oneShot, 0.5).toFixed(1)} ms`)
  yield* client.destroy(sandboxId)

  const sessions = yield* Effect.forEach(
    Array.from({ length: 16 }),
    () => client.create(request).pipe(Effect.map((r) => r.sandboxId)),
    { concurrency: 4 },
  )
  const until = Date.now() + seconds * 1000
  const started = process.hrtime.bigint()
  const counts = yield* Effect.forEach(
    sessions,
    (id) =>
      Effect.gen(function* () {
        let n = 0
        while (Date.now() < until) {
          yield* client.exec(id, "true")
          n++
        }
        return n
      }),
    { concurrency: "unbounded" },
  )
  const concurrent = counts.reduce((a, b) => a + b, 0) / (ms(started) / 1000)
  yield* Effect.forEach(sessions, (id) => client.destroy(id), { concurrency: 8 })
  log(`16 sessions: ${concurrent.toFixed(0)} execs/s`)

  // The drivers side by side, each in this process (docker, local, bwrap).
  const driverSpec = sandboxSpec({ image: BASE_IMAGE, ttlMs: 600_000 })
  const creates = Math.max(5, Math.floor(iterations / 15))
  const docker_ = yield* driverLatency(
    "docker",
    DockerDriverLive({ ownerId: `${owner}-d` }),
    driverSpec,
    Math.min(creates, 10),
    iterations,
  )
  const local = yield* driverLatency(
    "local",
    LocalDriverLive({ owner: `${owner}-l` }),
    driverSpec,
    creates,
    iterations,
  )
  const bwrap = yield* driverLatency(
    "bwrap",
    BwrapDriverLive({ owner: `${owner}-b` }),
    driverSpec,
    creates,
    iterations,
  )

  return {
    docker_create_p50_ms: docker_.create_p50_ms,
    docker_exec_p50_ms: docker_.exec_p50_ms,
    docker_exec_p99_ms: docker_.exec_p99_ms,
    local_create_p50_ms: local.create_p50_ms,
    local_exec_p50_ms: local.exec_p50_ms,
    local_exec_p99_ms: local.exec_p99_ms,
    bwrap_create_p50_ms: bwrap.create_p50_ms,
    bwrap_exec_p50_ms: bwrap.exec_p50_ms,
    bwrap_exec_p99_ms: bwrap.exec_p99_ms,
    actor_exec_p50_ms: quantile(actor, 0.5),
    actor_exec_p99_ms: quantile(actor, 0.99),
    docker_cli_exec_p50_ms: quantile(cli, 0.5),
    docker_cli_exec_p99_ms: quantile(cli, 0.99),
    dockerode_exec_p50_ms: quantile(oneShot, 0.5),
    dockerode_exec_p99_ms: quantile(oneShot, 0.99),
    warm_acquire_p50_ms: quantile(warmAcquire, 0.5),
    cold_start_p50_ms: quantile(cold, 0.5),
    concurrent16_execs_per_s: concurrent,
    iterations,
  }
})

const report = await Effect.runPromise(
  Effect.scoped(bench).pipe(Effect.provideService(Logger.LogToStderr, true)),
).catch((e: unknown) => {
  process.stderr.write(`bench:sandbox failed: ${e instanceof Error ? e.message : String(e)}\n`)
  process.exit(1)
})
const f = (n: number, d = 2) => n.toFixed(d)
const speedup = report.docker_cli_exec_p50_ms / report.actor_exec_p50_ms
console.log(`
sandbox bench (docker engine, NATS on loopback; ms unless noted)

                                   p50        p99
  actor exec \`true\` over NATS   ${f(report.actor_exec_p50_ms).padStart(8)}   ${f(report.actor_exec_p99_ms).padStart(8)}
  docker exec (CLI)              ${f(report.docker_cli_exec_p50_ms).padStart(8)}   ${f(report.docker_cli_exec_p99_ms).padStart(8)}
  dockerode one-shot exec        ${f(report.dockerode_exec_p50_ms).padStart(8)}   ${f(report.dockerode_exec_p99_ms).padStart(8)}
  warm-pool acquire              ${f(report.warm_acquire_p50_ms).padStart(8)}
  cold create-to-first-exec      ${f(report.cold_start_p50_ms, 1).padStart(8)}
  16 concurrent sessions         ${f(report.concurrent16_execs_per_s, 0).padStart(8)} execs/s

  drivers in process             create     exec p50   exec p99
  docker                         ${f(report.docker_create_p50_ms, 1).padStart(8)}   ${f(report.docker_exec_p50_ms).padStart(8)}   ${f(report.docker_exec_p99_ms).padStart(8)}
  local                          ${f(report.local_create_p50_ms, 1).padStart(8)}   ${f(report.local_exec_p50_ms).padStart(8)}   ${f(report.local_exec_p99_ms).padStart(8)}
  bwrap                          ${f(report.bwrap_create_p50_ms, 1).padStart(8)}   ${f(report.bwrap_exec_p50_ms).padStart(8)}   ${f(report.bwrap_exec_p99_ms).padStart(8)}
  bwrap targets: create p50 <= 20 ms ${report.bwrap_create_p50_ms <= 20 ? "PASS" : "MISSED"}, exec p50 <= 1 ms ${report.bwrap_exec_p50_ms <= 1 ? "PASS" : "MISSED"}, p99 <= 5 ms ${report.bwrap_exec_p99_ms <= 5 ? "PASS" : "MISSED"}

  actor vs docker exec CLI: ${f(speedup, 1)}x faster (target >= 10x); actor p50 target <= 5 ms: ${report.actor_exec_p50_ms <= 5 ? "PASS" : "BELOW"}
  warm acquire p50 target <= 5 ms: ${report.warm_acquire_p50_ms <= 5 ? "PASS" : "BELOW"}`)
if (parsed.json === true)
  console.log(JSON.stringify({ ...report, actor_vs_docker_cli_speedup: speedup }))
process.exit(0)
