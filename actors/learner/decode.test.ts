import { create } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import { DType, TrajectorySchema } from "../../proto/index.ts"
import { TrajectoryMalformed, trainingSequence } from "./decode.ts"

const bytes = (a: Uint32Array | Float32Array) => new Uint8Array(a.buffer)

const trajectory = (patch: object = {}) =>
  create(TrajectorySchema, {
    episodeId: "ep-1",
    tokenIds: bytes(Uint32Array.of(5, 6, 7)),
    logprobs: bytes(Float32Array.of(0, -0.5, -0.25)),
    lossMask: Uint8Array.of(0, 1, 1),
    routing: Uint8Array.of(1, 2, 3, 0),
    routingDtype: DType.DTYPE_UINT8,
    routingShape: [2, 1, 2],
    ...patch,
  })

describe("trainingSequence", () => {
  it("reads a well-formed trajectory up to its last generated token", () => {
    const s = trainingSequence(trajectory(), 0n)
    expect([...(s?.ids ?? [])]).toEqual([5, 6, 7])
    expect([...(s?.routing ?? [])]).toEqual([1, 2, 3, 0])
  })

  it("carries the group, the task's test count and the batch weight", () => {
    const s = trainingSequence(
      trajectory({
        end: {
          groupId: "g-1",
          reward: 2,
          testsPassed: 2,
          testsTotal: 5,
          admittedPolicyVersion: 1n,
        },
      }),
      3n,
      0.25,
    )
    expect(s).toMatchObject({ groupId: "g-1", reward: 2, testsTotal: 5, weight: 0.25 })
    expect(s?.staleness).toBe(2n)
    expect(trainingSequence(trajectory(), 0n)?.weight).toBe(1)
  })

  it("refuses arrays that do not fit together with TrajectoryMalformed, not a RangeError (found by npm run test:fuzz)", () => {
    const cases = [
      { tokenIds: Uint8Array.of(1, 2, 3, 4, 5) },
      { logprobs: Uint8Array.of(0, 0, 0) },
      { lossMask: Uint8Array.of(1) },
      { routing: Uint8Array.of(1, 2, 3), routingDtype: DType.DTYPE_UINT16 },
      { routingShape: [9, 1, 2] },
    ]
    for (const patch of cases) {
      expect(() => trainingSequence(trajectory(patch), 0n)).toThrow(TrajectoryMalformed)
      expect(() => trainingSequence(trajectory(patch), 0n)).toThrow(/^trajectory ep-1: /)
    }
  })
})
