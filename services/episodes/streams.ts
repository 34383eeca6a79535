import { Effect } from "effect"
import type { BusShape, Subjects } from "../bus/index.ts"

/** How long an un-acked episode stays with one sampler before redelivery (heartbeats extend it). */
export const EPISODE_ACK_WAIT_MS = 60_000
export const EPISODE_MAX_DELIVER = 5
/** The shared consumer: episodes of no stored job (batches run by in-process drivers). */
export const SAMPLER_DURABLE = "sampler"

/**
 * A stored job's episodes have a subject and a consumer of their own, so a sampler can take one
 * job's episodes only (`t1 actor sampler --job A`) and leave the others' where they are. A
 * work-queue stream delivers each message to one consumer and refuses consumers whose filters
 * overlap, so the shared consumer takes `<prefix>.episodes` alone, each job's `sampler-<job>`
 * takes `<prefix>.episodes.job.<job>`, and a sampler serving every job pulls from all of them.
 */
export const jobEpisodesSubject = (subjects: Subjects, job: string) =>
  `${subjects.episodes}.job.${job}`

export const jobSamplerDurable = (job: string) => `${SAMPLER_DURABLE}-${job}`

const consumer = (durable: string, filterSubject: string, subjects: Subjects) => ({
  stream: subjects.episodesStream,
  durable,
  filterSubject,
  ackWaitMs: EPISODE_ACK_WAIT_MS,
  maxDeliver: EPISODE_MAX_DELIVER,
})

/** The work queue of episodes and the stream of trajectories, created if missing (idempotent). */
export const ensureSamplerStreams = (bus: BusShape, subjects: Subjects) =>
  Effect.gen(function* () {
    yield* bus.ensureStream({
      name: subjects.episodesStream,
      subjects: [subjects.episodes, jobEpisodesSubject(subjects, "*")],
      retention: "workqueue",
      storage: "file",
      duplicateWindowMs: 10 * 60_000,
    })
    yield* bus.ensureStream({
      name: subjects.trajectoriesStream,
      subjects: [subjects.allTrajectories],
      retention: "limits",
      storage: "file",
      duplicateWindowMs: 10 * 60_000,
    })
    yield* bus.ensureConsumer(consumer(SAMPLER_DURABLE, subjects.episodes, subjects))
  })

/** The consumer of one job's episodes (idempotent; the coordinator and the samplers call it). */
export const ensureJobEpisodes = (bus: BusShape, subjects: Subjects, job: string) =>
  bus.ensureConsumer(consumer(jobSamplerDurable(job), jobEpisodesSubject(subjects, job), subjects))
