/**
 * What a job left behind, checked against itself: its event log (through the gateway), the end
 * records on the trajectory stream, and the episodes its learner trained on. Nothing may be
 * lost (every finished episode has its end record, every counted episode was run) and nothing
 * counted twice (one finished event per episode, each trajectory trained at most once).
 */
import { fromBinary } from "@bufbuild/protobuf"
import { jetstream } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { RUNS_PER_ATTEMPT } from "../../actors/coordinator/index.ts"
import {
  type EpisodeEnd,
  type JobEvent,
  JobState,
  type JobStatus,
  TrajectoryRecordSchema,
} from "../../proto/index.ts"
import { subjectsFor } from "../../services/bus/index.ts"

export interface Audit {
  readonly state: string
  /** Episodes the coordinator admitted (work items, first attempts). */
  readonly admitted: number
  /** Re-issued attempts after infra failures. */
  readonly retried: number
  /** Episodes with a final outcome in the event log. */
  readonly finished: number
  /** Distinct episodes with an end record on the trajectory stream. */
  readonly ended: number
  /** Trajectories the learner trained on (its final updates). */
  readonly trained: number
  readonly steps: number
  /** Every way the job lost or double-counted something; empty when it did neither. */
  readonly problems: ReadonlyArray<string>
}

/** The job's end records on `<prefix>.traj.<job>`, read with an ordered consumer. */
export const endRecords = async (
  natsUrl: string,
  prefix: string,
  jobId: string,
): Promise<EpisodeEnd[]> => {
  const subjects = subjectsFor(prefix)
  const nc = await connect({ servers: natsUrl.split(","), name: "t1-fault-audit" })
  try {
    const js = jetstream(nc)
    const consumer = await js.consumers.get(subjects.trajectoriesStream, {
      // A string, not an array: servers before 2.10 take one filter subject only.
      filter_subjects: subjects.trajectories(jobId),
    })
    const ends: EpisodeEnd[] = []
    for (;;) {
      const batch = await consumer.fetch({ max_messages: 512, expires: 2000 })
      let n = 0
      for await (const m of batch) {
        n++
        const record = fromBinary(TrajectoryRecordSchema, m.data)
        if (record.record.case === "end") ends.push(record.record.value)
      }
      if (n === 0) break
    }
    return ends
  } finally {
    await nc.close()
  }
}

export const auditJob = (
  status: JobStatus,
  events: ReadonlyArray<JobEvent>,
  ends: ReadonlyArray<EpisodeEnd>,
  expectedSteps: number,
): Audit => {
  const problems: string[] = []
  const state = JobState[status.state] ?? String(status.state)
  if (status.state !== JobState.SUCCEEDED) problems.push(`job ended ${state}`)
  events.forEach((e, i) => {
    if (e.seq !== BigInt(i + 1)) problems.push(`event ${i + 1} has seq ${e.seq}`)
  })
  if (events.at(-1)?.seq !== status.lastEventSeq)
    problems.push(`the log ends at ${events.at(-1)?.seq}, the status says ${status.lastEventSeq}`)

  const finished = new Map<string, { attempt: number; reward: number; infra: boolean }>()
  for (const e of events) {
    if (e.event.case !== "episodeFinished") continue
    const f = e.event.value
    if (finished.has(f.episodeId)) problems.push(`episode ${f.episodeId} finished twice`)
    finished.set(f.episodeId, { attempt: f.attempt, reward: f.reward, infra: f.infraFailed })
  }
  const counts = status.counts
  const counted = (counts?.episodesFinished ?? 0) + (counts?.episodesFailed ?? 0)
  if (counted !== finished.size)
    problems.push(`status counts ${counted} episodes, the log ${finished.size}`)

  const endsByEpisode = new Map<string, EpisodeEnd[]>()
  for (const end of ends) {
    const list = endsByEpisode.get(end.episodeId) ?? []
    list.push(end)
    endsByEpisode.set(end.episodeId, list)
  }
  for (const [id, f] of finished) {
    if (f.infra) continue
    // An event's attempt is the work item's; an end record's is the run's (attempt · 256 + delivery).
    const run = endsByEpisode
      .get(id)
      ?.find(
        (end) =>
          Math.floor(end.attempt / RUNS_PER_ATTEMPT) === f.attempt &&
          !end.infraFailed &&
          end.reward === f.reward,
      )
    if (run === undefined)
      problems.push(`episode ${id} counted (reward ${f.reward}) without a matching end record`)
  }

  // A learner restarted from its checkpoint repeats the steps after it: the last report of each
  // step is the one its weights descend from.
  const steps = new Map<bigint, ReadonlyArray<string>>()
  for (const e of events)
    if (e.event.case === "learnerStep") steps.set(e.event.value.step, e.event.value.episodeIds)
  const trained = new Set<string>()
  for (let s = 1; s <= expectedSteps; s++) {
    const ids = steps.get(BigInt(s))
    if (ids === undefined) {
      problems.push(`no report of learner step ${s}`)
      continue
    }
    for (const id of ids) {
      if (trained.has(id)) problems.push(`episode ${id} trained on twice`)
      trained.add(id)
      if (!endsByEpisode.get(id)?.some((end) => !end.infraFailed))
        problems.push(`trained on ${id}, which has no complete run`)
    }
  }
  return {
    state,
    admitted: counts?.episodesTotal ?? 0,
    retried: counts?.episodesInfraRetried ?? 0,
    finished: finished.size,
    ended: endsByEpisode.size,
    trained: trained.size,
    steps: steps.size,
    problems,
  }
}
