/**
 * The one place an EpisodeWorkItem is made: the coordinator's plan issues them for jobs, and the
 * paths that run episodes outside a job (golden transcripts for SFT, the recipe's batches, the
 * alignment experiment) describe theirs with the same fields and get the same message.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf"
import {
  type EpisodePurpose,
  type EpisodeWorkItem,
  EpisodeWorkItemSchema,
  type Task,
} from "../../proto/index.ts"

type Init<S extends Parameters<typeof create>[0]> = MessageInitShape<S>
type WorkItemInit = Init<typeof EpisodeWorkItemSchema>

export interface EpisodeWork {
  readonly jobId: string
  readonly episodeId: string
  readonly attempt?: number
  /** The task's wire form; its set and id become the item's task_ref. */
  readonly task?: Task
  readonly sampling?: WorkItemInit["sampling"]
  readonly limits?: WorkItemInit["limits"]
  readonly purpose: EpisodePurpose
  /** The policy version current when the episode was admitted (staleness is counted from it). */
  readonly admittedPolicyVersion?: bigint
  /** The episode's group (samples of one task compared with each other), when it has one. */
  readonly group?: { readonly id: string; readonly sampleIndex: number; readonly size: number }
  /** Which weights sample it; empty: the job's latest. */
  readonly policyRef?: string
  readonly admittedAtMs: number
}

export const episodeWorkItem = (work: EpisodeWork): EpisodeWorkItem =>
  create(EpisodeWorkItemSchema, {
    jobId: work.jobId,
    episodeId: work.episodeId,
    attempt: work.attempt ?? 0,
    ...(work.task
      ? { task: work.task, taskRef: { taskSet: work.task.taskSet, taskId: work.task.id } }
      : {}),
    ...(work.sampling ? { sampling: work.sampling } : {}),
    ...(work.limits ? { limits: work.limits } : {}),
    admittedPolicyVersion: work.admittedPolicyVersion ?? 0n,
    ...(work.group
      ? { groupId: work.group.id, sampleIndex: work.group.sampleIndex, groupSize: work.group.size }
      : {}),
    purpose: work.purpose,
    admittedUnixMs: BigInt(work.admittedAtMs),
    policyRef: work.policyRef ?? "",
  })
