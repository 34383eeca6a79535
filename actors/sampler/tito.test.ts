import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import {
  EpisodeEndSchema,
  type TrajectoryChunk,
  TrajectoryRecordSchema,
  TrajectorySchema,
} from "../../proto/index.ts"
import { AssembledTrajectory, TrajectoryAssembler, TrajectoryCorrupt } from "../buffer/assemble.ts"
import { chunkRecord, endRecord, splitSpan } from "./records.ts"
import { type ChunkSpan, TrajectoryBuilder } from "./tito.ts"

const rows = (start: number, count: number, value = (p: number) => p % 4) => ({
  start,
  rows: Uint8Array.from({ length: count * 4 }, (_, i) => value(start + Math.floor(i / 4))),
  layers: 2,
  topK: 2,
  numExperts: 4,
})

/** prompt (5) · generated (3, v1) · glue+observation (4) · generated (2, v2) */
const build = () => {
  const b = new TrajectoryBuilder(1n)
  b.startTurn()
  b.appendContext([1, 2, 3, 4, 5])
  b.appendGenerated([10, 11, 12], [-0.5, -0.25, -1], 1n)
  b.addRouting(rows(0, 7)) // positions 0..6 processed (the last generated token is not)
  b.appendContext([20, 21, 22, 23])
  b.startTurn()
  return b
}

describe("TITO trajectory builder", () => {
  it("keeps sampled ids verbatim with mask 1 and their log-probs; context has mask 0 and log-prob 0", () => {
    const b = build()
    const span = b.takeSpan(true) as ChunkSpan
    expect([...span.ids]).toEqual([1, 2, 3, 4, 5, 10, 11, 12, 20, 21, 22, 23])
    expect([...span.lossMask]).toEqual([0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0])
    expect([...span.logprobs]).toEqual([0, 0, 0, 0, 0, -0.5, -0.25, -1, 0, 0, 0, 0])
    expect(span.turnStarts).toEqual([0])
    expect(b.generatedTokens).toBe(3)
  })

  it("a running chunk stops at the routed frontier; the final chunk takes the unrouted tail", () => {
    const b = build()
    const first = b.takeSpan(false) as ChunkSpan
    expect([first.start, first.end]).toEqual([0, 7])
    expect(first.routing?.rows.length).toBe(7 * 4)
    expect(b.takeSpan(false)).toBeUndefined()
    b.appendGenerated([30, 31], [-2, -3], 2n)
    b.addRouting(rows(0, 13)) // an engine reporting everything again: first report wins
    const second = b.takeSpan(true) as ChunkSpan
    expect([second.start, second.end]).toEqual([7, 14])
    expect(second.routing?.start).toBe(7)
    expect(second.routing?.rows.length).toBe(6 * 4)
    expect(second.turnStarts).toEqual([12])
    // Position 7 holds the first turn's last token (v1); the second turn is v2.
    expect([second.versionStart, second.versionEnd]).toEqual([1n, 2n])
    expect(b.versionRange).toEqual({ start: 1n, end: 2n })
  })

  it("refuses routing that skips positions or runs past the sequence", () => {
    const b = build()
    expect(() => b.addRouting(rows(9, 1))).toThrow(/only 7 positions are routed/)
    expect(() => b.addRouting(rows(7, 9))).toThrow(/beyond the sequence/)
  })

  it("splits a span to fit a message, routing rows with it", () => {
    const b = build()
    const span = b.takeSpan(true) as ChunkSpan
    const pieces = splitSpan(span, 5)
    expect(pieces.map((p) => [p.start, p.end])).toEqual([
      [0, 5],
      [5, 10],
      [10, 12],
    ])
    expect(pieces.map((p) => (p.routing ? p.routing.rows.length / 4 : 0))).toEqual([5, 2, 0])
  })
})

describe("trajectory assembly (buffer side)", () => {
  const who = { jobId: "j", episodeId: "e", attempt: 3 }
  const records = () => {
    const b = build()
    const first = b.takeSpan(false) as ChunkSpan
    b.appendGenerated([30, 31], [-2, -3], 2n)
    b.addRouting(rows(7, 6))
    const second = b.takeSpan(true) as ChunkSpan
    const chunks = [...splitSpan(first, 4), second].map((s, seq) => chunkRecord(who, seq, s, 0))
    const end = endRecord(
      create(EpisodeEndSchema, { ...who, totalChunks: chunks.length, totalTokens: 14 }),
    )
    return { chunks, end }
  }

  it("assembles out-of-order and duplicated chunks once", () => {
    const { chunks, end } = records()
    const a = new TrajectoryAssembler()
    for (const r of [end, chunks[2], chunks[0], chunks[0]])
      expect(a.add(r as (typeof chunks)[number], 0)).toBeUndefined()
    const t = (a.add(chunks[1] as (typeof chunks)[number], 0) as AssembledTrajectory).toTrajectory()
    expect(t.end?.attempt).toBe(3)
    expect(new Uint32Array(t.tokenIds.slice().buffer)).toEqual(
      Uint32Array.from([1, 2, 3, 4, 5, 10, 11, 12, 20, 21, 22, 23, 30, 31]),
    )
    expect(a.pending).toBe(0)
  })

  it("completes when the last missing piece arrives and checks the tiling", () => {
    const { chunks, end } = records()
    const a = new TrajectoryAssembler()
    for (const c of chunks.slice(1)) a.add(c, 0)
    a.add(end, 0)
    const t = (a.add(chunks[0] as (typeof chunks)[number], 0) as AssembledTrajectory).toTrajectory()
    expect(t.end?.totalTokens).toBe(14)
    expect(t.tokenIds.length).toBe(14 * 4)
    expect(t.routingShape).toEqual([13, 2, 2])
    expect(t.turnStarts).toEqual([0, 12])
    expect(a.pending).toBe(0)
    // A duplicate after completion starts nothing that could complete twice.
    expect(a.add(chunks[0] as (typeof chunks)[number], 0)).toBeUndefined()
  })

  it("reports a missing chunk or a short tiling as corruption", () => {
    const { chunks } = records()
    const a = new TrajectoryAssembler()
    a.add(chunks[0] as (typeof chunks)[number], 0)
    a.add(chunks[2] as (typeof chunks)[number], 0)
    const missing = a.add(
      endRecord(create(EpisodeEndSchema, { ...who, totalChunks: 2, totalTokens: 14 })),
      0,
    )
    expect(String((missing as TrajectoryCorrupt).message)).toMatch(/chunk 1 missing/)
    const b = new TrajectoryAssembler()
    b.add(chunks[0] as (typeof chunks)[number], 0)
    b.add(chunks[1] as (typeof chunks)[number], 0)
    const short = b.add(
      endRecord(create(EpisodeEndSchema, { ...who, totalChunks: 2, totalTokens: 14 })),
      0,
    )
    expect(short).toBeInstanceOf(TrajectoryCorrupt)
    expect(String((short as TrajectoryCorrupt).message)).toMatch(
      /cover 7 tokens, the end record says 14/,
    )
  })

  it("encodes the assembled trajectory as the Trajectory message its joined arrays make", () => {
    const { chunks, end } = records()
    const a = new TrajectoryAssembler()
    for (const r of [...chunks, end]) a.add(r, 0)
    const { chunks: again, end: end2 } = records()
    const b = new TrajectoryAssembler()
    let done: AssembledTrajectory | TrajectoryCorrupt | undefined
    for (const r of [...again, end2]) done = b.add(r, 0)
    const assembled = done as AssembledTrajectory
    expect(assembled.tokens).toBe(14)
    expect(assembled.parts.tokenIds).toHaveLength(chunks.length)
    const decoded = fromBinary(TrajectorySchema, assembled.encode())
    expect(decoded).toEqual(assembled.toTrajectory())
    expect(toBinary(TrajectorySchema, decoded)).toEqual(
      toBinary(TrajectorySchema, assembled.toTrajectory()),
    )
  })

  it("refuses routing to an expert the model does not have, and routing without num_experts", () => {
    const tamper = (numExperts: number, at: number, value: number) => {
      const { chunks, end } = records()
      const c = chunks[1]?.record.value as TrajectoryChunk
      const routing = c.routing.slice()
      routing[at] = value
      const a = new TrajectoryAssembler()
      let out: AssembledTrajectory | TrajectoryCorrupt | undefined
      for (const r of [
        ...chunks.map((r, i) =>
          i === 1
            ? create(TrajectoryRecordSchema, {
                record: { case: "chunk", value: { ...c, routing, numExperts } },
              })
            : r,
        ),
        end,
      ])
        out = a.add(r, 0)
      return out
    }
    expect(tamper(4, 0, 3)).toBeInstanceOf(AssembledTrajectory)
    const bad = tamper(4, 5, 4) as TrajectoryCorrupt
    expect(bad).toBeInstanceOf(TrajectoryCorrupt)
    // Chunk 1 starts at position 4; flat index 5 is token 5, layer 0, k 1 (2 layers × top-2).
    expect(bad.message).toMatch(
      /chunk 1: expert 4 at \[token 5, layer 0, k 1\] is not below num_experts 4/,
    )
    expect((tamper(0, 0, 1) as TrajectoryCorrupt).message).toMatch(/routing without num_experts/)
  })
})
