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
 *   npm run bench:stream -- [--json] [--episodes N] [--tokens N] [--rounds R] [--window N]
 *
 * Streams are in memory (work queues, acked), so the disk is not what is measured. Uses its own
 * nats-server on 127.0.0.1 unless T1_BENCH_NATS_URL is set. Reports; never asserts.
 */
import { performance } from "node:perf_hooks"
import { parseArgs } from "node:util"
import { create, fromBinary } from "@bufbuild/protobuf"
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream"
import { Effect, Stream } from "effect"
import { TrajectoryAssembler, TrajectoryCorrupt } from "../actors/buffer/index.ts"
import type { ChunkSpan } from "../actors/sampler/index.ts"
import {
  type ChunkIdentity,
  chunkMsgId,
  chunkRecord,
  encodeRecord,
  endMsgId,
  endRecord,
  maxChunkTokens,
  publishChunk,
  splitSpan,
} from "../actors/sampler/index.ts"
import { EpisodeEndSchema, TrajectoryRecordSchema } from "../proto/index.ts"
import {
  benchError,
  benchNats,
  busConnection,
  median,
  positiveInt,
  rawConnection,
  UsageError,
} from "./nats-bench.ts"

const USAGE = `usage: npm run bench:stream -- [--json] [--episodes N] [--tokens N] [--rounds R] [--window N]

  --json          also print one JSON object as the last line of output
  --episodes N    trajectories per round and path (default 48)
  --tokens N      tokens per trajectory (default 4096)
  --rounds R      measured rounds, after one warm-up round (default 7): t1 and raw run
                  twice each per round (mirrored order); then JSON runs R rounds
  --window N      JetStream publishes in flight at once, every path (default 32)
  -h, --help      this text

Routing: 48 layers × top-8 of 256 experts per token. Starts a private nats-server on 127.0.0.1
unless T1_BENCH_NATS_URL is set.`

const LAYERS = 48
const TOP_K = 8
const EXPERTS = 256
const VOCAB = 151_936
/**
 * Messages a consumer holds at once, every path: ~32 MB of ~1 MB messages. Past the server's
 * 64 MB per-connection pending limit a pull stalls until its 30 s expiry (seen with JSON at 128).
 */
const MAX_IN_FLIGHT = 32
const STALL_MS = 30_000
/**
 * Messages a publisher may be ahead of its consumer, every path: without a bound the slower
 * consumer (JSON) lets the stream grow until the server refuses and the client retries.
 */
const BACKLOG = 64
const TARGETS = { vsRaw: 0.8, vsJson: 5, bytesPerChoice: 1 }

interface Options {
  readonly json: boolean
  readonly episodes: number
  readonly tokens: number
  readonly rounds: number
  readonly window: number
}

const FLAGS = {
  json: { type: "boolean" },
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
  }
}

/** A seeded xorshift: the same trajectories every run. */
const filler = (seed: number) => {
  let s = seed >>> 0 || 1
  return () => {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    return (s >>> 0) / 4_294_967_296
  }
}

/** One sampled trajectory as the sampler holds it before publishing: a single span. */
const makeSpan = (tokens: number, seed: number): ChunkSpan => {
  const next = filler(seed)
  const ids = new Uint32Array(tokens)
  const logprobs = new Float32Array(tokens)
  const lossMask = new Uint8Array(tokens)
  const rows = new Uint8Array(tokens * LAYERS * TOP_K)
  for (let t = 0; t < tokens; t++) {
    ids[t] = Math.floor(next() * VOCAB)
    logprobs[t] = -next() * 4
    lossMask[t] = t % 300 < 200 ? 1 : 0
  }
  for (let i = 0; i < rows.length; i++) rows[i] = Math.floor(next() * EXPERTS)
  return {
    start: 0,
    end: tokens,
    ids,
    logprobs,
    lossMask,
    routing: { start: 0, rows, layers: LAYERS, topK: TOP_K, numExperts: EXPERTS },
    turnStarts: [0],
    versionStart: 0n,
    versionEnd: 0n,
  }
}

/** What a consumer has received in a round; publishers wait on it to bound what is in flight. */
class Progress {
  tokens = 0
  bytes = 0
  done = 0
  /** Messages received; publishers keep at most a window of them unconsumed. */
  messages = 0
  private waiters: Array<{ upTo: number; resolve: () => void }> = []
  private markReady: () => void = () => {}
  /**
   * Resolves when the consumer has received the round's one-byte READY message: every path
   * starts its clock with its consumer demonstrably receiving, not while it is still being set
   * up (t1's consumer is set up by the fiber that runs it, the others' before the round).
   */
  readonly ready = new Promise<void>((resolve) => {
    this.markReady = resolve
  })
  /** A message of the round, or the READY message (not counted). */
  isReady(data: Uint8Array): boolean {
    if (data.byteLength !== READY.byteLength) return false
    this.markReady()
    return true
  }
  received(bytes: number) {
    this.bytes += bytes
    this.messages++
    this.lastAt = performance.now()
    if (this.waiters.length === 0) return
    const ready = this.waiters.filter((w) => w.upTo <= this.messages)
    this.waiters = this.waiters.filter((w) => w.upTo > this.messages)
    for (const w of ready) w.resolve()
  }
  /** Resolves once at least `upTo` messages have been received. */
  reached(upTo: number): Promise<void> {
    if (upTo <= this.messages) return Promise.resolve()
    return new Promise((resolve) => this.waiters.push({ upTo, resolve }))
  }
  lastAt = performance.now()
  failure: Error | undefined
  reset() {
    this.tokens = 0
    this.bytes = 0
    this.done = 0
    this.messages = 0
    this.waiters = []
    this.lastAt = performance.now()
    this.failure = undefined
  }
  until(episodes: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setInterval(() => {
        if (this.failure !== undefined) {
          clearInterval(timer)
          reject(this.failure)
        } else if (this.done >= episodes) {
          clearInterval(timer)
          resolve()
        } else if (performance.now() - this.lastAt > STALL_MS) {
          clearInterval(timer)
          reject(new Error(`consumer stalled at ${this.done}/${episodes} trajectories`))
        }
      }, 2)
    })
  }
}

/** The one-byte message a round's consumer receives before the clock starts (see Progress). */
const READY = Uint8Array.of(0)

interface Round {
  readonly seconds: number
  readonly tokens: number
  readonly bytes: number
}

/** A full collection (node --expose-gc, as `npm run bench:stream` runs it); absent otherwise. */
const collectGarbage: (() => void) | undefined =
  typeof globalThis.gc === "function" ? globalThis.gc : undefined

const jsonEncoder = new TextEncoder()
const jsonDecoder = new TextDecoder()

/** An engine-style JSON chunk: arrays as JSON numbers, routing as base64 of int32. */
const jsonChunk = (episode: string, seq: number, piece: ChunkSpan, total: number): Uint8Array => {
  const r = piece.routing
  const routing = r === undefined ? new Int32Array(0) : Int32Array.from(r.rows)
  return jsonEncoder.encode(
    JSON.stringify({
      episode_id: episode,
      seq,
      total_chunks: total,
      token_start: piece.start,
      token_end: piece.end,
      output_ids: Array.from(piece.ids),
      output_token_logprobs: Array.from(piece.logprobs),
      loss_mask: Array.from(piece.lossMask),
      routed_experts: Buffer.from(routing.buffer, routing.byteOffset, routing.byteLength).toString(
        "base64",
      ),
      routed_experts_shape: [piece.end - piece.start, LAYERS, TOP_K],
    }),
  )
}

interface JsonChunk {
  readonly episode_id: string
  readonly seq: number
  readonly total_chunks: number
  readonly token_start: number
  readonly token_end: number
  readonly output_ids: ReadonlyArray<number>
  readonly output_token_logprobs: ReadonlyArray<number>
  readonly loss_mask: ReadonlyArray<number>
  readonly routed_experts: string
}

const bench = (opts: Options) =>
  Effect.gen(function* () {
    const { url, external } = yield* benchNats
    const rawPub = yield* rawConnection(url, "bench-stream-raw-pub")
    const rawSub = yield* rawConnection(url, "bench-stream-raw-sub")
    const pub = yield* busConnection(url, "bench-stream-sampler")
    const sub = yield* busConnection(url, "bench-stream-buffer")
    const jsm = yield* Effect.tryPromise({
      try: () => jetstreamManager(rawPub),
      catch: benchError("jsm"),
    })
    const js = jetstream(rawPub)
    const jsSub = jetstream(rawSub)

    const spans = Array.from({ length: opts.episodes }, (_, i) => makeSpan(opts.tokens, i + 1))
    const routingBytesPerToken = LAYERS * TOP_K
    const maxTokens = maxChunkTokens(pub.maxPayload, routingBytesPerToken)
    /**
     * Every record of every trajectory as the sampler publishes them — chunks, then the end —
     * each encoded only when `encode` is called, so a round pays for its own encoding.
     */
    const sampledRecords = (label: string) =>
      spans.flatMap((span, e) => {
        const who: ChunkIdentity = { jobId: "bench", episodeId: `${label}-${e}`, attempt: 0 }
        const pieces = splitSpan(span, maxTokens)
        const end = create(EpisodeEndSchema, {
          jobId: who.jobId,
          episodeId: who.episodeId,
          attempt: 0,
          totalChunks: pieces.length,
          totalTokens: span.end,
        })
        return [
          ...pieces.map((piece, seq) => ({
            encode: () => encodeRecord(chunkRecord(who, seq, piece, Date.now())),
            msgId: chunkMsgId(who, seq),
            publish: (subject: string) =>
              publishChunk(who, seq, piece, pub.maxPayload, (bytes, msgId) =>
                pub.jsPublish(subject, bytes, { msgId }),
              ),
          })),
          {
            encode: () => encodeRecord(endRecord(end)),
            msgId: endMsgId(who),
            publish: (subject: string) =>
              pub.jsPublish(subject, encodeRecord(endRecord(end)), { msgId: endMsgId(who) }),
          },
        ]
      })
    let streamN = 0
    const freshStream = (path: string) =>
      Effect.tryPromise({
        try: async () => {
          const name = `BENCH_STREAM_${path.toUpperCase()}_${streamN++}`
          const subject = `bench.stream.${path}.${streamN}`
          await jsm.streams.add({
            name,
            subjects: [subject],
            retention: RetentionPolicy.Workqueue,
            storage: StorageType.Memory,
            duplicate_window: 120_000_000_000,
          })
          await jsm.consumers.add(name, {
            durable_name: "buffer",
            ack_policy: AckPolicy.Explicit,
            deliver_policy: DeliverPolicy.All,
            max_ack_pending: 4096,
          })
          return { name, subject }
        },
        catch: benchError(`stream ${path}`),
      })
    const dropStream = (name: string) => Effect.promise(() => jsm.streams.delete(name))
    const wait = (progress: Progress, episodes: number, what: string) =>
      Effect.tryPromise({ try: () => progress.until(episodes), catch: benchError(what) })

    /** t1: the sampler's encoding and publish, the buffer's consume, decode and assembly. */
    const t1Round = (label: string) =>
      Effect.scoped(
        Effect.gen(function* () {
          const { name, subject } = yield* freshStream("t1")
          const progress = new Progress()
          const assembler = new TrajectoryAssembler()
          yield* Effect.forkScoped(
            Stream.runForEach(sub.consume(name, "buffer", { maxInFlight: MAX_IN_FLIGHT }), (item) =>
              Effect.andThen(
                Effect.sync(() => {
                  if (progress.isReady(item.data)) return
                  const record = fromBinary(TrajectoryRecordSchema, item.data)
                  progress.received(item.data.byteLength)
                  const done = assembler.add(record, Date.now())
                  if (done instanceof TrajectoryCorrupt) progress.failure = new Error(done.message)
                  else if (done !== undefined) {
                    progress.tokens += done.tokens
                    progress.done++
                  }
                }),
                item.ack,
              ),
            ).pipe(
              Effect.catch((e) => Effect.sync(() => (progress.failure = new Error(String(e))))),
            ),
          )
          yield* pub.jsPublish(subject, READY).pipe(Effect.mapError(benchError("t1 ready")))
          yield* Effect.promise(() => progress.ready)
          const started = performance.now()
          // Every record of every trajectory, encoded when its turn to publish comes, with the
          // same number in flight as the other paths (the assembler takes them in any order).
          const sends = sampledRecords(label)
          yield* Effect.forEach(
            sends,
            (send, i) =>
              Effect.andThen(
                Effect.promise(() => progress.reached(i - BACKLOG)),
                send.publish(subject),
              ),
            {
              concurrency: opts.window,
              discard: true,
            },
          ).pipe(Effect.mapError(benchError("t1 publish")))
          yield* wait(progress, opts.episodes, "t1 consume")
          const round: Round = {
            seconds: (progress.lastAt - started) / 1000,
            tokens: progress.tokens,
            bytes: progress.bytes,
          }
          yield* dropStream(name)
          return round
        }),
      )

    // The raw path sends exactly t1's bytes, encoded once before any round.
    const flat = sampledRecords("raw").map((r) => r.encode())
    const routingBytes = spans.reduce((n, s) => n + (s.routing?.rows.byteLength ?? 0), 0)
    const choices = opts.episodes * opts.tokens * LAYERS * TOP_K

    /**
     * Publishes `count` messages through plain nats.js, `window` in flight and at most BACKLOG
     * ahead of the consumer; `make(i)` builds message i when its turn comes.
     */
    const rawPublish = async (
      subject: string,
      count: number,
      make: (i: number) => Uint8Array,
      progress: Progress,
      msgId?: (i: number) => string,
    ) => {
      let next = 0
      const worker = async () => {
        for (;;) {
          const i = next++
          if (i >= count) return
          await progress.reached(i - BACKLOG)
          const data = make(i)
          await js.publish(subject, data, msgId === undefined ? {} : { msgID: msgId(i) })
        }
      }
      await Promise.all(Array.from({ length: opts.window }, worker))
    }
    /** Waits for the round's last trajectory, then drops its consumer and stream. */
    const finish = async (
      progress: Progress,
      started: number,
      consuming: { close: () => Promise<unknown> },
      stream: string,
    ): Promise<Round> => {
      await progress.until(opts.episodes)
      await consuming.close()
      await jsm.streams.delete(stream)
      return {
        seconds: (progress.lastAt - started) / 1000,
        tokens: progress.tokens,
        bytes: progress.bytes,
      }
    }
    const rawConsume = async (
      stream: string,
      progress: Progress,
      onMessage: (data: Uint8Array) => void,
    ) => {
      const consumer = await jsSub.consumers.get(stream, "buffer")
      return consumer.consume({
        max_messages: MAX_IN_FLIGHT,
        callback: (m) => {
          if (progress.isReady(m.data)) {
            m.ack()
            return
          }
          try {
            onMessage(m.data)
          } catch (e) {
            progress.failure = e instanceof Error ? e : new Error(String(e))
          }
          progress.received(m.data.byteLength)
          m.ack()
        },
      })
    }

    const rawRound = () =>
      Effect.tryPromise({
        try: async (): Promise<Round> => {
          const { name, subject } = await Effect.runPromise(freshStream("raw"))
          const progress = new Progress()
          // Every trajectory is the same number of messages; one is whole when its last arrives.
          const perEpisode = flat.length / opts.episodes
          let seen = 0
          const messages = await rawConsume(name, progress, () => {
            seen++
            if (seen % perEpisode === 0) {
              progress.done = seen / perEpisode
              progress.tokens = progress.done * opts.tokens
            }
          })
          await js.publish(subject, READY)
          await progress.ready
          const started = performance.now()
          await rawPublish(
            subject,
            flat.length,
            (i) => flat[i] as Uint8Array,
            progress,
            (i) => `${subject}-${i}`,
          )
          return finish(progress, started, messages, name)
        },
        catch: benchError("raw round"),
      })

    const jsonRound = (label: string) =>
      Effect.tryPromise({
        try: async (): Promise<Round> => {
          const { name, subject } = await Effect.runPromise(freshStream("json"))
          const progress = new Progress()
          // Reassembly: each episode's routing as the engine's int32, in token order.
          const partial = new Map<string, { got: number; routing: Int32Array[] }>()
          const messages = await rawConsume(name, progress, (data) => {
            const c = JSON.parse(jsonDecoder.decode(data)) as JsonChunk
            const b = Buffer.from(c.routed_experts, "base64")
            const routing = new Int32Array(b.buffer, b.byteOffset, b.byteLength / 4)
            const ids = Uint32Array.from(c.output_ids)
            const lps = Float32Array.from(c.output_token_logprobs)
            const mask = Uint8Array.from(c.loss_mask)
            const n = c.token_end - c.token_start
            if (ids.length !== n || lps.length !== n || mask.length !== n)
              throw new Error(`json chunk ${c.episode_id}/${c.seq}: arrays do not hold ${n} tokens`)
            if (routing.length !== n * LAYERS * TOP_K)
              throw new Error(`json chunk ${c.episode_id}/${c.seq}: routing of ${routing.length}`)
            const p = partial.get(c.episode_id) ?? { got: 0, routing: [] }
            p.routing[c.seq] = Int32Array.from(routing)
            p.got++
            partial.set(c.episode_id, p)
            if (p.got === c.total_chunks) {
              partial.delete(c.episode_id)
              progress.tokens += p.routing.reduce((s, r) => s + r.length, 0) / (LAYERS * TOP_K)
              progress.done++
            }
          })
          // A JSON chunk is ~5× a binary one per token; split to stay under max_payload.
          const sends = spans.flatMap((span, e) => {
            const pieces = splitSpan(span, Math.max(1, Math.floor(maxTokens / 6)))
            return pieces.map(
              (piece, seq) => () => jsonChunk(`${label}-${e}`, seq, piece, pieces.length),
            )
          })
          await js.publish(subject, READY)
          await progress.ready
          const started = performance.now()
          await rawPublish(subject, sends.length, (i) => (sends[i] as () => Uint8Array)(), progress)
          return finish(progress, started, messages, name)
        },
        catch: benchError("json round"),
      })

    /**
     * Before each round: the previous round's garbage (hundreds of MB of message buffers, most
     * of all after JSON) is collected now rather than during the next round, which would charge
     * one path for another's allocations.
     */
    const settle = Effect.andThen(
      Effect.sync(() => collectGarbage?.()),
      Effect.sleep("100 millis"),
    )
    const log = (line: string) => Effect.sync(() => process.stderr.write(`${line}\n`))
    yield* log(
      `stream bench: ${opts.episodes} trajectories × ${opts.tokens} tokens per round, routing ${LAYERS} layers × top-${TOP_K} of ${EXPERTS} experts, ${Math.ceil(opts.tokens / maxTokens)} chunks each (≤ ${maxTokens} tokens), nats ${external ? "external" : "private"} ${url}`,
    )
    // t1 and raw first, JSON after them: a JSON round leaves hundreds of MB of garbage and a
    // grown heap behind, and interleaved with it t1 measured 0.73-0.76 of raw where it measures
    // 0.85-0.90 on its own (same machine, same hour) — the cost was JSON's, not t1's.
    yield* rawRound()
    yield* t1Round("warm")
    const t1: Round[] = []
    const raw: Round[] = []
    const json: Round[] = []
    for (let r = 0; r < opts.rounds; r++) {
      // t1 and raw twice each, mirrored (ABBA, which path starts alternating by round). A run
      // lasts well under a second, so one that a neighbour's burst or the collector hits swings
      // by up to 2× (measured); mirrored pairs give each path every position equally often.
      const t1Run = () => Effect.map(t1Round(`r${r}`), (x) => void t1.push(x))
      const rawRun = () => Effect.map(rawRound(), (x) => void raw.push(x))
      const order = r % 2 === 0 ? [t1Run, rawRun, rawRun, t1Run] : [rawRun, t1Run, t1Run, rawRun]
      for (const run of order) {
        yield* settle
        yield* run()
      }
      yield* log(
        `round ${r + 1}/${opts.rounds}: t1 ${fmt(tokS(t1.at(-1) as Round), 0)} ${fmt(tokS(t1.at(-2) as Round), 0)} tok/s, raw ${fmt(tokS(raw.at(-1) as Round), 0)} ${fmt(tokS(raw.at(-2) as Round), 0)} tok/s`,
      )
    }
    yield* settle
    yield* jsonRound("warm")
    for (let r = 0; r < opts.rounds; r++) {
      yield* settle
      json.push(yield* jsonRound(`r${r}`))
      yield* log(`json round ${r + 1}/${opts.rounds}: ${fmt(tokS(json.at(-1) as Round), 0)} tok/s`)
    }
    return {
      t1,
      raw,
      json,
      routingBytes,
      choices,
      external,
    }
  })

const tokS = (r: Round) => r.tokens / r.seconds
const mbS = (r: Round) => r.bytes / 1e6 / r.seconds
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
  const result = await Effect.runPromise(Effect.scoped(bench(o)))
  const t1 = median(result.t1.map(tokS))
  const raw = median(result.raw.map(tokS))
  const json = median(result.json.map(tokS))
  const perChoice = result.routingBytes / result.choices
  const figures = {
    t1_tok_s: Math.round(t1),
    raw_tok_s: Math.round(raw),
    json_tok_s: Math.round(json),
    t1_mb_s: Number(median(result.t1.map(mbS)).toFixed(1)),
    raw_mb_s: Number(median(result.raw.map(mbS)).toFixed(1)),
    json_mb_s: Number(median(result.json.map(mbS)).toFixed(1)),
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
    `trajectory stream: ${o.episodes} × ${o.tokens} tokens, routing ${LAYERS} × top-${TOP_K} of ${EXPERTS}, median of ${o.rounds} rounds (t1 and raw: two runs each per round) (MB = 10^6 B)`,
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
  process.stdout.write(`${lines.join("\n")}\n`)
  if (o.json) process.stdout.write(`${JSON.stringify(figures)}\n`)
}

main().catch((e) => {
  process.stderr.write(`bench:stream failed: ${e instanceof Error ? e.message : String(e)}\n`)
  process.exit(1)
})
