/**
 * The buffer as a pool member (`t1 actor buffer` without --job): every train job is claimed by
 * one buffer process through a lease in KV `<prefix>-buffer-leases`, many jobs per process.
 */
import { Effect } from "effect"
import { JobKind, type JobStatus } from "../../proto/index.ts"
import { Bus, type BusError } from "../../services/bus/index.ts"
import { jobSchedule } from "../../services/jobs/index.ts"
import type { Metrics } from "../../services/metrics/index.ts"
import { type PoolOptions, poolMembership, runJobPool } from "../pool/index.ts"
import { runBuffer } from "./actor.ts"

export interface BufferPoolOptions extends PoolOptions {
  /** A served batch not confirmed within this time is served again (default 5 min). */
  readonly batchAckTimeoutMs?: number
}

/** Only train jobs stream trajectories to a buffer (an SFT job's golden ones are its learner's). */
const isTrainJob = (status: JobStatus): boolean => status.spec?.kind === JobKind.TRAIN

/** Buffers every train job's trajectories, many jobs per process. */
export const runBufferPool = (
  o: BufferPoolOptions,
): Effect.Effect<never, BusError, Bus | Metrics> =>
  Effect.gen(function* () {
    return yield* runJobPool({
      ...(yield* poolMembership(yield* Bus, o, "buffer", 64)),
      wants: isTrainJob,
      run: (job) =>
        runBuffer({
          subjects: o.subjects,
          jobId: job.jobId,
          groupSize: job.status.spec ? jobSchedule(job.status.spec).groupSize : 0,
          ...(o.batchAckTimeoutMs === undefined ? {} : { batchAckTimeoutMs: o.batchAckTimeoutMs }),
        }),
    })
  })
