import { create, toBinary } from "@bufbuild/protobuf"
import { Data } from "effect"
import {
  DType,
  type EpisodeEnd,
  type Trajectory,
  type TrajectoryChunk,
  type TrajectoryRecord,
  TrajectorySchema,
} from "../../proto/index.ts"
import {
  concatBytes,
  firstExpertOutOfRange,
  type RoutingValues,
  routingShapeProblem,
  spliceBytesFields,
} from "../../services/packed/index.ts"

/** A chunk stream that cannot be a trajectory (gaps, overlaps, inconsistent arrays). */
export class TrajectoryCorrupt extends Data.TaggedError("TrajectoryCorrupt")<{
  readonly episodeId: string
  readonly attempt: number
  readonly reason: string
}> {
  override get message(): string {
    return `trajectory ${this.episodeId} attempt ${this.attempt}: ${this.reason}`
  }
}

/** The four per-token arrays of a trajectory, as the parts its chunks brought, in order. */
interface BulkParts {
  readonly tokenIds: ReadonlyArray<Uint8Array>
  readonly logprobs: ReadonlyArray<Uint8Array>
  readonly lossMask: ReadonlyArray<Uint8Array>
  readonly routing: ReadonlyArray<Uint8Array>
}

const BULK_FIELDS = {
  tokenIds: TrajectorySchema.field.tokenIds.number,
  logprobs: TrajectorySchema.field.logprobs.number,
  lossMask: TrajectorySchema.field.lossMask.number,
  routing: TrajectorySchema.field.routing.number,
} as const

/**
 * A checked, complete trajectory whose per-token arrays are still its chunks' bytes: nothing is
 * joined until it is encoded (one copy, into the message the buffer stores) or a caller asks for
 * the Trajectory message itself.
 */
export class AssembledTrajectory {
  constructor(
    /** Every field but the four per-token arrays, which are empty here. */
    readonly head: Trajectory,
    readonly parts: BulkParts,
    /** Token positions (end.total_tokens). */
    readonly tokens: number,
  ) {}

  get episodeId(): string {
    return this.head.episodeId
  }
  get attempt(): number {
    return this.head.attempt
  }
  get end(): EpisodeEnd | undefined {
    return this.head.end
  }

  /** The Trajectory message, its arrays joined. */
  toTrajectory(): Trajectory {
    return create(TrajectorySchema, {
      ...this.head,
      tokenIds: concatBytes(this.parts.tokenIds),
      logprobs: concatBytes(this.parts.logprobs),
      lossMask: concatBytes(this.parts.lossMask),
      routing: concatBytes(this.parts.routing),
    })
  }

  /** The encoded Trajectory message, each chunk's bytes copied once into it. */
  encode(): Uint8Array {
    return spliceBytesFields(toBinary(TrajectorySchema, this.head), [
      [BULK_FIELDS.tokenIds, this.parts.tokenIds],
      [BULK_FIELDS.logprobs, this.parts.logprobs],
      [BULK_FIELDS.lossMask, this.parts.lossMask],
      [BULK_FIELDS.routing, this.parts.routing],
    ])
  }
}

interface Partial {
  readonly chunks: Map<number, TrajectoryChunk>
  end: EpisodeEnd | undefined
  bytes: number
  readonly firstSeenMs: number
}

const keyOf = (episodeId: string, attempt: number) => `${episodeId}:${attempt}`

/**
 * Reassembles trajectories from chunk and end records arriving in any order, with duplicates
 * (a retried publish, a redelivered stream message) ignored. A trajectory is complete when its
 * end record and chunks 0..total_chunks−1 are present; it is then checked (the chunks tile the
 * sequence, every per-token array has the chunk's length, routing rows cover every position but
 * the final chunk's tail) and returned once.
 */
export class TrajectoryAssembler {
  private readonly partial = new Map<string, Partial>()

  /** Bytes held by incomplete trajectories. */
  get bytesHeld(): number {
    let n = 0
    for (const p of this.partial.values()) n += p.bytes
    return n
  }

  get pending(): number {
    return this.partial.size
  }

  /** Adds one record, seen at `nowMs` (the caller's Clock; partials expire by it). */
  add(
    record: TrajectoryRecord,
    nowMs: number,
  ): AssembledTrajectory | TrajectoryCorrupt | undefined {
    const r = record.record
    if (r.case === undefined) return undefined
    const v = r.value
    const key = keyOf(v.episodeId, v.attempt)
    let p = this.partial.get(key)
    if (!p) {
      p = { chunks: new Map(), end: undefined, bytes: 0, firstSeenMs: nowMs }
      this.partial.set(key, p)
    }
    if (r.case === "chunk") {
      if (!p.chunks.has(r.value.seq)) {
        p.chunks.set(r.value.seq, r.value)
        p.bytes +=
          r.value.tokenIds.length +
          r.value.logprobs.length +
          r.value.lossMask.length +
          r.value.routing.length
      }
    } else p.end ??= r.value
    if (!p.end || p.chunks.size < p.end.totalChunks) return undefined
    this.partial.delete(key)
    return assemble(p.end, p.chunks)
  }

  /** Drops incomplete trajectories first seen before `cutoffMs`; returns their keys. */
  expire(cutoffMs: number): string[] {
    const gone: string[] = []
    for (const [key, p] of this.partial) {
      if (p.firstSeenMs < cutoffMs) {
        this.partial.delete(key)
        gone.push(key)
      }
    }
    return gone
  }
}

/** The chunk's routing as expert indices (little-endian host, as every packed array here). */
const routingValues = (c: TrajectoryChunk): RoutingValues => {
  if (c.routingDtype !== DType.DTYPE_UINT16) return c.routing
  const b = c.routing.byteOffset % 2 === 0 ? c.routing : c.routing.slice()
  return new Uint16Array(b.buffer, b.byteOffset, b.length / 2)
}

const assemble = (
  end: EpisodeEnd,
  chunks: ReadonlyMap<number, TrajectoryChunk>,
): AssembledTrajectory | TrajectoryCorrupt => {
  const fail = (reason: string) =>
    new TrajectoryCorrupt({ episodeId: end.episodeId, attempt: end.attempt, reason })
  const ordered: TrajectoryChunk[] = []
  for (let seq = 0; seq < end.totalChunks; seq++) {
    const c = chunks.get(seq)
    if (!c) return fail(`chunk ${seq} missing`)
    ordered.push(c)
  }
  let position = 0
  let routingRows = 0
  let layers = 0
  let topK = 0
  let dtype: DType = DType.DTYPE_UNSPECIFIED
  let versionStart: bigint | undefined
  let versionEnd: bigint | undefined
  for (const [i, c] of ordered.entries()) {
    const n = c.tokenEnd - c.tokenStart
    if (c.tokenStart !== position)
      return fail(`chunk ${i} starts at ${c.tokenStart}, expected ${position}`)
    if (c.tokenIds.length !== 4 * n || c.logprobs.length !== 4 * n || c.lossMask.length !== n) {
      return fail(`chunk ${i}: arrays do not hold ${n} tokens`)
    }
    if (c.routing.length > 0) {
      const [rows = 0, l = 0, k = 0] = c.routingShape
      const shapeProblem = routingShapeProblem(
        c.routing.length,
        c.routingShape,
        c.routingDtype === DType.DTYPE_UINT16 ? 2 : 1,
      )
      if (shapeProblem !== undefined) return fail(`chunk ${i}: ${shapeProblem}`)
      if (layers !== 0 && (l !== layers || k !== topK || c.routingDtype !== dtype))
        return fail(`chunk ${i}: routing layout changed`)
      if (c.numExperts === 0) return fail(`chunk ${i}: routing without num_experts`)
      const experts = routingValues(c)
      const bad = firstExpertOutOfRange(experts, c.numExperts)
      if (bad >= 0) {
        const row = Math.floor(bad / (l * k))
        return fail(
          `chunk ${i}: expert ${experts[bad]} at [token ${c.tokenStart + row}, layer ${Math.floor((bad % (l * k)) / k)}, k ${bad % k}] is not below num_experts ${c.numExperts}`,
        )
      }
      if (routingRows !== c.tokenStart)
        return fail(`chunk ${i}: routing rows do not continue from position ${routingRows}`)
      if (rows < n && i !== ordered.length - 1)
        return fail(`chunk ${i}: ${rows} routing rows for ${n} tokens in a non-final chunk`)
      layers = l
      topK = k
      dtype = c.routingDtype
      routingRows += rows
    }
    versionStart =
      versionStart === undefined || c.policyVersionStart < versionStart
        ? c.policyVersionStart
        : versionStart
    versionEnd =
      versionEnd === undefined || c.policyVersionEnd > versionEnd ? c.policyVersionEnd : versionEnd
    position = c.tokenEnd
  }
  if (position !== end.totalTokens)
    return fail(`chunks cover ${position} tokens, the end record says ${end.totalTokens}`)
  return new AssembledTrajectory(
    create(TrajectorySchema, {
      jobId: end.jobId,
      episodeId: end.episodeId,
      attempt: end.attempt,
      routingDtype: dtype,
      routingShape: layers ? [routingRows, layers, topK] : [],
      turnStarts: ordered.flatMap((c) => c.turnStarts),
      policyVersionStart: versionStart ?? 0n,
      policyVersionEnd: versionEnd ?? 0n,
      end,
    }),
    {
      tokenIds: ordered.map((c) => c.tokenIds),
      logprobs: ordered.map((c) => c.logprobs),
      lossMask: ordered.map((c) => c.lossMask),
      routing: ordered.map((c) => c.routing),
    },
    position,
  )
}
