/**
 * The flags every pooled actor (`t1 actor buffer|learner` without --job) shares: which job to
 * serve alone, how many jobs at once, and how long a job's lease lasts.
 */
import { ActorConfigError, type FlagValues, flagInt, flagText } from "../hosted.ts"

/** The --job flag; undefined: pool mode (serve the train jobs submitted through the gateway). */
export const jobOf = (flags: FlagValues): string | undefined => {
  const job = flagText(flags, "job", "T1_JOB")
  if (!job) return undefined
  if (!/^[A-Za-z0-9_-]+$/.test(job))
    throw new ActorConfigError(`--job must be [A-Za-z0-9_-]+, got ${JSON.stringify(job)}`)
  return job
}

export const poolOptions = (flags: FlagValues, defaultJobs: number) => ({
  maxJobs: flagInt(flags, "max-jobs", "T1_MAX_JOBS", defaultJobs, 1),
  leaseTtlMs: flagInt(flags, "lease-ttl-ms", "T1_LEASE_TTL_MS", 15_000, 100),
})

export const POOL_FLAGS = {
  "max-jobs": { type: "string" as const },
  "lease-ttl-ms": { type: "string" as const },
}
