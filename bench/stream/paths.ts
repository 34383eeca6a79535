/**
 * The paths bench:stream measures, each run inside one process (its publisher and consumer on
 * connections of their own): t1 (the sampler's encode and publish, the buffer's consume, decode
 * and assembly), raw (the same bytes through plain nats.js, nothing decoded) and json (the same
 * trajectories as an engine's JSON carries them). See bench/stream.ts for how runs are scheduled.
 */
import { performance } from "node:perf_hooks"
import { create, fromBinary } from "@bufbuild/protobuf"
import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamClient,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream"
import { Effect, type Scope, Stream } from "effect"
import { TrajectoryAssembler, TrajectoryCorrupt } from "../../actors/buffer/index.ts"
import type { ChunkSpan } from "../../actors/sampler/index.ts"
import {
  type ChunkIdentity,
  chunkRecord,
  encodeRecord,
  endMsgId,
  endRecord,
  maxChunkTokens,
  publishChunk,
  splitSpan,
} from "../../actors/sampler/index.ts"
import { EpisodeEndSchema, TrajectoryRecordSchema } from "../../proto/index.ts"
import type { BusShape } from "../../services/bus/index.ts"
import { type BenchError, benchError, busConnection, rawConnection } from "../nats-bench.ts"

export const LAYERS = 48
export const TOP_K = 8
export const EXPERTS = 256
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

export interface Round {
  readonly seconds: number
  readonly tokens: number
  readonly bytes: number
}

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
/** What shapes a run: the same for every path. */
export interface PathOptions {
  readonly episodes: number
  readonly tokens: number
  readonly window: number
  /** Copies of each stream (3 on the --nats-cluster run). */
  readonly replicas: number
}

export type PathName = "t1" | "raw" | "json"

/**
 * One path over `url`, each run a fresh stream and consumer; its connections (only the ones
 * this path uses) and the trajectories (the same seeds in every process) live as long as the
 * scope.
 */
export const streamPath = (path: PathName, opts: PathOptions, url: string) =>
  Effect.gen(function* () {
    // Streams are made and dropped here, and the raw and JSON paths publish on it.
    const rawPub = yield* rawConnection(url, `bench-stream-${path}-pub`)
    const jsm = yield* Effect.tryPromise({
      try: () => jetstreamManager(rawPub),
      catch: benchError("jsm"),
    })
    const js = jetstream(rawPub)

    const spans = Array.from({ length: opts.episodes }, (_, i) => makeSpan(opts.tokens, i + 1))
    const routingBytesPerToken = LAYERS * TOP_K
    const maxTokens = maxChunkTokens(rawPub.info?.max_payload ?? 1024 * 1024, routingBytesPerToken)
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
            publish: (pub: BusShape, subject: string) =>
              publishChunk(who, seq, piece, pub.maxPayload, (bytes, msgId) =>
                pub.jsPublish(subject, bytes, { msgId }),
              ),
          })),
          {
            encode: () => encodeRecord(endRecord(end)),
            publish: (pub: BusShape, subject: string) =>
              pub.jsPublish(subject, encodeRecord(endRecord(end)), { msgId: endMsgId(who) }),
          },
        ]
      })
    let streamN = 0
    const freshStream = () =>
      Effect.tryPromise({
        try: async () => {
          const name = `BENCH_STREAM_${path.toUpperCase()}_${streamN++}`
          const subject = `bench.stream.${path}.${streamN}`
          await jsm.streams.add({
            name,
            subjects: [subject],
            retention: RetentionPolicy.Workqueue,
            storage: StorageType.Memory,
            num_replicas: opts.replicas,
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
    const t1Path = Effect.gen(function* () {
      const pub = yield* busConnection(url, "bench-stream-sampler")
      const sub = yield* busConnection(url, "bench-stream-buffer")
      return (label: string) =>
        Effect.scoped(
          Effect.gen(function* () {
            const { name, subject } = yield* freshStream()
            const progress = new Progress()
            const assembler = new TrajectoryAssembler()
            yield* Effect.forkScoped(
              Stream.runForEach(
                sub.consume(name, "buffer", { maxInFlight: MAX_IN_FLIGHT }),
                (item) =>
                  Effect.andThen(
                    Effect.sync(() => {
                      if (progress.isReady(item.data)) return
                      const record = fromBinary(TrajectoryRecordSchema, item.data)
                      progress.received(item.data.byteLength)
                      const done = assembler.add(record, Date.now())
                      if (done instanceof TrajectoryCorrupt)
                        progress.failure = new Error(done.message)
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
                  send.publish(pub, subject),
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
    })

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
    /**
     * The raw and JSON paths' timed part: once their consumer has the READY message, publishes
     * the round (see rawPublish), waits for its last trajectory, then drops consumer and stream.
     */
    const timedRound = async (
      stream: { readonly name: string; readonly subject: string },
      progress: Progress,
      consuming: { close: () => Promise<unknown> },
      count: number,
      make: (i: number) => Uint8Array,
      msgId?: (i: number) => string,
    ): Promise<Round> => {
      await js.publish(stream.subject, READY)
      await progress.ready
      const started = performance.now()
      await rawPublish(stream.subject, count, make, progress, msgId)
      await progress.until(opts.episodes)
      await consuming.close()
      await jsm.streams.delete(stream.name)
      return {
        seconds: (progress.lastAt - started) / 1000,
        tokens: progress.tokens,
        bytes: progress.bytes,
      }
    }
    /** The raw and JSON paths' consumer side, on a connection of its own. */
    const rawSubscriber = Effect.map(rawConnection(url, `bench-stream-${path}-sub`), jetstream)
    const rawConsume = async (
      jsSub: JetStreamClient,
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

    const rawPath = Effect.gen(function* () {
      const jsSub = yield* rawSubscriber
      // Exactly t1's bytes, encoded once before any run.
      const flat = sampledRecords("raw").map((r) => r.encode())
      return () =>
        Effect.tryPromise({
          try: async (): Promise<Round> => {
            const stream = await Effect.runPromise(freshStream())
            const progress = new Progress()
            // Every trajectory is the same number of messages; one is whole when its last arrives.
            const perEpisode = flat.length / opts.episodes
            let seen = 0
            const messages = await rawConsume(jsSub, stream.name, progress, () => {
              seen++
              if (seen % perEpisode === 0) {
                progress.done = seen / perEpisode
                progress.tokens = progress.done * opts.tokens
              }
            })
            return timedRound(
              stream,
              progress,
              messages,
              flat.length,
              (i) => flat[i] as Uint8Array,
              (i) => `${stream.subject}-${i}`,
            )
          },
          catch: benchError("raw round"),
        })
    })

    const jsonPath = Effect.map(
      rawSubscriber,
      (jsSub) => (label: string) =>
        Effect.tryPromise({
          try: async (): Promise<Round> => {
            const stream = await Effect.runPromise(freshStream())
            const progress = new Progress()
            // Reassembly: each episode's routing as the engine's int32, in token order.
            const partial = new Map<string, { got: number; routing: Int32Array[] }>()
            const messages = await rawConsume(jsSub, stream.name, progress, (data) => {
              const c = JSON.parse(jsonDecoder.decode(data)) as JsonChunk
              const b = Buffer.from(c.routed_experts, "base64")
              const routing = new Int32Array(b.buffer, b.byteOffset, b.byteLength / 4)
              const ids = Uint32Array.from(c.output_ids)
              const lps = Float32Array.from(c.output_token_logprobs)
              const mask = Uint8Array.from(c.loss_mask)
              const n = c.token_end - c.token_start
              if (ids.length !== n || lps.length !== n || mask.length !== n)
                throw new Error(
                  `json chunk ${c.episode_id}/${c.seq}: arrays do not hold ${n} tokens`,
                )
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
            return timedRound(stream, progress, messages, sends.length, (i) =>
              (sends[i] as () => Uint8Array)(),
            )
          },
          catch: benchError("json round"),
        }),
    )

    const paths: Record<
      PathName,
      Effect.Effect<(label: string) => Effect.Effect<Round, BenchError>, BenchError, Scope.Scope>
    > = { t1: t1Path, raw: rawPath, json: jsonPath }
    const run = yield* paths[path]
    return { run, routingBytes, choices, maxTokens }
  })
