import { create } from "@bufbuild/protobuf"
import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { DType, type Trajectory, TrajectorySchema } from "../../proto/index.ts"
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

/** The sequence of a trajectory that fits together. */
const read = (t: Trajectory, version: bigint, weight?: number) =>
  Result.getOrThrow(trainingSequence(t, version, weight))

describe("trainingSequence", () => {
  it("reads a well-formed trajectory up to its last generated token", () => {
    const s = read(trajectory(), 0n)
    expect([...(s?.ids ?? [])]).toEqual([5, 6, 7])
    expect([...(s?.routing ?? [])]).toEqual([1, 2, 3, 0])
  })

  it("carries the group, the task's test count and the batch weight", () => {
    const s = read(
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
    expect(read(trajectory(), 0n)?.weight).toBe(1)
  })

  it("fails with TrajectoryMalformed on arrays that do not fit together, not a RangeError (found by npm run test:fuzz)", () => {
    const cases = [
      { tokenIds: Uint8Array.of(1, 2, 3, 4, 5) },
      { logprobs: Uint8Array.of(0, 0, 0) },
      { lossMask: Uint8Array.of(1) },
      { routing: Uint8Array.of(1, 2, 3), routingDtype: DType.DTYPE_UINT16 },
      { routingShape: [9, 1, 2] },
    ]
    for (const patch of cases) {
      const r = trainingSequence(trajectory(patch), 0n)
      if (Result.isSuccess(r)) throw new Error(`accepted ${JSON.stringify(Object.keys(patch))}`)
      expect(r.failure).toBeInstanceOf(TrajectoryMalformed)
      expect(r.failure.message).toMatch(/^trajectory ep-1: /)
    }
  })
})
