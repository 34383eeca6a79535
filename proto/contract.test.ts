import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { describe, expect, it } from "vitest"
import {
  DType,
  JobKind,
  type JobSpec,
  JobSpecSchema,
  TaskSplit,
  TrajectoryChunkSchema,
  TrajectoryRecordSchema,
} from "./index.ts"

// The typed arrays' own bytes, which are little-endian on every host t1 supports (x86-64, arm64).
const bytesOf = (array: Uint32Array | Float32Array): Uint8Array =>
  new Uint8Array(array.buffer, array.byteOffset, array.byteLength)

describe("t1.v1 contract", () => {
  it("a trajectory chunk keeps its packed arrays byte for byte", () => {
    const tokenIds = new Uint32Array([1, 70_000, 4_000_000_000])
    const logprobs = new Float32Array([0, -0.25, -1.5])
    const lossMask = new Uint8Array([0, 1, 1])
    const routing = new Uint8Array(3 * 2 * 2).map((_, i) => i) // [tokens 3, layers 2, top_k 2]
    const chunk = create(TrajectoryChunkSchema, {
      jobId: "job-1",
      episodeId: "ep-7",
      attempt: 1,
      seq: 4,
      tokenStart: 100,
      tokenEnd: 103,
      tokenIds: bytesOf(tokenIds),
      logprobs: bytesOf(logprobs),
      lossMask,
      routing,
      routingDtype: DType.DTYPE_UINT8,
      routingShape: [3, 2, 2],
      policyVersionStart: 5n,
      policyVersionEnd: 6n,
      turnIndex: 2,
      turnStarts: [101],
      numExperts: 16,
    })

    const decoded = fromBinary(TrajectoryChunkSchema, toBinary(TrajectoryChunkSchema, chunk))

    expect(decoded).toEqual(chunk)
    const ids = new Uint32Array(decoded.tokenIds.slice().buffer)
    expect(Array.from(ids)).toEqual([1, 70_000, 4_000_000_000])
    const lps = new Float32Array(decoded.logprobs.slice().buffer)
    expect(Array.from(lps)).toEqual([0, -0.25, -1.5])
    expect(decoded.policyVersionEnd).toBe(6n)
  })

  it("a chunk travels inside a trajectory record", () => {
    const chunk = create(TrajectoryChunkSchema, { episodeId: "ep-1", seq: 0, tokenEnd: 1 })
    const record = create(TrajectoryRecordSchema, { record: { case: "chunk", value: chunk } })

    const decoded = fromBinary(TrajectoryRecordSchema, toBinary(TrajectoryRecordSchema, record))

    expect(decoded.record.case).toBe("chunk")
    expect(decoded.record.value).toEqual(chunk)
  })

  it("a job spec round-trips with its learner config, sampling and labels", () => {
    const spec: JobSpec = create(JobSpecSchema, {
      name: "train-synthetic",
      kind: JobKind.TRAIN,
      taskSet: "synthetic-v1",
      split: TaskSplit.TRAIN,
      policyRef: "tinymoe:init",
      sampling: { temperature: 1, topP: 1, maxTokens: 512, stopTokenIds: [2], seed: 7n },
      limits: { maxTurns: 300, maxTokens: 32_768, wallClockSec: 3600, observationMaxBytes: 16_384 },
      samplesPerTask: 8,
      learner: {
        clipEps: 0.2,
        valueClipEps: 0.2,
        entropyCoef: 0.001,
        gamma: 1,
        actorLambda: 0.95,
        criticLambda: 1,
        lr: 1e-6,
        criticWarmupSteps: 20,
        maxStaleness: 2,
        r3: true,
        tito: true,
        tisThreshold: 2,
      },
      maxConcurrentEpisodes: 64,
      labels: { owner: "rl" },
    })

    const decoded = fromBinary(JobSpecSchema, toBinary(JobSpecSchema, spec))

    expect(decoded).toEqual(spec)
    expect(decoded.learner?.r3).toBe(true)
    expect(decoded.sampling?.seed).toBe(7n)
    expect(decoded.labels).toEqual({ owner: "rl" })
  })

  it("decoding garbage bytes throws instead of returning a message", () => {
    // Field 1, wire type 7 (invalid), then a length-delimited field whose length overruns.
    const garbage = new Uint8Array([0x0f, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x0a, 0x7f, 0x01])

    expect(() => fromBinary(TrajectoryChunkSchema, garbage)).toThrow()
    expect(() => fromBinary(JobSpecSchema, garbage)).toThrow()
  })
})
