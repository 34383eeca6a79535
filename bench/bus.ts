/**
 * Bus throughput: raw nats.js publish→subscribe versus the same bytes through the t1 Bus
 * (NatsBusLive, BlobChunk protobuf with CRC-32 on both sides), measured in one run with
 * interleaved rounds so machine noise hits both paths alike.
 *
 *   npm run bench:bus -- [--json] [--messages N] [--rounds R] [--size BYTES] [--window N]
 *                        [--nats-cluster]
 *
 * --nats-cluster: then the same rounds again on a private three-node cluster, the publishers on
 * one node and the subscribers on another, so every message crosses a route. These are core NATS
 * messages, which no stream holds: nothing is replicated, and what the cluster costs is the hop.
 *
 * A round's clock runs from the first publish to the delivery of its last byte at the subscriber
 * (stronger than a publisher flush, which the Bus does not expose). Both publishers pause after
 * every --window messages until the subscriber is at most one window behind, so neither path just
 * fills client buffers and memory stays bounded. Publisher, subscriber and (by default) the
 * nats-server share this machine, so CPU either side spends shows up in both paths' numbers.
 *
 * Uses its own nats-server on 127.0.0.1 unless T1_BENCH_NATS_URL is set. Reports; never asserts.
 */
import { randomFillSync } from "node:crypto"
import { performance } from "node:perf_hooks"
import { parseArgs } from "node:util"
import type { NatsConnection } from "@nats-io/transport-node"
import { Cause, Effect, Exit, Stream } from "effect"
import { assembleBlobs, BlobAssembler, type BusShape, publishBlob } from "../services/bus/index.ts"
import {
  BenchError,
  benchCluster,
  benchError,
  benchNats,
  busConnection,
  median,
  positiveInt,
  rawConnection,
  UsageError,
} from "./nats-bench.ts"

const USAGE = `usage: npm run bench:bus -- [--json] [--messages N] [--rounds R] [--size BYTES] [--window N] [--nats-cluster]

  --json          also print one JSON object as the last line of output
  --messages N    messages per round and path (default 1000)
  --rounds R      measured rounds per path, after one warm-up round each (default 5)
  --size BYTES    payload bytes per message (default 262144 = 256 KiB)
  --window N      messages published before the publisher waits for the subscriber to be
                  no more than N messages behind (default 16); the same for both paths
  --nats-cluster  then the same on a private three-node cluster, publishers on one node and
                  subscribers on another (JSON keys cluster_*, cluster_over_single)
  -h, --help      this text

Starts a private nats-server on 127.0.0.1 unless T1_BENCH_NATS_URL is set.`

const TARGET_RATIO = 0.8
/** A round fails when the subscriber has received nothing new for this long. */
const STALL_MS = 15_000
const RAW_SUBJECT = "bench.bus.raw"
const T1_SUBJECT = "bench.bus.t1"

interface Options {
  readonly json: boolean
  readonly messages: number
  readonly rounds: number
  readonly size: number
  readonly window: number
  readonly cluster: boolean
}

const FLAGS = {
  json: { type: "boolean" },
  "nats-cluster": { type: "boolean" },
  messages: { type: "string" },
  rounds: { type: "string" },
  size: { type: "string" },
  window: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const

/** Parsed options or "help"; throws UsageError. */
const parseOptions = (argv: ReadonlyArray<string>): Options | "help" => {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof FLAGS }>>
  try {
    parsed = parseArgs({ args: [...argv], strict: true, allowPositionals: false, options: FLAGS })
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e))
  }
  const { values } = parsed
  if (values.help === true) return "help"
  return {
    json: values.json === true,
    messages: positiveInt("messages", values.messages, 1000),
    rounds: positiveInt("rounds", values.rounds, 5),
    size: positiveInt("size", values.size, 256 * 1024),
    window: positiveInt("window", values.window, 16),
    cluster: values["nats-cluster"] === true,
  }
}

/**
 * What a subscriber has received in the current round. The publisher of either path waits on
 * it the same way, which is what bounds memory: at most two windows are ever in flight.
 */
class Progress {
  bytes = 0
  messages = 0
  /** performance.now() of the latest delivery. */
  lastAt = 0
  private failure: Error | undefined
  private waiter: { target: number; resolve: () => void } | undefined

  reset(): void {
    this.bytes = 0
    this.messages = 0
    this.lastAt = performance.now()
  }

  add(bytes: number): void {
    this.bytes += bytes
    this.messages++
    this.lastAt = performance.now()
    const w = this.waiter
    if (w !== undefined && this.bytes >= w.target) {
      this.waiter = undefined
      w.resolve()
    }
  }

  fail(error: Error): void {
    this.failure ??= error
  }

  /** Resolves once at least target bytes have arrived this round. */
  waitFor(target: number): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    if (this.bytes >= target) return Promise.resolve()
    return new Promise<void>((resolve, reject) => {
      const since = performance.now()
      const timer = setInterval(() => {
        const idle = performance.now() - Math.max(since, this.lastAt)
        if (this.failure === undefined && idle < STALL_MS) return
        clearInterval(timer)
        this.waiter = undefined
        reject(
          this.failure ??
            new Error(`subscriber stalled at ${this.bytes}/${target} bytes for ${STALL_MS} ms`),
        )
      }, 250)
      this.waiter = {
        target,
        resolve: () => {
          clearInterval(timer)
          resolve()
        },
      }
    })
  }
}

interface Round {
  readonly seconds: number
  readonly bytes: number
  readonly mbPerS: number
  /** CPU (user + system) this process spent per message, publisher and subscriber together. */
  readonly cpuUsPerMessage: number
}

const startRound = () => ({ at: performance.now(), cpu: process.cpuUsage() })

const roundOf = (
  progress: Progress,
  started: ReturnType<typeof startRound>,
  messages: number,
): Round => {
  const seconds = (progress.lastAt - started.at) / 1000
  const cpu = process.cpuUsage(started.cpu)
  return {
    seconds,
    bytes: progress.bytes,
    mbPerS: progress.bytes / 1e6 / seconds,
    cpuUsPerMessage: (cpu.user + cpu.system) / messages,
  }
}

/** Baseline: plain nats.js, the payload as is (sliced only if it exceeds max_payload). */
const rawRound = async (
  pub: NatsConnection,
  progress: Progress,
  payload: Uint8Array,
  opts: Options,
): Promise<Round> => {
  const maxPayload = pub.info?.max_payload ?? 1024 * 1024
  const pieces: Uint8Array[] = []
  for (let at = 0; at < payload.byteLength; at += maxPayload) {
    pieces.push(payload.subarray(at, Math.min(payload.byteLength, at + maxPayload)))
  }
  progress.reset()
  const started = startRound()
  let sent = 0
  for (let i = 0; i < opts.messages; i++) {
    for (const piece of pieces) pub.publish(RAW_SUBJECT, piece)
    sent += opts.size
    if ((i + 1) % opts.window === 0) await progress.waitFor(sent - opts.window * opts.size)
  }
  await progress.waitFor(opts.messages * opts.size)
  return roundOf(progress, started, opts.messages)
}

/** t1: Bus.publish of splitBlob's BlobChunks (publishBlob); the subscriber reassembles. */
const t1Round = (
  pub: BusShape,
  progress: Progress,
  payload: Uint8Array,
  opts: Options,
  label: string,
): Effect.Effect<Round, BenchError> =>
  Effect.gen(function* () {
    const wait = (target: number) =>
      Effect.tryPromise({ try: () => progress.waitFor(target), catch: benchError("t1 subscriber") })
    progress.reset()
    const started = startRound()
    let sent = 0
    for (let i = 0; i < opts.messages; i++) {
      yield* publishBlob(pub, T1_SUBJECT, payload, { blobId: `${label}-${i}` }).pipe(
        Effect.mapError(benchError("t1 publish")),
      )
      sent += opts.size
      if ((i + 1) % opts.window === 0) yield* wait(sent - opts.window * opts.size)
    }
    yield* wait(opts.messages * opts.size)
    return roundOf(progress, started, opts.messages)
  })

const fmt = (n: number, digits = 1) => n.toFixed(digits)

/** Where a run's publishers and subscribers connect: one server, or two nodes of the cluster. */
interface Where {
  readonly pubUrl: string
  readonly subUrl: string
  readonly external: boolean
}

const bench = (opts: Options, where: Where) =>
  Effect.gen(function* () {
    const { pubUrl, subUrl, external } = where
    const url = pubUrl === subUrl ? pubUrl : `${pubUrl} → ${subUrl}`
    const rawPub = yield* rawConnection(pubUrl, "bench-raw-pub")
    const rawSub = yield* rawConnection(subUrl, "bench-raw-sub")
    // Two bus instances, two connections: publisher and consumer as separate services.
    const t1Pub = yield* busConnection(pubUrl, "bench-t1-pub")
    const t1Sub = yield* busConnection(subUrl, "bench-t1-sub")

    const rawProgress = new Progress()
    // nats.js's fastest way to receive: a callback subscription (no async iterator).
    rawSub.subscribe(RAW_SUBJECT, {
      callback: (err, m) => {
        if (err === null) rawProgress.add(m.data.byteLength)
        else rawProgress.fail(err)
      },
    })
    yield* Effect.tryPromise({ try: () => rawSub.flush(), catch: benchError("raw subscribe") })

    const t1Progress = new Progress()
    const messages = yield* t1Sub
      .subscribe(T1_SUBJECT)
      .pipe(Effect.mapError(benchError("t1 subscribe")))
    yield* Effect.forkScoped(
      Stream.runForEach(assembleBlobs(messages, new BlobAssembler()), (blob) =>
        blob.data.byteLength === opts.size
          ? Effect.sync(() => t1Progress.add(blob.data.byteLength))
          : Effect.fail(new BenchError({ reason: `blob of ${blob.data.byteLength} bytes` })),
      ).pipe(
        Effect.catchCause((cause) =>
          Effect.sync(() => t1Progress.fail(new Error(Cause.pretty(cause)))),
        ),
      ),
    )

    const payload = new Uint8Array(opts.size)
    randomFillSync(payload)

    const runRaw = () =>
      Effect.tryPromise({
        try: () => rawRound(rawPub, rawProgress, payload, opts),
        catch: benchError("raw round"),
      })
    const runT1 = (label: string) => t1Round(t1Pub, t1Progress, payload, opts, label)
    const log = (line: string) => Effect.sync(() => process.stderr.write(`${line}\n`))

    yield* log(
      `bus bench: ${opts.messages} × ${opts.size} B per round, window ${opts.window}, ` +
        `${opts.rounds} rounds + warm-up, nats ${external ? "external" : "private"} ${url}`,
    )
    const warmRaw = yield* runRaw()
    const warmT1 = yield* runT1("warm")
    yield* log(`warm-up: raw ${fmt(warmRaw.mbPerS)} MB/s, t1 ${fmt(warmT1.mbPerS)} MB/s`)

    const raw: Round[] = []
    const t1: Round[] = []
    let peakRss = process.memoryUsage().rss
    for (let r = 0; r < opts.rounds; r++) {
      // ABBA order: neither path always runs first (or right after the other).
      if (r % 2 === 0) {
        raw.push(yield* runRaw())
        t1.push(yield* runT1(`r${r}`))
      } else {
        t1.push(yield* runT1(`r${r}`))
        raw.push(yield* runRaw())
      }
      peakRss = Math.max(peakRss, process.memoryUsage().rss)
      yield* log(
        `round ${r + 1}/${opts.rounds}: raw ${fmt(raw[r]?.mbPerS ?? 0)} MB/s, ` +
          `t1 ${fmt(t1[r]?.mbPerS ?? 0)} MB/s`,
      )
    }
    return { raw, t1, peakRss, url, external }
  })

const report = (
  opts: Options,
  result: Effect.Success<ReturnType<typeof bench>>,
): { lines: string[]; json: Record<string, unknown> } => {
  const rawMb = median(result.raw.map((r) => r.mbPerS))
  const t1Mb = median(result.t1.map((r) => r.mbPerS))
  const ratio = t1Mb / rawMb
  const pairedRatio = median(result.raw.map((r, i) => (result.t1[i]?.mbPerS ?? 0) / r.mbPerS))
  const rawCpu = median(result.raw.map((r) => r.cpuUsPerMessage))
  const t1Cpu = median(result.t1.map((r) => r.cpuUsPerMessage))
  const pass = ratio >= TARGET_RATIO
  const row = (label: string, raw: number, t1: number, rc: number, tc: number) =>
    `  ${label.padStart(6)}  ${fmt(raw).padStart(9)}  ${fmt(t1).padStart(9)}  ${fmt(t1 / raw, 3).padStart(7)}` +
    `  ${fmt(rc, 0).padStart(11)}  ${fmt(tc, 0).padStart(10)}`
  const lines = [
    "",
    `bus throughput: ${opts.size} B messages, ${opts.messages} per round, window ${opts.window}, ` +
      `median of ${opts.rounds} interleaved rounds (MB = 10^6 B)`,
    "",
    "   round   raw MB/s    t1 MB/s   t1/raw  raw CPU µs/msg  t1 CPU µs/msg",
    ...result.raw.map((r, i) => {
      const t = result.t1[i]
      return row(
        String(i + 1),
        r.mbPerS,
        t?.mbPerS ?? 0,
        r.cpuUsPerMessage,
        t?.cpuUsPerMessage ?? 0,
      )
    }),
    row("median", rawMb, t1Mb, rawCpu, t1Cpu),
    "",
    `  baseline (raw nats.js)   ${fmt(rawMb)} MB/s`,
    `  t1 (Bus + BlobChunk)     ${fmt(t1Mb)} MB/s`,
    `  ratio                    ${fmt(ratio, 3)}  (median of per-round ratios ${fmt(pairedRatio, 3)})`,
    `  target                   t1 >= ${TARGET_RATIO} x raw`,
    `  result                   ${pass ? "PASS" : "BELOW"}`,
    `  bench process CPU/msg    raw ${fmt(rawCpu, 0)} µs, t1 ${fmt(t1Cpu, 0)} µs (publisher + subscriber)`,
    `  peak RSS                 ${fmt(result.peakRss / 2 ** 20, 0)} MiB`,
    "",
  ]
  const json = {
    raw_mb_s: Number(rawMb.toFixed(2)),
    t1_mb_s: Number(t1Mb.toFixed(2)),
    ratio: Number(ratio.toFixed(4)),
    message_bytes: opts.size,
    messages: opts.messages,
    rounds: opts.rounds,
    window: opts.window,
    target_ratio: TARGET_RATIO,
    pass,
    paired_ratio: Number(pairedRatio.toFixed(4)),
    raw_rounds_mb_s: result.raw.map((r) => Number(r.mbPerS.toFixed(2))),
    t1_rounds_mb_s: result.t1.map((r) => Number(r.mbPerS.toFixed(2))),
    raw_cpu_us_per_msg: Math.round(rawCpu),
    t1_cpu_us_per_msg: Math.round(t1Cpu),
    peak_rss_bytes: result.peakRss,
    nats: result.external ? "external" : "private",
    node: process.version,
  }
  return { lines, json }
}

const main = async (): Promise<number> => {
  let opts: Options
  try {
    const parsed = parseOptions(process.argv.slice(2))
    if (parsed === "help") {
      process.stdout.write(`${USAGE}\n`)
      return 0
    }
    opts = parsed
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    process.stderr.write(`bench:bus: ${e.message}\n${USAGE}\n`)
    return 2
  }
  const abort = new AbortController()
  const onSignal = () => abort.abort()
  process.once("SIGINT", onSignal)
  process.once("SIGTERM", onSignal)
  const both = Effect.gen(function* () {
    const single = yield* Effect.scoped(
      Effect.flatMap(benchNats, ({ url, external }) =>
        bench(opts, { pubUrl: url, subUrl: url, external }),
      ),
    )
    if (!opts.cluster) return { single, cluster: undefined }
    const cluster = yield* Effect.scoped(
      Effect.flatMap(benchCluster, ([a, b]) =>
        bench(opts, { pubUrl: a ?? "", subUrl: b ?? "", external: false }),
      ),
    )
    return { single, cluster }
  })
  const exit = await Effect.runPromiseExit(both, { signal: abort.signal })
  process.off("SIGINT", onSignal)
  process.off("SIGTERM", onSignal)
  if (Exit.isFailure(exit)) {
    process.stderr.write(`bench:bus failed:\n${Cause.pretty(exit.cause)}\n`)
    return abort.signal.aborted ? 130 : 1
  }
  const { lines, json } = report(opts, exit.value.single)
  if (exit.value.cluster !== undefined) {
    const c = report(opts, exit.value.cluster)
    const t1Over = (c.json.t1_mb_s as number) / (json.t1_mb_s as number)
    const rawOver = (c.json.raw_mb_s as number) / (json.raw_mb_s as number)
    lines.push(
      "three-node cluster, publishers on node 1 and subscribers on node 2 (every message crosses a route):",
      ...c.lines,
      `  cluster / single         t1 ${fmt(t1Over, 3)}, raw ${fmt(rawOver, 3)}`,
      "",
    )
    Object.assign(json, {
      cluster_raw_mb_s: c.json.raw_mb_s,
      cluster_t1_mb_s: c.json.t1_mb_s,
      cluster_ratio: c.json.ratio,
      cluster_over_single: Number(t1Over.toFixed(3)),
      cluster_over_single_raw: Number(rawOver.toFixed(3)),
      cluster_t1_rounds_mb_s: c.json.t1_rounds_mb_s,
      cluster_raw_rounds_mb_s: c.json.raw_rounds_mb_s,
    })
  }
  process.stdout.write(`${lines.join("\n")}\n`)
  if (opts.json) process.stdout.write(`${JSON.stringify(json)}\n`)
  return 0
}

process.exitCode = await main()
