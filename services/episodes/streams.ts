import { Effect } from "effect"
import type { BusShape, Subjects } from "../bus/index.ts"

/** How long an un-acked episode stays with one sampler before redelivery (heartbeats extend it). */
export const EPISODE_ACK_WAIT_MS = 60_000
export const EPISODE_MAX_DELIVER = 5
export const SAMPLER_DURABLE = "sampler"

/** The work queue of episodes and the stream of trajectories, created if missing (idempotent). */
export const ensureSamplerStreams = (bus: BusShape, subjects: Subjects) =>
  Effect.gen(function* () {
    yield* bus.ensureStream({
      name: subjects.episodesStream,
      subjects: [subjects.episodes],
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
    yield* bus.ensureConsumer({
      stream: subjects.episodesStream,
      durable: SAMPLER_DURABLE,
      ackWaitMs: EPISODE_ACK_WAIT_MS,
      maxDeliver: EPISODE_MAX_DELIVER,
    })
  })
