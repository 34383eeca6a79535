import { createHash } from "node:crypto"
import type { Subjects } from "../../services/bus/index.ts"

/**
 * Names the buffer of one job uses on the bus, all under the subjects' prefix:
 * - the durable consumer `buffer-<job>` on the trajectory stream (filtered to `<prefix>.traj.<job>`)
 *   and on the READY stream (filtered to `<prefix>.ready.<job>`);
 * - the JetStream stream `<PREFIX>_READY` (subjects `<prefix>.ready.>`, work-queue retention):
 *   stored trajectories not yet consumed by training, one ReadyTrajectory message each, with
 *   Nats-Msg-Id `<job>:<episode>`;
 * - the KV bucket `<prefix>-buffer`: the claim of each episode (`<job>.<episode>`), so exactly one
 *   attempt per episode is trained on;
 * - the object store bucket `<prefix>-trajectories`: trajectories too large for one message,
 *   under `<job>/<episode>` (excluded attempts under `<job>/<episode>.<infra|unverifiable>-<attempt>`);
 * - `<prefix>.buffer.<job>.take` (queue group `buffer`): TakeBatchRequest → Batch.
 */
export const bufferNames = (subjects: Subjects, jobId: string) => {
  const streamPrefix = subjects.trajectoriesStream.slice(0, -"_TRAJ".length)
  return {
    jobId,
    durable: `buffer-${jobId}`,
    trajectoriesStream: subjects.trajectoriesStream,
    trajectories: subjects.trajectories(jobId),
    readyStream: `${streamPrefix}_READY`,
    allReady: `${subjects.prefix}.ready.>`,
    ready: `${subjects.prefix}.ready.${jobId}`,
    claimsBucket: `${subjects.prefix}-buffer`,
    objectBucket: `${subjects.prefix}-trajectories`,
    take: subjects.bufferTake(jobId),
    takeQueue: "buffer",
    claimKey: (episodeId: string) => `${jobId}.${episodeId}`,
    /** The trainable trajectory of an episode (exactly one). */
    readyMsgId: (episodeId: string) => `${jobId}:${episodeId}`,
    objectName: (episodeId: string) => `${jobId}/${episodeId}`,
    /**
     * Excluded attempts (infra-failed or unverifiable) are stored apart, one each: they never
     * train, and a later attempt of the episode may still.
     */
    excludedMsgId: (episodeId: string, attempt: number, why: Exclusion) =>
      `${jobId}:${episodeId}:${why}:${attempt}`,
    excludedObjectName: (episodeId: string, attempt: number, why: Exclusion) =>
      `${jobId}/${episodeId}.${why}-${attempt}`,
  }
}

export type BufferNames = ReturnType<typeof bufferNames>

/**
 * Why an episode attempt is stored but never trained on: the harness failed (infra), or its
 * tests need packages the sandbox lacks so no score exists (unverifiable).
 */
export type Exclusion = "infra" | "unverifiable"

/** Whether (and why) an attempt with this end record is excluded from training. */
export const exclusionOf = (
  end: { readonly infraFailed: boolean; readonly unverifiable: boolean } | undefined,
): Exclusion | undefined =>
  end?.infraFailed === true ? "infra" : end?.unverifiable === true ? "unverifiable" : undefined

/** Room left in a READY message for its headers (Nats-Msg-Id). */
export const READY_RESERVE_BYTES = 8 * 1024
/** Room left in a Batch reply below max_payload: the batch's own fields, headers. */
export const BATCH_RESERVE_BYTES = 16 * 1024
/** Bytes a batch entry costs beyond its trajectory: field tag, length prefix, its weight. */
export const ENTRY_FRAMING_BYTES = 16
/** Upper bound of an ObjectRef entry of a batch (bucket, name, sha256, size, framing). */
export const REF_ENTRY_BYTES = 512

/** Bytes the trajectories of one Batch reply may take. */
export const batchBudget = (maxPayload: number): number => maxPayload - BATCH_RESERVE_BYTES

/**
 * Whether a trajectory of `trajectoryBytes` (encoded) travels inline, in its READY message and in
 * batches; larger ones go to the object store. The bound is the batch budget, not the READY
 * message's (max_payload − 8 KiB), so that every inline trajectory can be served alone in a batch.
 */
export const fitsInline = (
  trajectoryBytes: number,
  readyBytes: number,
  maxPayload: number,
): boolean =>
  trajectoryBytes + ENTRY_FRAMING_BYTES <= batchBudget(maxPayload) &&
  readyBytes <= maxPayload - READY_RESERVE_BYTES

export const sha256Hex = (data: Uint8Array): string =>
  createHash("sha256").update(data).digest("hex")
