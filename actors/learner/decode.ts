import { DType, type Trajectory } from "../../proto/index.ts"

/** A trajectory's arrays as typed arrays (copies, aligned), cut after its last generated token. */
export interface TrainingSequence {
  readonly episodeId: string
  readonly ids: Uint32Array
  readonly lossMask: Uint8Array
  readonly logprobs: Float32Array
  /** Routing rows for positions [0, ids.length − 1), when the sampler recorded them all. */
  readonly routing: Uint8Array | Uint16Array | undefined
  readonly reward: number
  readonly resolved: boolean
  readonly staleness: bigint
}

const copy = (bytes: Uint8Array) => bytes.slice().buffer

/**
 * Nothing after the last generated token carries a decision, a log-prob or routing, so
 * training sequences end there: rows predict tokens 1..p, with p the last generated position.
 * Returns undefined when the policy generated nothing.
 */
export const trainingSequence = (
  t: Trajectory,
  policyVersion: bigint,
): TrainingSequence | undefined => {
  const ids = new Uint32Array(copy(t.tokenIds))
  const lossMask = t.lossMask.slice()
  const logprobs = new Float32Array(copy(t.logprobs))
  const last = lossMask.lastIndexOf(1)
  if (last < 1) return undefined
  const [rows = 0, layers = 0, topK = 0] = t.routingShape
  let routing: Uint8Array | Uint16Array | undefined
  if (t.routing.length > 0 && rows >= last) {
    const all =
      t.routingDtype === DType.DTYPE_UINT16 ? new Uint16Array(copy(t.routing)) : t.routing.slice()
    routing = all.subarray(0, last * layers * topK)
  }
  return {
    episodeId: t.episodeId,
    ids: ids.subarray(0, last + 1),
    lossMask: lossMask.subarray(0, last + 1),
    logprobs: logprobs.subarray(0, last + 1),
    routing,
    reward: t.end?.reward ?? 0,
    resolved: t.end?.resolved ?? false,
    staleness: policyVersion - (t.end?.admittedPolicyVersion ?? policyVersion),
  }
}
