import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Clock, Effect, Option, Result, Schedule } from "effect"
import {
  ReadyTrajectorySchema,
  type TrajectoryRecord,
  TrajectoryRecordSchema,
} from "../../proto/index.ts"
import {
  type BusError,
  type BusShape,
  JetStreamError,
  type KvBucket,
  type WorkItem,
} from "../../services/bus/index.ts"
import { spliceBytesFields } from "../../services/packed/index.ts"
import { type AssembledTrajectory, TrajectoryAssembler, TrajectoryCorrupt } from "./assemble.ts"
import type { BufferMetrics, DropReason } from "./metrics.ts"
import { type BufferNames, type Exclusion, exclusionOf, fitsInline, sha256Hex } from "./names.ts"

const INLINE_FIELD = ReadyTrajectorySchema.field.inline.number

/** A Map that forgets its oldest entries beyond `limit` (memory of settled attempts). */
export class BoundedMap<K, V> {
  private readonly map = new Map<K, V>()
  constructor(private readonly limit: number) {}
  get(key: K): V | undefined {
    return this.map.get(key)
  }
  set(key: K, value: V): void {
    this.map.delete(key)
    this.map.set(key, value)
    while (this.map.size > this.limit) {
      const oldest = this.map.keys().next()
      if (oldest.done === true) break
      this.map.delete(oldest.value)
    }
  }
}

/** The KV claim of an episode: which attempt trains, and whether its trajectory is stored yet. */
interface Claim {
  readonly attempt: number
  readonly stored: boolean
}

const encodeClaim = (c: Claim): Uint8Array => new TextEncoder().encode(JSON.stringify(c))

const decodeClaim = (bytes: Uint8Array): Claim | undefined => {
  try {
    const v: unknown = JSON.parse(new TextDecoder().decode(bytes))
    if (typeof v !== "object" || v === null) return undefined
    const attempt = "attempt" in v ? v.attempt : undefined
    const stored = "stored" in v ? v.stored : undefined
    if (typeof attempt !== "number" || typeof stored !== "boolean") return undefined
    return { attempt, stored }
  } catch {
    return undefined
  }
}

/** One episode attempt being assembled: its records' messages stay un-acked until it is stored. */
interface Attempt {
  readonly key: string
  readonly episodeId: string
  readonly attempt: number
  readonly assembler: TrajectoryAssembler
  /** By stream sequence; a redelivery replaces the handle (the newest one acks). */
  readonly items: Map<number, WorkItem>
  bytes: number
  lastSeenMs: number
  storing: boolean
}

type StoreOutcome =
  /** `fresh`: false when a crash came between storing and acking (stored before). */
  | { readonly _tag: "Stored"; readonly fresh: boolean }
  | { readonly _tag: "Superseded"; readonly winner: number }

export interface IngestOptions {
  readonly bus: BusShape
  readonly names: BufferNames
  readonly metrics: BufferMetrics
  readonly claims: KvBucket
  /** Incomplete attempts with no new record for this long are dropped ("expired"). */
  readonly expireAfterMs: number
  /** Settled attempts remembered so that late duplicates are acked at once. */
  readonly rememberAttempts?: number
}

/**
 * The ingest side of the buffer: records of the job's trajectory stream go into one
 * TrajectoryAssembler per episode attempt. A complete attempt is claimed (KV, first complete
 * attempt of an episode wins; excluded attempts, infra-failed or unverifiable, never claim, so a
 * retry can still win), then
 * stored on the READY stream (inline, or as a pointer to the object store when too large), and
 * only then are its records acked. A crash in between redelivers the records, which re-assemble
 * and re-store idempotently (same claim, same Nats-Msg-Id, the claim's `stored` mark).
 */
export const makeIngest = (options: IngestOptions) => {
  const { bus, names, metrics: m, claims } = options
  const job = names.jobId
  const attempts = new Map<string, Attempt>()
  /** Attempts settled by this process (stored or dropped): their late records are acked. */
  const settled = new BoundedMap<string, "stored" | "dropped">(options.rememberAttempts ?? 200_000)
  /** Episode → the attempt that trains, as far as this process knows. */
  const winners = new BoundedMap<string, number>(options.rememberAttempts ?? 200_000)
  let bytesHeld = 0

  const drop = (key: string, reason: DropReason) => {
    m.dropped.inc({ job, reason })
    settled.set(key, "dropped")
  }

  const forget = (a: Attempt) => {
    if (attempts.get(a.key) !== a) return
    attempts.delete(a.key)
    bytesHeld -= a.bytes
  }

  const settleAll = (a: Attempt, how: "ack" | "term" | "nak") =>
    Effect.forEach(
      [...a.items.values()],
      (item) =>
        Effect.ignore(how === "ack" ? item.ack : how === "term" ? item.term() : item.nak(1000)),
      { discard: true },
    )

  /** Claims the episode for this attempt; the outcome says whether it trains and is stored. */
  const claim = (
    episodeId: string,
    attempt: number,
  ): Effect.Effect<{ won: true; stored: boolean } | { won: false; winner: number }, BusError> =>
    Effect.gen(function* () {
      const key = names.claimKey(episodeId)
      for (let round = 0; round < 8; round++) {
        const existing = yield* claims.get(key)
        if (Option.isNone(existing)) {
          const created = yield* claims.create(key, encodeClaim({ attempt, stored: false })).pipe(
            Effect.as(true),
            Effect.catchTag("KvConflict", () => Effect.succeed(false)),
          )
          if (created) return { won: true, stored: false } as const
          continue
        }
        const c = decodeClaim(existing.value.value)
        if (c === undefined) {
          // Not ours to read: take the key over, under compare-and-set.
          const taken = yield* claims
            .update(key, encodeClaim({ attempt, stored: false }), existing.value.revision)
            .pipe(
              Effect.as(true),
              Effect.catchTag("KvConflict", () => Effect.succeed(false)),
            )
          if (taken) return { won: true, stored: false } as const
          continue
        }
        if (c.attempt === attempt) return { won: true, stored: c.stored } as const
        return { won: false, winner: c.attempt } as const
      }
      return yield* new JetStreamError({
        operation: `claim ${key}`,
        reason: "the key kept changing under compare-and-set",
      })
    })

  /** Publishes the trajectory on READY (or to the object store plus a pointer). */
  const publish = (
    t: AssembledTrajectory,
    excluded: Exclusion | undefined,
  ): Effect.Effect<boolean, BusError> =>
    Effect.gen(function* () {
      const episodeId = t.episodeId
      const msgId =
        excluded === undefined
          ? names.readyMsgId(episodeId)
          : names.excludedMsgId(episodeId, t.attempt, excluded)
      const encoded = t.encode()
      // The READY message: the end record, then the encoded trajectory as its inline body.
      const endOnly = toBinary(ReadyTrajectorySchema, create(ReadyTrajectorySchema, { end: t.end }))
      if (fitsInline(encoded.length, endOnly.length + encoded.length + 12, bus.maxPayload)) {
        const ready = spliceBytesFields(endOnly, [[INLINE_FIELD, encoded]])
        yield* bus.jsPublish(names.ready, ready, { msgId })
        return true
      }
      const name =
        excluded === undefined
          ? names.objectName(episodeId)
          : names.excludedObjectName(episodeId, t.attempt, excluded)
      const store = yield* bus.objectStore(names.objectBucket)
      yield* store.put(name, encoded)
      const pointer = create(ReadyTrajectorySchema, {
        end: t.end,
        body: {
          case: "object",
          value: {
            bucket: names.objectBucket,
            name,
            sha256: sha256Hex(encoded),
            sizeBytes: BigInt(encoded.length),
          },
        },
      })
      yield* bus.jsPublish(names.ready, toBinary(ReadyTrajectorySchema, pointer), { msgId })
      return false
    })

  const store = (t: AssembledTrajectory): Effect.Effect<StoreOutcome, BusError> =>
    Effect.gen(function* () {
      const excluded = exclusionOf(t.end)
      if (excluded !== undefined) {
        // Stored for the record, never claimed: the coordinator retries infra failures, and an
        // unverifiable attempt has no score to train on.
        const existing = yield* claims.get(names.claimKey(t.episodeId))
        const c = Option.isSome(existing) ? decodeClaim(existing.value.value) : undefined
        if (c !== undefined && c.attempt !== t.attempt)
          return { _tag: "Superseded", winner: c.attempt } as const
        yield* publish(t, excluded)
        return { _tag: "Stored", fresh: true } as const
      }
      const claimed = yield* claim(t.episodeId, t.attempt)
      if (!claimed.won) return { _tag: "Superseded", winner: claimed.winner } as const
      // A redelivery after a crash between publishing and acking: stored already.
      if (claimed.stored) return { _tag: "Stored", fresh: false } as const
      yield* publish(t, undefined)
      yield* claims.put(
        names.claimKey(t.episodeId),
        encodeClaim({ attempt: t.attempt, stored: true }),
      )
      return { _tag: "Stored", fresh: true } as const
    })

  /** Other attempts of an episode that now has a winner: their records are acked unused. */
  const dropLosers = (episodeId: string, winner: number) =>
    Effect.gen(function* () {
      for (const a of [...attempts.values()]) {
        if (a.episodeId !== episodeId || a.attempt === winner || a.storing) continue
        forget(a)
        drop(a.key, "duplicate_attempt")
        yield* settleAll(a, "ack")
      }
    })

  const complete = (a: Attempt, t: AssembledTrajectory) =>
    Effect.gen(function* () {
      a.storing = true
      const outcome = yield* Effect.result(
        store(t).pipe(
          Effect.retry({
            schedule: Schedule.exponential("200 millis").pipe(Schedule.jittered),
            times: 4,
          }),
        ),
      )
      forget(a)
      if (Result.isFailure(outcome)) {
        // Its records come back and re-assemble; storing is idempotent.
        yield* Effect.logWarning(
          `buffer ${job}: storing episode ${t.episodeId} (attempt ${t.attempt}) failed: ${outcome.failure.message}; its records will be redelivered`,
        )
        yield* settleAll(a, "nak")
        return
      }
      const o = outcome.success
      if (o._tag === "Superseded") {
        winners.set(t.episodeId, o.winner)
        drop(a.key, "duplicate_attempt")
        yield* settleAll(a, "ack")
        yield* dropLosers(t.episodeId, o.winner)
        return
      }
      settled.set(a.key, "stored")
      const excluded = exclusionOf(t.end)
      if (o.fresh) {
        m.trajectoriesIn.inc({ job })
        if (excluded === "infra") m.infraFailed.inc({ job })
        else if (excluded === "unverifiable") m.unverifiable.inc({ job })
        else m.reward.observe({ job }, t.end?.reward ?? 0)
      }
      if (excluded === undefined) winners.set(t.episodeId, t.attempt)
      yield* settleAll(a, "ack")
      if (excluded === undefined) yield* dropLosers(t.episodeId, t.attempt)
    }).pipe(
      // Interrupted (shutdown, a restarted consumer): its records are redelivered and re-stored.
      Effect.onInterrupt(() => Effect.sync(() => forget(a))),
    )

  const onRecord = (item: WorkItem, record: TrajectoryRecord, nowMs: number) =>
    Effect.gen(function* () {
      const r = record.record
      if (r.case === undefined) {
        m.dropped.inc({ job, reason: "malformed" })
        return yield* Effect.ignore(item.term("empty record"))
      }
      const { episodeId, attempt } = r.value
      const key = `${episodeId}:${attempt}`
      if (settled.get(key) !== undefined) return yield* Effect.ignore(item.ack)
      const winner = winners.get(episodeId)
      if (winner !== undefined && winner !== attempt) {
        drop(key, "duplicate_attempt")
        return yield* Effect.ignore(item.ack)
      }
      let a = attempts.get(key)
      if (a === undefined) {
        a = {
          key,
          episodeId,
          attempt,
          assembler: new TrajectoryAssembler(),
          items: new Map(),
          bytes: 0,
          lastSeenMs: nowMs,
          storing: false,
        }
        attempts.set(key, a)
      }
      a.items.set(item.streamSeq, item)
      a.lastSeenMs = nowMs
      // Records that arrive while the attempt is being stored are acked with it.
      if (a.storing) return
      const out = a.assembler.add(record, nowMs)
      bytesHeld += a.assembler.bytesHeld - a.bytes
      a.bytes = a.assembler.bytesHeld
      if (out === undefined) return
      if (out instanceof TrajectoryCorrupt) {
        forget(a)
        drop(key, "corrupt")
        yield* Effect.logWarning(`buffer ${job}: dropped ${out.message}`)
        return yield* settleAll(a, "term")
      }
      yield* complete(a, out)
    })

  return {
    /** Handles one message of the trajectory stream (sequentially, in delivery order). */
    onItem: (item: WorkItem): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        let record: TrajectoryRecord
        try {
          record = fromBinary(TrajectoryRecordSchema, item.data)
        } catch {
          m.dropped.inc({ job, reason: "malformed" })
          return Effect.ignore(item.term("malformed"))
        }
        return onRecord(item, record, now)
      }),
    /** Drops attempts that saw no record for expireAfterMs; their records are termed. */
    expire: (nowMs: number): Effect.Effect<number> =>
      Effect.gen(function* () {
        const cutoff = nowMs - options.expireAfterMs
        let n = 0
        for (const a of [...attempts.values()]) {
          if (a.storing || a.lastSeenMs >= cutoff) continue
          forget(a)
          drop(a.key, "expired")
          n++
          yield* Effect.logWarning(
            `buffer ${job}: episode ${a.episodeId} (attempt ${a.attempt}) incomplete for ${options.expireAfterMs} ms; dropped`,
          )
          yield* settleAll(a, "term")
        }
        return n
      }),
    /** Restarts the ack-wait clock of every record held. */
    heartbeat: Effect.suspend(() =>
      Effect.forEach(
        [...attempts.values()].flatMap((a) => [...a.items.values()]),
        (item) => Effect.ignore(item.working),
        { discard: true },
      ),
    ),
    bytesHeld: () => bytesHeld,
    pending: () => attempts.size,
  }
}

export type Ingest = ReturnType<typeof makeIngest>
