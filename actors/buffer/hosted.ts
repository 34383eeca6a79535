/** `t1 actor buffer`: one job's buffer (--job), or a pool member serving every train job. */
import { Effect } from "effect"
import {
  ActorConfigError,
  type FlagValues,
  flagInt,
  flagText,
  type HostedActor,
} from "../hosted.ts"
import { jobOf, POOL_FLAGS, poolOptions } from "../pool/index.ts"
import { runBuffer } from "./actor.ts"
import { runBufferPool } from "./job-pool.ts"

const batchAckTimeout = (flags: FlagValues) =>
  flagInt(flags, "batch-ack-timeout-ms", "T1_BATCH_ACK_TIMEOUT_MS", 300_000, 100)

export const bufferActor: HostedActor = {
  summary:
    "assembles a job's streamed trajectories, stores them durably, serves staleness-bounded batches to the learner",
  flags: {
    job: { type: "string" },
    "group-size": { type: "string" },
    "stale-policy": { type: "string" },
    "batch-ack-timeout-ms": { type: "string" },
    ...POOL_FLAGS,
  },
  flagsHelp: `Without --job the buffer is a pool member: it claims train jobs from the job store (one buffer
per job, lease in KV <prefix>-buffer-leases; group size = the job's samples_per_task).
  --max-jobs N                 pool mode: jobs buffered at once by this process (T1_MAX_JOBS; default 64)
  --lease-ttl-ms MS            pool mode: a job's lease lapses this long after the last heartbeat (default 15000)
  --job ID                     buffer only this job (T1_JOB)
  --batch-ack-timeout-ms MS    a served batch the learner has not confirmed is served again after this
                               (a learner that died with it); T1_BATCH_ACK_TIMEOUT_MS, default 300000
  --group-size N               rollouts per group when a request does not say (default 0: by timeout)
  --stale-policy drop|downweight  trajectories staler than η (default drop)`,
  run: ({ subjects }, flags) => {
    const jobId = jobOf(flags)
    if (jobId === undefined)
      return runBufferPool({
        subjects,
        ...poolOptions(flags, 64),
        batchAckTimeoutMs: batchAckTimeout(flags),
      }).pipe(Effect.mapError((e) => ({ message: e.message })))
    const stale = flagText(flags, "stale-policy", "T1_STALE_POLICY") ?? "drop"
    if (stale !== "drop" && stale !== "downweight")
      throw new ActorConfigError(
        `--stale-policy must be drop or downweight, got ${JSON.stringify(stale)}`,
      )
    return runBuffer({
      subjects,
      jobId,
      groupSize: flagInt(flags, "group-size", "T1_GROUP_SIZE", 0),
      stalePolicy: stale,
      batchAckTimeoutMs: batchAckTimeout(flags),
    }).pipe(Effect.mapError((e) => ({ message: e.message ?? String(e) })))
  },
}
