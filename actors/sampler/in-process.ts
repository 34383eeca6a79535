import { Effect } from "effect"
import type { ChatFormat } from "../../model/index.ts"
import type { EpisodeEnd, EpisodeWorkItem } from "../../proto/index.ts"
import type { BusShape, Subjects } from "../../services/bus/index.ts"
import type { ActionFormat } from "./actions/index.ts"
import { busPorts } from "./bus-ports.ts"
import { type EpisodeInfraError, EpisodePorts, runEpisode } from "./episode.ts"
import { PolicyBackend, type PolicyBackendShape } from "./policy/backend.ts"

/**
 * Runs one work item (attempt 0) in this process with the bus ports a sampler actor would use,
 * for tools that drive episodes themselves (golden trajectories, experiments) instead of going
 * through the work queue.
 */
export const runEpisodeHere = (
  bus: BusShape,
  subjects: Subjects,
  item: EpisodeWorkItem,
  agent: {
    readonly policy: PolicyBackendShape
    readonly template: ChatFormat
    readonly format: ActionFormat
  },
): Effect.Effect<EpisodeEnd, EpisodeInfraError> =>
  runEpisode(item, 0).pipe(
    Effect.provideService(EpisodePorts, {
      ...busPorts(bus, subjects, { jobId: item.jobId, episodeId: item.episodeId, attempt: 0 }),
      template: agent.template,
      format: agent.format,
    }),
    Effect.provideService(PolicyBackend, agent.policy),
  )
