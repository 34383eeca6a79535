import { create } from "@bufbuild/protobuf"
import { Data } from "effect"
import {
  DType,
  type EpisodeEnd,
  type Trajectory,
  type TrajectoryChunk,
  type TrajectoryRecord,
  TrajectorySchema,
} from "../../proto/index.ts"
import { concatBytes } from "../../services/packed/index.ts"

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

  add(record: TrajectoryRecord, nowMs = Date.now()): Trajectory | TrajectoryCorrupt | undefined {
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

const assemble = (
  end: EpisodeEnd,
  chunks: ReadonlyMap<number, TrajectoryChunk>,
): Trajectory | TrajectoryCorrupt => {
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
      const width = c.routingDtype === DType.DTYPE_UINT16 ? 2 : 1
      if (rows * l * k * width !== c.routing.length)
        return fail(
          `chunk ${i}: routing shape [${c.routingShape.join(", ")}] does not match ${c.routing.length} bytes`,
        )
      if (layers !== 0 && (l !== layers || k !== topK || c.routingDtype !== dtype))
        return fail(`chunk ${i}: routing layout changed`)
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
  return create(TrajectorySchema, {
    jobId: end.jobId,
    episodeId: end.episodeId,
    attempt: end.attempt,
    tokenIds: concatBytes(ordered.map((c) => c.tokenIds)),
    logprobs: concatBytes(ordered.map((c) => c.logprobs)),
    lossMask: concatBytes(ordered.map((c) => c.lossMask)),
    routing: concatBytes(ordered.map((c) => c.routing)),
    routingDtype: dtype,
    routingShape: layers ? [routingRows, layers, topK] : [],
    turnStarts: ordered.flatMap((c) => c.turnStarts),
    policyVersionStart: versionStart ?? 0n,
    policyVersionEnd: versionEnd ?? 0n,
    end,
  })
}
