/**
 * Trajectory streaming: chunks of long episodes with routing for 48 layers × top-8 of 256
 * experts (a DeepSeek-V3-sized router), encoded by the sampler's own code (splitSpan,
 * chunkRecord, encodeRecord, published with Bus.jsPublish and its message ids) and decoded and
 * assembled by the buffer's (Bus.consume, fromBinary, TrajectoryAssembler), over a local
 * nats-server. In the same run, with the same JetStream settings and publish window:
 *
 * - raw: the very bytes t1 publishes, pre-encoded, through plain nats.js (publish, consume,
 *   ack; nothing decoded) — the transport's ceiling;
 * - json: the same trajectories as an engine's JSON answer carries them (SGLang's
 *   `routed_experts`: base64 of little-endian int32; ids, log-probs and mask as JSON arrays),
 *   encoded, published, parsed and decoded back to typed arrays.
 *
 * Each path runs in a Node process of its own (bench/stream/worker.ts: its publisher and its
 * consumer), warmed up once and then kept, and this process schedules their runs one at a
 * time. In one shared process a path paid for the garbage and the collector state another left
 * behind, and the full collection that used to run before every run to prevent that put V8 in a
 * regime no long-running actor is in: ~20 major collections per 300 MB (external memory
 * pressure from the message buffers) against none in steady state, which halved both paths'
 * throughput and hid most of t1's own cost.
 *
 *   npm run bench:stream -- [--json] [--episodes N] [--tokens N] [--rounds R] [--window N]
 *                           [--nats-cluster]
 *
 * --nats-cluster: then the t1 and raw paths run again on a private three-node JetStream cluster
 * with three replicas of each stream, every connection given the three URLs (as t1's processes
 * are), and the cost of replication is printed as R3 over R1 (the single server above).
 *
 * Streams are in memory (work queues, acked), so the disk is not what is measured. Uses its own
 * nats-server on 127.0.0.1 unless T1_BENCH_NATS_URL is set. Reports; never asserts.
 */
import { type ChildProcess, fork } from "node:child_process"
import { parseArgs } from "node:util"
import { Effect } from "effect"
import { benchCluster, benchNats, positiveInt, UsageError } from "./nats-bench.ts"
import { EXPERTS, LAYERS, type PathName, type Round, TOP_K } from "./stream/paths.ts"
import type { FromWorker, ToWorker } from "./stream/worker.ts"

const USAGE = `usage: npm run bench:stream -- [--json] [--episodes N] [--tokens N] [--rounds R] [--window N] [--nats-cluster]

  --json          also print one JSON object as the last line of output
  --episodes N    trajectories per run and path (default 48)
  --tokens N      tokens per trajectory (default 4096)
  --rounds R      measured rounds, after one warm-up run per path (default 7): t1 and raw run
                  twice each per round (mirrored order); then JSON runs R times
  --window N      JetStream publishes in flight at once, every path (default 32)
  --nats-cluster  then t1 and raw again on a private three-node cluster, streams at R3
                  (JSON keys r1_*, r3_*, r3_over_r1)
  -h, --help      this text

Routing: 48 layers × top-8 of 256 experts per token. Each path runs in a process of its own.
Starts a private nats-server on 127.0.0.1 unless T1_BENCH_NATS_URL is set.`

const TARGETS = { vsRaw: 0.8, vsJson: 5, bytesPerChoice: 1 }
/** Between runs: the previous run's stream deletion and acks settle on the server. */
const PAUSE_MS = 100

interface Options {
  readonly json: boolean
  readonly episodes: number
  readonly tokens: number
  readonly rounds: number
  readonly window: number
  readonly cluster: boolean
}

const FLAGS = {
  json: { type: "boolean" },
  "nats-cluster": { type: "boolean" },
  episodes: { type: "string" },
  tokens: { type: "string" },
  rounds: { type: "string" },
  window: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const

const parseOptions = (argv: ReadonlyArray<string>): Options | "help" => {
  let values: ReturnType<typeof parseArgs<{ options: typeof FLAGS }>>["values"]
  try {
    ;({ values } = parseArgs({ args: [...argv], strict: true, options: FLAGS }))
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e))
  }
  if (values.help === true) return "help"
  return {
    json: values.json === true,
    episodes: positiveInt("episodes", values.episodes, 48),
    tokens: positiveInt("tokens", values.tokens, 4096),
    rounds: positiveInt("rounds", values.rounds, 7),
    window: positiveInt("window", values.window, 32),
    cluster: values["nats-cluster"] === true,
  }
}

/** A forked path process: its warm-up done, it runs one measured run per call. */
interface PathProcess {
  readonly ready: Extract<FromWorker, { ready: true }>
  readonly run: (label: string) => Promise<Round>
  readonly stop: () => void
}

const startPath = (
  path: PathName,
  url: string,
  o: Options,
  replicas: number,
): Promise<PathProcess> => {
  const child: ChildProcess = fork(
    new URL("./stream/worker.ts", import.meta.url).pathname,
    [path, url, String(o.episodes), String(o.tokens), String(o.window), String(replicas)],
    { execArgv: process.execArgv, stdio: ["ignore", "inherit", "inherit", "ipc"] },
  )
  let waiting: { resolve: (m: FromWorker) => void; reject: (e: Error) => void } | undefined
  const next = () =>
    new Promise<FromWorker>((resolve, reject) => {
      waiting = { resolve, reject }
    })
  child.on("message", (m: FromWorker) => waiting?.resolve(m))
  child.on("exit", (code) => waiting?.reject(new Error(`${path} process exited (${code})`)))
  const expect = async <K extends "ready" | "round">(key: K) => {
    const m = await next()
    if ("failed" in m) throw new Error(`${path}: ${m.failed}`)
    if (!(key in m)) throw new Error(`${path}: unexpected message ${JSON.stringify(m)}`)
    return m as Extract<FromWorker, Record<K, unknown>>
  }
  const tell = (m: ToWorker) => child.send(m)
  return expect("ready").then((ready) => ({
    ready,
    run: async (label) => {
      const answer = expect("round")
      tell({ run: label })
      return (await answer).round
    },
    stop: () => {
      child.removeAllListeners("exit")
      if (child.connected) tell({ exit: true })
      setTimeout(() => child.kill(), 5_000).unref()
    },
  }))
}

const pause = () => new Promise((resolve) => setTimeout(resolve, PAUSE_MS))
const log = (line: string) => process.stderr.write(`${line}\n`)

/** The three paths on `url` at `replicas`; without JSON (`withJson` false) only t1 and raw. */
const measure = async (o: Options, url: string, replicas = 1, withJson = true) => {
  // Started together; each warms up on its own streams before it says it is ready.
  const started = await Promise.allSettled(
    (withJson ? (["t1", "raw", "json"] as const) : (["t1", "raw"] as const)).map((p) =>
      startPath(p, url, o, replicas),
    ),
  )
  const ok = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []))
  const failed = started.find((s) => s.status === "rejected")
  if (failed !== undefined) {
    for (const p of ok) p.stop()
    throw failed.reason
  }
  const [t1p, rawp, jsonp] = ok as [PathProcess, PathProcess, PathProcess | undefined]
  try {
    const t1: Round[] = []
    const raw: Round[] = []
    const json: Round[] = []
    for (let r = 0; r < o.rounds; r++) {
      // t1 and raw twice each, mirrored (ABBA, which path starts alternating by round): a
      // neighbour's burst lands on either path alike.
      const t1Run = async () => void t1.push(await t1p.run(`r${r}-${t1.length}`))
      const rawRun = async () => void raw.push(await rawp.run(`r${r}`))
      const order = r % 2 === 0 ? [t1Run, rawRun, rawRun, t1Run] : [rawRun, t1Run, t1Run, rawRun]
      for (const run of order) {
        await pause()
        await run()
      }
      log(
        `round ${r + 1}/${o.rounds}: t1 ${fmt(tokS(t1.at(-1) as Round), 0)} ${fmt(tokS(t1.at(-2) as Round), 0)} tok/s, raw ${fmt(tokS(raw.at(-1) as Round), 0)} ${fmt(tokS(raw.at(-2) as Round), 0)} tok/s`,
      )
    }
    for (let r = 0; jsonp !== undefined && r < o.rounds; r++) {
      await pause()
      json.push(await jsonp.run(`r${r}`))
      log(`json round ${r + 1}/${o.rounds}: ${fmt(tokS(json.at(-1) as Round), 0)} tok/s`)
    }
    return { t1, raw, json, ready: t1p.ready }
  } finally {
    for (const p of ok) p.stop()
  }
}

const tokS = (r: Round) => r.tokens / r.seconds
/**
 * A path's throughput over all its measured runs: their tokens (bytes) over their time. A run
 * either has a major collection in it or not (see the header), so single runs fall in two modes
 * and their median jumps with whichever mode has more of them (session 24: medians 1.22, 0.99,
 * 1.05 of raw where the totals gave 0.96, 0.92, 0.96); the totals count a path's collections as
 * often as they happen.
 */
const overall = (runs: ReadonlyArray<Round>) => {
  const seconds = runs.reduce((n, r) => n + r.seconds, 0)
  return {
    tokS: runs.reduce((n, r) => n + r.tokens, 0) / seconds,
    mbS: runs.reduce((n, r) => n + r.bytes, 0) / 1e6 / seconds,
  }
}
const fmt = (n: number, digits = 1) => n.toFixed(digits)

const main = async () => {
  let opts: Options | "help"
  try {
    opts = parseOptions(process.argv.slice(2))
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n${USAGE}\n`)
    process.exit(2)
  }
  if (opts === "help") {
    process.stdout.write(`${USAGE}\n`)
    return
  }
  const o = opts
  const result = await Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(benchNats, ({ url, external }) =>
        Effect.promise(async () => {
          log(
            `stream bench: ${o.episodes} trajectories × ${o.tokens} tokens per run, routing ${LAYERS} layers × top-${TOP_K} of ${EXPERTS} experts, nats ${external ? "external" : "private"} ${url}; starting the three path processes`,
          )
          return { ...(await measure(o, url)), external }
        }),
      ),
    ),
  )
  const clustered = o.cluster
    ? await Effect.runPromise(
        Effect.scoped(
          Effect.flatMap(benchCluster, (urls) =>
            Effect.promise(async () => {
              log(`stream bench: t1 and raw on a three-node cluster, streams at R3 (${urls})`)
              return measure(o, urls.join(","), 3, false)
            }),
          ),
        ),
      )
    : undefined
  const t1All = overall(result.t1)
  const rawAll = overall(result.raw)
  const jsonAll = overall(result.json)
  const t1 = t1All.tokS
  const raw = rawAll.tokS
  const json = jsonAll.tokS
  const perChoice = result.ready.routingBytes / result.ready.choices
  const figures = {
    t1_tok_s: Math.round(t1),
    raw_tok_s: Math.round(raw),
    json_tok_s: Math.round(json),
    t1_mb_s: Number(t1All.mbS.toFixed(1)),
    raw_mb_s: Number(rawAll.mbS.toFixed(1)),
    json_mb_s: Number(jsonAll.mbS.toFixed(1)),
    ratio_vs_raw: Number((t1 / raw).toFixed(3)),
    ratio_vs_json: Number((t1 / json).toFixed(2)),
    routing_bytes_per_choice: perChoice,
    episodes: o.episodes,
    tokens: o.tokens,
    rounds: o.rounds,
    window: o.window,
    layers: LAYERS,
    top_k: TOP_K,
    experts: EXPERTS,
    nats: result.external ? "external" : "private",
  }
  const lines = [
    "",
    `trajectory stream: ${o.episodes} × ${o.tokens} tokens in chunks of ≤ ${result.ready.maxTokens}, routing ${LAYERS} × top-${TOP_K} of ${EXPERTS}, ${o.rounds} rounds (t1 and raw: two runs each per round; each path in a process of its own), tokens over time of all measured runs (MB = 10^6 B)`,
    "",
    "  path                            tok/s      MB/s",
    `  t1 (sampler → NATS → buffer)  ${fmt(t1, 0).padStart(8)}  ${fmt(figures.t1_mb_s).padStart(8)}`,
    `  raw nats.js, same bytes       ${fmt(raw, 0).padStart(8)}  ${fmt(figures.raw_mb_s).padStart(8)}`,
    `  JSON + base64 int32 routing   ${fmt(json, 0).padStart(8)}  ${fmt(figures.json_mb_s).padStart(8)}`,
    "",
    `  t1 / raw    ${fmt(figures.ratio_vs_raw, 3)}  (target >= ${TARGETS.vsRaw})`,
    `  t1 / JSON   ${fmt(figures.ratio_vs_json, 2)}  (target >= ${TARGETS.vsJson})`,
    `  routing     ${perChoice} byte per (token, layer, k)  (target <= ${TARGETS.bytesPerChoice})`,
    "",
  ]
  let r3: Record<string, number> = {}
  if (clustered !== undefined) {
    const t1R3 = overall(clustered.t1)
    const rawR3 = overall(clustered.raw)
    r3 = {
      r1_t1_tok_s: figures.t1_tok_s,
      r1_raw_tok_s: figures.raw_tok_s,
      r3_t1_tok_s: Math.round(t1R3.tokS),
      r3_raw_tok_s: Math.round(rawR3.tokS),
      r3_t1_mb_s: Number(t1R3.mbS.toFixed(1)),
      r3_raw_mb_s: Number(rawR3.mbS.toFixed(1)),
      r3_over_r1: Number((t1R3.tokS / t1).toFixed(3)),
      r3_over_r1_raw: Number((rawR3.tokS / raw).toFixed(3)),
      r3_ratio_vs_raw: Number((t1R3.tokS / rawR3.tokS).toFixed(3)),
    }
    lines.push(
      "three-node cluster, every stream at R3 (the same runs; every connection given the three URLs):",
      "",
      "  path                            tok/s      MB/s   R3 / R1",
      `  t1 (sampler → NATS → buffer)  ${fmt(t1R3.tokS, 0).padStart(8)}  ${fmt(t1R3.mbS).padStart(8)}  ${fmt(r3.r3_over_r1 ?? 0, 3).padStart(8)}`,
      `  raw nats.js, same bytes       ${fmt(rawR3.tokS, 0).padStart(8)}  ${fmt(rawR3.mbS).padStart(8)}  ${fmt(r3.r3_over_r1_raw ?? 0, 3).padStart(8)}`,
      "",
      `  t1 / raw on R3   ${fmt(r3.r3_ratio_vs_raw ?? 0, 3)}`,
      "",
    )
  }
  process.stdout.write(`${lines.join("\n")}\n`)
  if (o.json) process.stdout.write(`${JSON.stringify({ ...figures, ...r3 })}\n`)
}

main().catch((e) => {
  process.stderr.write(`bench:stream failed: ${e instanceof Error ? e.message : String(e)}\n`)
  process.exit(1)
})
