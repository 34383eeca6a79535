import { Data, Effect } from "effect"
import {
  EpisodePurpose,
  type EpisodeWorkItem,
  JobKind,
  type JobSpec,
  type Task as TaskMessage,
  TaskSplit,
} from "../../proto/index.ts"
import { jobSchedule } from "../../services/jobs/index.ts"
import { loadTasks, type Task } from "../../tasks/index.ts"
import { taskToWire } from "../../tasks/wire.ts"
import { episodeWorkItem } from "./work-item.ts"

export type JobKindName = "train" | "eval" | "rollout" | "sft"

/** Kinds whose learner publishes the job's weights (the coordinator follows its announcements). */
export const learnsWeights = (kind: JobKindName): boolean => kind === "train" || kind === "sft"

/** The spec cannot be run as it is (FAILED with ERROR_CODE_INVALID_ARGUMENT). */
export class JobSpecInvalid extends Data.TaggedError("JobSpecInvalid")<{
  readonly fieldPath: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.fieldPath}: ${this.reason}`
  }
}

/** The job's tasks could not be loaded or made ready (FAILED with ERROR_CODE_UNAVAILABLE). */
export class JobTasksUnavailable extends Data.TaggedError("JobTasksUnavailable")<{
  readonly reason: string
}> {
  override get message(): string {
    return `tasks: ${this.reason}`
  }
}

/** Defaults for the spec's zero fields ("0 means the default"). */
export interface PlanDefaults {
  readonly maxConcurrent: number
}

/** What the coordinator needs to know about a job, from its spec. */
export interface JobPlan {
  readonly jobId: string
  readonly kind: JobKindName
  readonly purpose: EpisodePurpose
  /** k: rollouts per task per round (the group size). */
  readonly groupSize: number
  readonly taskCount: number
  /** Episodes the job runs; undefined for training, which runs rounds until the learner is done. */
  readonly total: number | undefined
  /** Runs of one episode allowed before it counts as failed. */
  readonly maxAttempts: number
  readonly maxConcurrent: number
  /** η, for staleness-bounded admission (train). */
  readonly maxStaleness: number
  /** Trajectories per learner step (train). */
  readonly batchSize: number
  /** The learner step whose weights end a train job; undefined: runs until cancelled. */
  readonly targetStep: number | undefined
}

/** Attempts of an episode when the spec sets none (max_episode_attempts 0). */
const DEFAULT_MAX_ATTEMPTS = 3

export const kindOf = (spec: JobSpec): Effect.Effect<JobKindName, JobSpecInvalid> => {
  switch (spec.kind) {
    case JobKind.TRAIN:
      return Effect.succeed("train")
    case JobKind.EVAL:
      return Effect.succeed("eval")
    case JobKind.ROLLOUT:
      return Effect.succeed("rollout")
    case JobKind.SFT:
      return Effect.succeed("sft")
    default:
      return Effect.fail(new JobSpecInvalid({ fieldPath: "spec.kind", reason: "unspecified" }))
  }
}

const PURPOSE: Record<JobKindName, EpisodePurpose> = {
  train: EpisodePurpose.TRAIN,
  eval: EpisodePurpose.EVAL,
  rollout: EpisodePurpose.ROLLOUT,
  // The warm start's golden episodes are the learner's; the coordinator issues none.
  sft: EpisodePurpose.TRAIN,
}

export const planOf = (
  jobId: string,
  spec: JobSpec,
  kind: JobKindName,
  taskCount: number,
  defaults: PlanDefaults,
): JobPlan => {
  const groupSize = Math.max(1, spec.samplesPerTask)
  const learner = jobSchedule(spec)
  return {
    jobId,
    kind,
    purpose: PURPOSE[kind],
    groupSize,
    taskCount,
    // Training runs rounds until its learner is done; SFT runs none (its learner plays the
    // golden episodes) and ends at its learner's one announcement.
    total: learnsWeights(kind) ? undefined : taskCount * groupSize,
    maxAttempts: spec.maxEpisodeAttempts || DEFAULT_MAX_ATTEMPTS,
    maxConcurrent: spec.maxConcurrentEpisodes || defaults.maxConcurrent,
    // The learner's own reading of the spec: its defaults are applied in one place.
    maxStaleness: learner.maxStaleness,
    batchSize: learner.batchSize,
    // The learner counts critic warm-up updates and PPO updates as steps (SFT runs before it).
    // An SFT job's budget is 0: it ends at the announcement of its warm start.
    targetStep: learnsWeights(kind) ? learner.maxSteps : undefined,
  }
}

// ---- episode identity ------------------------------------------------------------------------

/**
 * Episodes of a job are numbered 0, 1, 2, … in admission order; episode i is sample
 * i mod k of the (⌊i / k⌋ mod T)-th task of round ⌊i / (T·k)⌋ (T tasks, k samples per task), so
 * the whole plan is the number of episodes admitted so far.
 */
export const episodeId = (jobId: string, index: number): string => `${jobId}-e${index}`

/** The index of one of this job's episode ids, or undefined for anything else. */
export const episodeIndex = (jobId: string, id: string): number | undefined => {
  const prefix = `${jobId}-e`
  if (!id.startsWith(prefix)) return undefined
  const rest = id.slice(prefix.length)
  if (!/^(0|[1-9][0-9]*)$/.test(rest)) return undefined
  const n = Number(rest)
  return Number.isSafeInteger(n) ? n : undefined
}

/** Nats-Msg-Id of a work item: a re-published attempt is stored once. */
export const workItemMsgId = (jobId: string, index: number, attempt: number): string =>
  `${jobId}:${episodeId(jobId, index)}:${attempt}`

export const groupId = (jobId: string, taskId: string, round: number): string =>
  `${jobId}:${taskId}:${round}`

/** splitmix64's finaliser, folded to 32 bits: well-mixed seeds from (job seed, round). */
const splitmix32 = (x: bigint): number => {
  let z = x & 0xffffffffffffffffn
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn
  z ^= z >> 31n
  return Number((z ^ (z >> 32n)) & 0xffffffffn)
}

/** A small seeded generator (mulberry32) for the task order of a round. */
const mulberry32 = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * Task order of a round: the listed order for eval and rollout jobs; for training a seeded
 * shuffle per round, so that consecutive rounds (and so batches) mix tasks differently.
 */
export const roundOrder = (
  kind: JobKindName,
  taskCount: number,
  seed: bigint,
  round: number,
): number[] => {
  const order = Array.from({ length: taskCount }, (_, i) => i)
  if (kind !== "train") return order
  const next = mulberry32(splitmix32(seed + BigInt(round) * 0x9e3779b97f4a7c15n))
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1))
    const t = order[i] as number
    order[i] = order[j] as number
    order[j] = t
  }
  return order
}

export interface EpisodeSlot {
  readonly round: number
  readonly taskIndex: number
  readonly sampleIndex: number
}

export const slotOf = (
  plan: Pick<JobPlan, "kind" | "taskCount" | "groupSize">,
  seed: bigint,
  index: number,
): EpisodeSlot => {
  const perRound = plan.taskCount * plan.groupSize
  const round = Math.floor(index / perRound)
  const within = index % perRound
  const position = Math.floor(within / plan.groupSize)
  const taskIndex = roundOrder(plan.kind, plan.taskCount, seed, round)[position] ?? position
  return { round, taskIndex, sampleIndex: within % plan.groupSize }
}

// ---- tasks ----------------------------------------------------------------------------------

/** A job's task, ready for the wire; `key` (`<task set>/<id>`) names it in the job's ledger. */
export interface JobTask {
  readonly key: string
  readonly wire: TaskMessage
}

export const taskKey = (task: { readonly taskSet: string; readonly id: string }): string =>
  `${task.taskSet}/${task.id}`

/** `task_set` is a comma-separated list of task directories (or directories of tasks). */
export const taskDirs = (spec: JobSpec): string[] =>
  spec.taskSet
    .split(",")
    .map((d) => d.trim())
    .filter((d) => d !== "")

const SPLIT_NAME: Record<TaskSplit, Task["split"] | undefined> = {
  [TaskSplit.UNSPECIFIED]: undefined,
  [TaskSplit.TRAIN]: "train",
  [TaskSplit.EVAL]: "eval",
}

/** The spec's tasks out of what was loaded: its task_ids in order, else the split's, by key. */
export const selectTasks = (
  loaded: ReadonlyArray<Task>,
  spec: JobSpec,
): Effect.Effect<ReadonlyArray<Task>, JobSpecInvalid> => {
  const byKey = new Map<string, Task>()
  for (const t of loaded) if (!byKey.has(taskKey(t))) byKey.set(taskKey(t), t)
  const unique = [...byKey.values()].sort((a, b) =>
    taskKey(a) < taskKey(b) ? -1 : taskKey(a) > taskKey(b) ? 1 : 0,
  )
  if (spec.taskIds.length > 0) {
    const chosen: Task[] = []
    for (const [i, id] of spec.taskIds.entries()) {
      const task = unique.find((t) => t.id === id || taskKey(t) === id)
      if (task === undefined)
        return Effect.fail(
          new JobSpecInvalid({
            fieldPath: `spec.task_ids[${i}]`,
            reason: `no task ${JSON.stringify(id)} in ${spec.taskSet}`,
          }),
        )
      if (!chosen.includes(task)) chosen.push(task)
    }
    return Effect.succeed(chosen)
  }
  const split = SPLIT_NAME[spec.split]
  const chosen = split === undefined ? unique : unique.filter((t) => t.split === split)
  if (chosen.length === 0)
    return Effect.fail(
      new JobSpecInvalid({
        fieldPath: split === undefined ? "spec.task_set" : "spec.split",
        reason: `no ${split === undefined ? "" : `${split} `}tasks in ${JSON.stringify(spec.taskSet)}`,
      }),
    )
  return Effect.succeed(chosen)
}

/** Which image a task's sandbox runs (resolveTaskImage by default; injectable for tests). */
export type ResolveImage = (task: Task) => Effect.Effect<string, unknown>

/** Loads, selects and wires a job's tasks (images resolved once per task). */
export const loadJobTasks = (
  spec: JobSpec,
  resolveImage: ResolveImage,
): Effect.Effect<ReadonlyArray<JobTask>, JobSpecInvalid | JobTasksUnavailable> =>
  Effect.gen(function* () {
    const dirs = taskDirs(spec)
    if (dirs.length === 0)
      return yield* new JobSpecInvalid({ fieldPath: "spec.task_set", reason: "empty" })
    const loaded = yield* loadTasks(dirs).pipe(
      Effect.mapError((e) => new JobTasksUnavailable({ reason: e.message })),
    )
    const chosen = yield* selectTasks(loaded, spec)
    return yield* Effect.forEach(chosen, (task) =>
      Effect.gen(function* () {
        const image = yield* resolveImage(task)
        const wire = yield* taskToWire(task, image)
        return { key: taskKey(task), wire }
      }).pipe(
        Effect.mapError(
          (e) =>
            new JobTasksUnavailable({
              reason: `${taskKey(task)}: ${e instanceof Error ? e.message : String(e)}`,
            }),
        ),
      ),
    )
  })

// ---- work items -----------------------------------------------------------------------------

const U64 = 0xffffffffffffffffn

export interface IssueInput {
  readonly index: number
  readonly attempt: number
  readonly issuedAtMs: number
  readonly admittedVersion: bigint
}

/** The work item of one attempt of an episode. */
export const workItemOf = (
  plan: JobPlan,
  spec: JobSpec,
  seed: bigint,
  tasks: ReadonlyArray<JobTask>,
  issue: IssueInput,
): EpisodeWorkItem => {
  const slot = slotOf(plan, seed, issue.index)
  const task = tasks[slot.taskIndex]?.wire
  const sampling = spec.sampling
  return episodeWorkItem({
    jobId: plan.jobId,
    episodeId: episodeId(plan.jobId, issue.index),
    attempt: issue.attempt,
    ...(task ? { task } : {}),
    ...(sampling
      ? {
          sampling: {
            ...sampling,
            // The k samples of a group must differ: each episode (and attempt) draws its own.
            ...(sampling.seed === undefined
              ? {}
              : {
                  seed:
                    (sampling.seed +
                      BigInt(issue.index) * 0x9e3779b97f4a7c15n +
                      BigInt(issue.attempt)) &
                    U64,
                }),
          },
        }
      : {}),
    ...(spec.limits ? { limits: spec.limits } : {}),
    admittedPolicyVersion: issue.admittedVersion,
    group: {
      id: groupId(plan.jobId, task?.id ?? `task${slot.taskIndex}`, slot.round),
      sampleIndex: slot.sampleIndex,
      size: plan.groupSize,
    },
    purpose: plan.purpose,
    admittedAtMs: issue.issuedAtMs,
    // Training samples with the job's latest announced weights; the others with the spec's.
    policyRef: plan.kind === "train" ? "" : spec.policyRef,
  })
}
