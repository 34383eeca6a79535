import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Effect, Result } from "effect"
import { TrajectoryAssembler, TrajectoryCorrupt } from "../../../actors/buffer/assemble.ts"
import { trainingSequence } from "../../../actors/learner/decode.ts"
import { chunkRecord, encodeRecord, endRecord, splitSpan } from "../../../actors/sampler/records.ts"
import type { ChunkSpan } from "../../../actors/sampler/tito.ts"
import {
  DType,
  EpisodeEndSchema,
  type TrajectoryChunk,
  type TrajectoryRecord,
  TrajectoryRecordSchema,
} from "../../../proto/index.ts"
import { protobufDecoder } from "../../../services/actor/index.ts"
import {
  ACCEPTED,
  crash,
  type FuzzTarget,
  judge,
  REJECTED,
  type Verdict,
  verdictOfExit,
} from "../harness.ts"
import { mutateBytes, mutateProto, toHex } from "../mutate.ts"
import type { Random } from "../random.ts"

/**
 * The trajectory pipeline end to end on one episode: the sampler's chunk and end records
 * (records.ts, split as the sampler splits them), disturbed on the way — fields changed, bytes
 * mutated, records lost, repeated, reordered — then decoded as the buffer's ingest decodes them,
 * reassembled by TrajectoryAssembler, and every trajectory it returns turned into the learner's
 * training sequence (actors/learner/decode.ts).
 */

const who = { jobId: "job-f", episodeId: "ep-1", attempt: 1 }

export const validRecords = (rng: Random, episode = who): TrajectoryRecord[] => {
  const n = rng.range(1, 48)
  const layers = rng.range(1, 2)
  const topK = rng.range(1, 2)
  const numExperts = rng.pick([4, 300])
  const rows = n - 1
  const width = rows * layers * topK
  const routing =
    numExperts > 256
      ? Uint16Array.from({ length: width }, () => rng.int(numExperts))
      : Uint8Array.from({ length: width }, () => rng.int(numExperts))
  const span: ChunkSpan = {
    start: 0,
    end: n,
    ids: Uint32Array.from({ length: n }, () => rng.int(1024)),
    logprobs: Float32Array.from({ length: n }, () => -rng.next() * 5),
    lossMask: Uint8Array.from({ length: n }, () => rng.int(2)),
    routing: rng.bool(0.8) ? { start: 0, rows: routing, layers, topK, numExperts } : undefined,
    turnStarts: [0, ...(n > 4 ? [rng.range(1, n - 1)] : [])],
    versionStart: 1n,
    versionEnd: BigInt(rng.range(1, 3)),
  }
  const pieces = splitSpan(span, rng.range(1, n))
  const records = pieces.map((piece, seq) => chunkRecord(episode, seq, piece, 0))
  records.push(
    endRecord(
      create(EpisodeEndSchema, {
        ...episode,
        totalChunks: pieces.length,
        totalTokens: n,
        reward: rng.int(4),
        admittedPolicyVersion: 1n,
      }),
    ),
  )
  return records
}

/** One field of a chunk or end record changed to a near or odd value. */
const forge = (rng: Random, record: TrajectoryRecord): TrajectoryRecord => {
  const out = create(
    TrajectoryRecordSchema,
    fromBinary(TrajectoryRecordSchema, toBinary(TrajectoryRecordSchema, record)),
  )
  const r = out.record
  const nudge = (v: number) => Math.max(0, rng.pick([v + 1, v - 1, v * 2, 0, 2 ** 32 - 1]))
  if (r.case === "end") {
    const e = r.value
    if (rng.bool()) e.totalChunks = nudge(e.totalChunks)
    else e.totalTokens = nudge(e.totalTokens)
    return out
  }
  if (r.case !== "chunk") return out
  const c: TrajectoryChunk = r.value
  switch (rng.int(8)) {
    case 0:
      c.tokenStart = nudge(c.tokenStart)
      break
    case 1:
      c.tokenEnd = nudge(c.tokenEnd)
      break
    case 2:
      c.tokenIds = mutateBytes(rng, c.tokenIds)
      break
    case 3:
      c.lossMask = mutateBytes(rng, c.lossMask)
      break
    case 4:
      c.routing = mutateBytes(rng, c.routing)
      break
    case 5:
      c.routingShape = c.routingShape.map((d) => (rng.bool(0.5) ? nudge(d) : d))
      break
    case 6:
      c.routingDtype = rng.pick([
        DType.DTYPE_UINT8,
        DType.DTYPE_UINT16,
        DType.DTYPE_FLOAT32,
        99 as DType,
      ])
      break
    default:
      c.seq = nudge(c.seq)
  }
  return out
}

/** One episode's records, encoded and disturbed on the way. */
export const disturbed = (rng: Random): Uint8Array[] => {
  const records = validRecords(rng)
  const out: Uint8Array[] = records.map(encodeRecord)
  const n = rng.int(4)
  for (let i = 0; i < n; i++) {
    const at = rng.int(out.length)
    const record = records[at]
    switch (rng.int(5)) {
      case 0:
        if (record !== undefined) out[at] = encodeRecord(forge(rng, record))
        break
      case 1:
        out[at] = mutateProto(rng, out[at] ?? new Uint8Array(0))
        break
      case 2:
        out.splice(at, 1)
        records.splice(at, 1)
        break
      case 3:
        out.push(out[at] ?? new Uint8Array(0))
        break
      default:
        out.push(rng.bytes(rng.size(48)))
    }
  }
  for (let i = out.length - 1; i > 0 && rng.bool(0.4); i--) {
    const j = rng.int(i + 1)
    ;[out[i], out[j]] = [out[j] ?? new Uint8Array(0), out[i] ?? new Uint8Array(0)]
  }
  return out
}

const decodeRecord = protobufDecoder(TrajectoryRecordSchema)

const feed = (messages: ReadonlyArray<Uint8Array>): Verdict => {
  const assembler = new TrajectoryAssembler()
  let rejected = false
  for (const bytes of messages) {
    const exit = Effect.runSyncExit(decodeRecord(bytes))
    if (exit._tag === "Failure") {
      const verdict = verdictOfExit(exit)
      if (verdict.kind === "crash") return verdict
      rejected = true
      continue
    }
    const out = judge(() => {
      const done = assembler.add(exit.value, 0)
      if (done instanceof TrajectoryCorrupt) return REJECTED
      // The learner refusing an assembled trajectory (typed) is a rejection; a throw is a crash.
      if (done !== undefined && Result.isFailure(trainingSequence(done.toTrajectory(), 2n)))
        return REJECTED
      return ACCEPTED
    })
    if (out.kind === "crash") return crash(`${out.reason} (record ${toHex(bytes)})`)
    if (out.kind === "rejected") rejected = true
  }
  return rejected ? REJECTED : ACCEPTED
}

export const trajectoryTarget: FuzzTarget = {
  name: "trajectory records",
  description:
    "chunk + end records (records.ts), disturbed → decode, TrajectoryAssembler, trainingSequence",
  make: (rng) => {
    const messages = disturbed(rng)
    return { input: () => messages.map(toHex).join(" "), run: () => feed(messages) }
  },
}
