/**
 * The coordinator: turns jobs into episode work items, admits them within the staleness bound,
 * follows their end records, and keeps each job's status, events and evaluation.
 */
import { Effect } from "effect"
import {
  ActorConfigError,
  type FlagValues,
  flagInt,
  flagText,
  type HostedActor,
} from "../hosted.ts"
import { BASE_IMAGE } from "../sandbox/index.ts"
import { runCoordinator } from "./actor.ts"

export { type CoordinatorOptions, runCoordinator } from "./actor.ts"
export { coordinatorBucket, LeaseLost } from "./lease.ts"
export { RUNS_PER_ATTEMPT } from "./ledger.ts"
export { coordinatorMetrics } from "./metrics.ts"
export { type EvaluationStats, evaluationStats, passAtK, type TaskOutcome } from "./pass-at-k.ts"
export {
  episodeId,
  episodeIndex,
  groupId,
  JobSpecInvalid,
  JobTasksUnavailable,
  type ResolveImage,
  workItemMsgId,
} from "./plan.ts"
export { coordinatorDurable } from "./tenure.ts"

export const coordinatorFlagsHelp = `  --max-concurrent N           episodes running at once for a job whose spec sets none (T1_MAX_CONCURRENT; default 16)
  --lease-ttl-ms MS            a job's lease lapses this long after its coordinator's last heartbeat (T1_LEASE_TTL_MS; default 15000)
  --cancel-grace-ms MS         how long a cancelled job waits for its running episodes (T1_CANCEL_GRACE_MS; default 60000)
  --episode-timeout-ms MS      an attempt with no end record this long counts as an infra failure; 0 = never (T1_EPISODE_TIMEOUT_MS; default 10800000)
  --driver auto|bwrap|docker|local  the sandboxes' driver (T1_SANDBOX_DRIVER; default auto, which sends base-image tasks to bwrap and the rest to docker): with local, every task runs on the sandbox host's own system and no task image is resolved (no Docker engine needed); otherwise (bwrap too: it runs each task image's exported files) each task's image is resolved on this machine's engine`

const DRIVERS = ["docker", "local", "bwrap", "auto"]

/** Under the local driver a task has no image of its own: the sandbox host runs it in place. */
const imageOptions = (flags: FlagValues) => {
  const driver = flagText(flags, "driver", "T1_SANDBOX_DRIVER") ?? "auto"
  if (!DRIVERS.includes(driver))
    throw new ActorConfigError(
      `--driver must be docker, local, bwrap or auto, got ${JSON.stringify(driver)}`,
    )
  return driver === "local" ? { resolveImage: () => Effect.succeed(BASE_IMAGE) } : {}
}

const options = (flags: FlagValues) => ({
  ...imageOptions(flags),
  defaultMaxConcurrent: flagInt(flags, "max-concurrent", "T1_MAX_CONCURRENT", 16, 1),
  leaseTtlMs: flagInt(flags, "lease-ttl-ms", "T1_LEASE_TTL_MS", 15_000, 100),
  cancelGraceMs: flagInt(flags, "cancel-grace-ms", "T1_CANCEL_GRACE_MS", 60_000),
  episodeTimeoutMs: flagInt(flags, "episode-timeout-ms", "T1_EPISODE_TIMEOUT_MS", 3 * 60 * 60_000),
})

/** `t1 actor coordinator`: runs jobs from the job store (any number of replicas, one per job). */
export const coordinatorActor: HostedActor = {
  summary:
    "turns jobs into episode work items on <prefix>.episodes: staleness-bounded admission, infra retries, job status and events, evaluation (pass@k)",
  flags: {
    "max-concurrent": { type: "string" },
    "lease-ttl-ms": { type: "string" },
    "cancel-grace-ms": { type: "string" },
    "episode-timeout-ms": { type: "string" },
    driver: { type: "string" },
  },
  flagsHelp: coordinatorFlagsHelp,
  run: ({ subjects }, flags) =>
    runCoordinator({ subjects, ...options(flags) }).pipe(
      Effect.mapError((e) => ({ message: e.message })),
    ),
}

// The surface other folders use.
export { type JobLease, readLease, tryAcquireLease } from "./lease.ts"
export { selectTasks, taskDirs } from "./plan.ts"
export { episodeWorkItem } from "./work-item.ts"
