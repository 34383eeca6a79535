import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { DType, TrajectoryRecordSchema } from "../../proto/index.ts"
import { encodeRecord, publishChunk } from "./records.ts"
import type { ChunkSpan } from "./tito.ts"

const chunk = (tokens: number, routed: boolean) =>
  create(TrajectoryRecordSchema, {
    record: {
      case: "chunk",
      value: {
        jobId: "job-1",
        episodeId: "ep-7",
        attempt: 2,
        seq: 3,
        tokenStart: 100,
        tokenEnd: 100 + tokens,
        tokenIds: new Uint8Array(4 * tokens).map((_, i) => i * 7),
        logprobs: new Uint8Array(4 * tokens).map((_, i) => i * 13),
        lossMask: new Uint8Array(tokens).map((_, i) => i % 2),
        ...(routed
          ? {
              routing: new Uint8Array(tokens * 48 * 8).map((_, i) => i * 31),
              routingDtype: DType.DTYPE_UINT8,
              routingShape: [tokens, 48, 8],
              numExperts: 256,
            }
          : {}),
        policyVersionStart: 5n,
        policyVersionEnd: 6n,
        turnStarts: [100, 140],
        createdUnixMs: 1_700_000_000_000n,
      },
    },
  })

describe("spliced chunk records", () => {
  it.each([
    [0, false],
    [1, false],
    [15, true],
    [2620, true],
  ])("%i tokens (routing %s) decode to the same message as the generic encoding", (n, routed) => {
    const record = chunk(n, routed)
    const spliced = encodeRecord(record)
    const generic = toBinary(TrajectoryRecordSchema, record)
    expect(spliced.length).toBe(generic.length)
    const back = fromBinary(TrajectoryRecordSchema, spliced)
    expect(equals(TrajectoryRecordSchema, back, record)).toBe(true)
    expect(equals(TrajectoryRecordSchema, back, fromBinary(TrajectoryRecordSchema, generic))).toBe(
      true,
    )
  })

  it("leaves end records to the generic encoding", () => {
    const end = create(TrajectoryRecordSchema, {
      record: {
        case: "end",
        value: { jobId: "j", episodeId: "e", totalChunks: 2, totalTokens: 9 },
      },
    })
    expect(encodeRecord(end)).toEqual(toBinary(TrajectoryRecordSchema, end))
  })
})

describe("publishChunk", () => {
  const who = { jobId: "job-1", episodeId: "ep-pool", attempt: 0 }
  const piece = (start: number): ChunkSpan => ({
    start,
    end: start + 4,
    ids: Uint32Array.from([1, 2, 3, 4]),
    logprobs: new Float32Array(4),
    lossMask: new Uint8Array(4),
    routing: undefined,
    turnStarts: [],
    versionStart: 0n,
    versionEnd: 0n,
  })

  it("reuses a chunk's buffer only after its publish succeeded", async () => {
    const sent: Uint8Array[] = []
    const ok = (bytes: Uint8Array, msgId: string) =>
      Effect.sync(() => {
        sent.push(bytes)
        return msgId
      })
    const failing = (bytes: Uint8Array) =>
      Effect.suspend(() => {
        sent.push(bytes)
        return Effect.fail("lost")
      })
    const maxPayload = 1 << 16
    expect(await Effect.runPromise(publishChunk(who, 0, piece(0), maxPayload, ok))).toBe(
      "job-1:ep-pool:0:0",
    )
    await Effect.runPromise(publishChunk(who, 1, piece(4), maxPayload, ok))
    // The first chunk's buffer came back after its publish and carried the second.
    expect(sent[1]?.buffer).toBe(sent[0]?.buffer)
    const back = fromBinary(TrajectoryRecordSchema, sent[1] as Uint8Array)
    expect(back.record.case === "chunk" && back.record.value.seq).toBe(1)
    await Effect.runPromise(Effect.exit(publishChunk(who, 2, piece(8), maxPayload, failing)))
    await Effect.runPromise(publishChunk(who, 3, piece(12), maxPayload, ok))
    // A failed publish may still be queued in the client: its buffer is never lent again.
    expect(sent[3]?.buffer).not.toBe(sent[2]?.buffer)
  })
})
