/**
 * One coordinator at a time per job: a lease in KV `<prefix>-coordinator`, key `<job>`, taken
 * and kept by compare-and-set. The value also holds the job's ledger, so every commit of
 * progress re-asserts the lease, and a coordinator that lost it can no longer write: its next
 * compare-and-set fails.
 */
import { Clock, Data, Effect, Option, Result, Schema, Semaphore } from "effect"
import type { BusError, KvBucket, Subjects } from "../../services/bus/index.ts"
import { type LedgerData, LedgerJson } from "./ledger.ts"

export const coordinatorBucket = (subjects: Subjects): string => `${subjects.prefix}-coordinator`

const LeaseDocJson = Schema.Struct({
  v: Schema.Literal(1),
  owner: Schema.String,
  /** The lease is free after this time (the owner's clock); 0: released. */
  expiresAtMs: Schema.Number,
  ledger: Schema.optionalKey(LedgerJson),
})
type LeaseDoc = typeof LeaseDocJson.Type

const decodeDoc = Schema.decodeUnknownResult(Schema.fromJsonString(LeaseDocJson))

const encodeDoc = (doc: LeaseDoc): Uint8Array => new TextEncoder().encode(JSON.stringify(doc))

export class LeaseLost extends Data.TaggedError("LeaseLost")<{
  readonly jobId: string
  readonly reason: string
}> {
  override get message(): string {
    return `lost the lease of job ${this.jobId}: ${this.reason}`
  }
}

export interface JobLease {
  readonly jobId: string
  /** The ledger as last committed (undefined: the job was never admitted). */
  readonly ledger: () => LedgerData | undefined
  /** Stores the ledger and extends the lease, under compare-and-set. */
  readonly commit: (ledger: LedgerData) => Effect.Effect<void, LeaseLost | BusError>
  /** Extends the lease (the ledger unchanged). */
  readonly heartbeat: Effect.Effect<void, LeaseLost | BusError>
  /** Gives the lease up, keeping the ledger, so that another coordinator may take over now. */
  readonly release: Effect.Effect<void>
  /** Deletes lease and ledger: only once the job's final state is stored in its status. */
  readonly remove: Effect.Effect<void>
}

/** Who holds the job's lease and until when (the owner's clock); undefined when nobody does. */
export const readLease = (
  kv: KvBucket,
  jobId: string,
): Effect.Effect<{ readonly owner: string; readonly expiresAtMs: number } | undefined, BusError> =>
  Effect.map(kv.get(jobId), (found) => {
    if (Option.isNone(found)) return undefined
    const decoded = decodeDoc(new TextDecoder().decode(found.value.value))
    return Result.isSuccess(decoded)
      ? { owner: decoded.success.owner, expiresAtMs: decoded.success.expiresAtMs }
      : undefined
  })

/**
 * Takes the job's lease when it is free: absent, released, expired, or held by this owner
 * before (a restart under the same instance id). None when another coordinator holds it.
 */
export const tryAcquireLease = (
  kv: KvBucket,
  jobId: string,
  owner: string,
  ttlMs: number,
): Effect.Effect<Option.Option<JobLease>, BusError> =>
  Effect.gen(function* () {
    // Expiry times are wall-clock, compared across processes; read through Clock so that a test
    // can move time (TestClock) instead of sleeping past a TTL.
    const now = yield* Clock.currentTimeMillis
    const found = yield* kv.get(jobId)
    let ledger: LedgerData | undefined
    let revision: number
    if (Option.isNone(found)) {
      const doc: LeaseDoc = { v: 1, owner, expiresAtMs: now + ttlMs }
      const created = yield* kv.create(jobId, encodeDoc(doc)).pipe(
        Effect.map(Option.some),
        Effect.catchTag("KvConflict", () => Effect.succeed(Option.none<number>())),
      )
      if (Option.isNone(created)) return Option.none()
      revision = created.value
    } else {
      const decoded = decodeDoc(new TextDecoder().decode(found.value.value))
      // An undecodable value is taken over; its ledger (if any) is lost, and the job restarts.
      const doc = Result.isSuccess(decoded) ? decoded.success : undefined
      if (doc !== undefined && doc.owner !== owner && doc.expiresAtMs > now) return Option.none()
      if (doc === undefined)
        yield* Effect.logWarning(`${kv.name}: job ${jobId}: undecodable lease value replaced`)
      ledger = doc?.ledger
      const next: LeaseDoc = {
        v: 1,
        owner,
        expiresAtMs: now + ttlMs,
        ...(ledger === undefined ? {} : { ledger }),
      }
      const taken = yield* kv.update(jobId, encodeDoc(next), found.value.revision).pipe(
        Effect.map(Option.some),
        Effect.catchTag("KvConflict", () => Effect.succeed(Option.none<number>())),
      )
      if (Option.isNone(taken)) return Option.none()
      revision = taken.value
    }
    const lock = yield* Semaphore.make(1)
    let released = false
    const write = (next: LedgerData | undefined, expiresAtMs: number) =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          if (released) return yield* new LeaseLost({ jobId, reason: "released" })
          const doc: LeaseDoc = {
            v: 1,
            owner,
            expiresAtMs,
            ...(next === undefined ? {} : { ledger: next }),
          }
          revision = yield* kv
            .update(jobId, encodeDoc(doc), revision)
            .pipe(
              Effect.catchTag("KvConflict", () =>
                Effect.fail(new LeaseLost({ jobId, reason: "another holder wrote the lease" })),
              ),
            )
          ledger = next
        }),
      )
    const lease: JobLease = {
      jobId,
      ledger: () => ledger,
      commit: (next) => Effect.flatMap(Clock.currentTimeMillis, (t) => write(next, t + ttlMs)),
      heartbeat: Effect.flatMap(Clock.currentTimeMillis, (t) => write(ledger, t + ttlMs)),
      release: Effect.suspend(() => write(ledger, 0)).pipe(
        Effect.andThen(
          Effect.sync(() => {
            released = true
          }),
        ),
        Effect.ignore,
      ),
      remove: lock
        .withPermits(1)(
          Effect.suspend(() => {
            released = true
            return kv.delete(jobId)
          }),
        )
        .pipe(Effect.ignore),
    }
    return Option.some(lease)
  })
