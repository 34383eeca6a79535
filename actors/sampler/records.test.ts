import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import { DType, TrajectoryRecordSchema } from "../../proto/index.ts"
import { encodeRecord } from "./records.ts"

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
