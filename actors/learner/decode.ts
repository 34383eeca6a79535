import { Data, Effect, Result } from "effect"
import { DType, type Trajectory } from "../../proto/index.ts"
import { routingShapeProblem } from "../../services/packed/index.ts"

/** A trajectory whose arrays do not fit together (a buffer bug or a corrupted batch). */
export class TrajectoryMalformed extends Data.TaggedError("TrajectoryMalformed")<{
  readonly episodeId: string
  readonly reason: string
}> {
  override get message(): string {
    return `trajectory ${this.episodeId}: ${this.reason}`
  }
}

/** A trajectory's arrays as typed arrays (copies, aligned), cut after its last generated token. */
export interface TrainingSequence {
  readonly episodeId: string
  readonly ids: Uint32Array
  readonly lossMask: Uint8Array
  readonly logprobs: Float32Array
  /** Routing rows for positions [0, ids.length − 1), when the sampler recorded them all. */
  readonly routing: Uint8Array | Uint16Array | undefined
  /** The verifier's dense reward as reported: the number of passing tests. */
  readonly reward: number
  readonly resolved: boolean
  readonly staleness: bigint
  /**
   * The task's number of tests (EpisodeEnd.tests_total): the learner trains on
   * reward / testsTotal, so 1 means every test passes. Unset or 0: the reward is used as it is.
   */
  readonly testsTotal?: number
  /** The rollout group (same task, same round; EpisodeEnd.group_id), for group baselines. */
  readonly groupId?: string
  /** Loss weight of the trajectory's policy term (the buffer's staleness weight); default 1. */
  readonly weight?: number
}

// new Uint8Array(…), not .slice(): a Node Buffer's slice is a view into its (shared) pool.
const copy = (bytes: Uint8Array) => new Uint8Array(bytes).buffer

/** Why the arrays of `t` cannot be read as one sequence, or undefined when they can. */
const malformation = (t: Trajectory): string | undefined => {
  const n = t.tokenIds.length / 4
  if (!Number.isInteger(n)) return `token_ids is ${t.tokenIds.length} bytes, not whole uint32s`
  if (t.logprobs.length !== 4 * n) return `logprobs is ${t.logprobs.length} bytes for ${n} tokens`
  if (t.lossMask.length !== n) return `loss_mask is ${t.lossMask.length} bytes for ${n} tokens`
  if (t.routing.length === 0) return undefined
  return routingShapeProblem(
    t.routing.length,
    t.routingShape,
    t.routingDtype === DType.DTYPE_UINT16 ? 2 : 1,
  )
}

/**
 * Nothing after the last generated token carries a decision, a log-prob or routing, so
 * training sequences end there: rows predict tokens 1..p, with p the last generated position.
 * Succeeds with undefined when the policy generated nothing; fails with TrajectoryMalformed when
 * the arrays do not fit together. `weight` is the trajectory's loss weight from the batch
 * (Batch.weights, 1 unless the buffer down-weights stale trajectories).
 */
export const trainingSequence = (
  t: Trajectory,
  policyVersion: bigint,
  weight = 1,
): Result.Result<TrainingSequence | undefined, TrajectoryMalformed> => {
  const reason = malformation(t)
  if (reason !== undefined)
    return Result.fail(new TrajectoryMalformed({ episodeId: t.episodeId, reason }))
  const ids = new Uint32Array(copy(t.tokenIds))
  const lossMask = new Uint8Array(t.lossMask)
  const logprobs = new Float32Array(copy(t.logprobs))
  const last = lossMask.lastIndexOf(1)
  if (last < 1) return Result.succeed(undefined)
  const [rows = 0, layers = 0, topK = 0] = t.routingShape
  let routing: Uint8Array | Uint16Array | undefined
  if (t.routing.length > 0 && rows >= last) {
    const all =
      t.routingDtype === DType.DTYPE_UINT16
        ? new Uint16Array(copy(t.routing))
        : new Uint8Array(t.routing)
    routing = all.subarray(0, last * layers * topK)
  }
  return Result.succeed({
    episodeId: t.episodeId,
    ids: ids.subarray(0, last + 1),
    lossMask: lossMask.subarray(0, last + 1),
    logprobs: logprobs.subarray(0, last + 1),
    routing,
    reward: t.end?.reward ?? 0,
    resolved: t.end?.resolved ?? false,
    staleness: policyVersion - (t.end?.admittedPolicyVersion ?? policyVersion),
    testsTotal: t.end?.testsTotal ?? 0,
    groupId: t.end?.groupId ?? "",
    weight,
  })
}

/**
 * The training sequences of `trajectories` (those that generated nothing left out), or the first
 * one's malformation: for sequences made here (golden transcripts), where one that does not fit
 * together is a bug to stop at, not a trajectory to drop.
 */
export const trainingSequences = (
  trajectories: ReadonlyArray<Trajectory>,
  policyVersion: bigint,
): Effect.Effect<TrainingSequence[], TrajectoryMalformed> =>
  Effect.forEach(trajectories, (t) => Effect.fromResult(trainingSequence(t, policyVersion))).pipe(
    Effect.map((all) => all.filter((s) => s !== undefined)),
  )
