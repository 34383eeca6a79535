import { create, toBinary } from "@bufbuild/protobuf"
import { Clock, Effect } from "effect"
import {
  DType,
  type EpisodeEnd,
  type TrajectoryChunk,
  TrajectoryChunkSchema,
  type TrajectoryRecord,
  TrajectoryRecordSchema,
} from "../../proto/index.ts"
import { BufferPool, spliceBytesFields } from "../../services/packed/index.ts"
import type { ChunkSpan } from "./tito.ts"

const bytesOf = (a: Uint32Array | Float32Array | Uint8Array | Uint16Array): Uint8Array =>
  new Uint8Array(a.buffer, a.byteOffset, a.byteLength)

/** Room left for the envelope (ids, job, turn starts, headers) in a message. */
const ENVELOPE_BYTES = 8192

/** Most tokens per chunk so that a chunk message stays under the bus's max payload. */
export const maxChunkTokens = (maxPayload: number, routingBytesPerToken: number): number =>
  Math.max(1, Math.floor((maxPayload - ENVELOPE_BYTES) / (4 + 4 + 1 + routingBytesPerToken + 4)))

/** Splits a span so that each piece fits a message (routing rows split at the same positions). */
export const splitSpan = (span: ChunkSpan, maxTokens: number): ChunkSpan[] => {
  if (span.end - span.start <= maxTokens) return [span]
  const pieces: ChunkSpan[] = []
  for (let from = span.start; from < span.end; from += maxTokens) {
    const to = Math.min(span.end, from + maxTokens)
    const a = from - span.start
    const b = to - span.start
    const r = span.routing
    const width = r ? r.layers * r.topK : 0
    const routedEnd = r ? r.start + r.rows.length / width : 0
    const routing =
      r && routedEnd > from
        ? {
            ...r,
            start: from,
            rows: r.rows.subarray(a * width, (Math.min(to, routedEnd) - span.start) * width),
          }
        : undefined
    pieces.push({
      ...span,
      start: from,
      end: to,
      ids: span.ids.subarray(a, b),
      logprobs: span.logprobs.subarray(a, b),
      lossMask: span.lossMask.subarray(a, b),
      routing,
      turnStarts: span.turnStarts.filter((t) => t >= from && t < to),
    })
  }
  return pieces
}

export interface ChunkIdentity {
  readonly jobId: string
  readonly episodeId: string
  readonly attempt: number
}

/** A chunk record of `span`; `createdUnixMs` stamps it (the publisher reads its Clock). */
export const chunkRecord = (
  who: ChunkIdentity,
  seq: number,
  span: ChunkSpan,
  createdUnixMs: number,
): TrajectoryRecord => {
  const r = span.routing
  return create(TrajectoryRecordSchema, {
    record: {
      case: "chunk",
      value: {
        jobId: who.jobId,
        episodeId: who.episodeId,
        attempt: who.attempt,
        seq,
        tokenStart: span.start,
        tokenEnd: span.end,
        tokenIds: bytesOf(span.ids),
        logprobs: bytesOf(span.logprobs),
        lossMask: bytesOf(span.lossMask),
        ...(r
          ? {
              routing: bytesOf(r.rows),
              routingDtype: r.rows instanceof Uint16Array ? DType.DTYPE_UINT16 : DType.DTYPE_UINT8,
              routingShape: [r.rows.length / (r.layers * r.topK), r.layers, r.topK],
              numExperts: r.numExperts,
            }
          : {}),
        policyVersionStart: span.versionStart,
        policyVersionEnd: span.versionEnd,
        turnStarts: [...span.turnStarts],
        createdUnixMs: BigInt(createdUnixMs),
      },
    },
  })
}

export const endRecord = (end: EpisodeEnd): TrajectoryRecord =>
  create(TrajectoryRecordSchema, { record: { case: "end", value: end } })

const CHUNK = TrajectoryRecordSchema.field.chunk.number
const BULK = [
  TrajectoryChunkSchema.field.tokenIds.number,
  TrajectoryChunkSchema.field.logprobs.number,
  TrajectoryChunkSchema.field.lossMask.number,
  TrajectoryChunkSchema.field.routing.number,
] as const

/**
 * A record's bytes. A chunk's four arrays (nearly all of its size) are spliced in after the
 * generated encoding of its other fields, each copied once: the generic writer spends about
 * 0.5 ms on a 1 MB chunk, which is what the trajectory stream is bounded by (bench:stream).
 */
export const encodeRecord = (record: TrajectoryRecord): Uint8Array => encodeRecordInto(record)

/** As {@link encodeRecord}, written into `into` when it is large enough (a view of it returned). */
export const encodeRecordInto = (record: TrajectoryRecord, into?: Uint8Array): Uint8Array => {
  if (record.record.case !== "chunk") return toBinary(TrajectoryRecordSchema, record)
  const c = record.record.value
  const empty = new Uint8Array(0)
  // A shallow copy is a complete message already (create() would copy every field again).
  const withoutBulk: TrajectoryChunk = {
    ...c,
    tokenIds: empty,
    logprobs: empty,
    lossMask: empty,
    routing: empty,
  }
  const head = toBinary(TrajectoryChunkSchema, withoutBulk)
  const [ids, logprobs, mask, routing] = BULK
  return spliceBytesFields(
    head,
    [
      [ids, c.tokenIds],
      [logprobs, c.logprobs],
      [mask, c.lossMask],
      [routing, c.routing],
    ],
    CHUNK,
    into,
  )
}

/** The trajectory stream's duplicate window spans every job, so the job is part of the id. */
export const chunkMsgId = (who: ChunkIdentity, seq: number) =>
  `${who.jobId}:${who.episodeId}:${who.attempt}:${seq}`
export const endMsgId = (who: ChunkIdentity) => `${who.jobId}:${who.episodeId}:${who.attempt}:end`

/** Chunk encodings of this process's episodes; at most 64 MiB kept for reuse. */
const chunkBuffers = new BufferPool(64 * 1024 * 1024)

/**
 * Encodes one chunk into a lent buffer and publishes it. The buffer is taken back only when the
 * publish succeeded: a failed or interrupted one may still sit in the client's outgoing queue,
 * where reused bytes would go out under this chunk's message id.
 */
export const publishChunk = <A, E, R>(
  who: ChunkIdentity,
  seq: number,
  piece: ChunkSpan,
  maxPayload: number,
  publish: (bytes: Uint8Array, msgId: string) => Effect.Effect<A, E, R>,
): Effect.Effect<A, E, R> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const buffer = chunkBuffers.take(maxPayload)
    return publish(
      encodeRecordInto(chunkRecord(who, seq, piece, now), buffer),
      chunkMsgId(who, seq),
    ).pipe(Effect.tap(() => Effect.sync(() => chunkBuffers.give(buffer))))
  })
