import { type MessageInitShape, toBinary } from "@bufbuild/protobuf"
import { Clock, Effect } from "effect"
import {
  type EpisodePurpose,
  EpisodeWorkItemSchema,
  type LimitsSchema,
  type SamplingParamsSchema,
  type Task as TaskMessage,
  type Trajectory,
} from "../../proto/index.ts"
import type { BusShape, Subjects } from "../../services/bus/index.ts"
import { collectTrajectories } from "../buffer/index.ts"
import { episodeWorkItem } from "../coordinator/index.ts"

/** One group of episodes: `samples` runs of one task. */
export interface EpisodeGroup {
  readonly task: TaskMessage
  readonly samples: number
}

export interface EpisodeBatch {
  readonly job: string
  readonly groups: ReadonlyArray<EpisodeGroup>
  readonly purpose: EpisodePurpose
  readonly policyVersion: bigint
  readonly sampling: MessageInitShape<typeof SamplingParamsSchema>
  readonly limits: MessageInitShape<typeof LimitsSchema>
  /** Seeds the samplers' draws: episode n of the batch samples with seed `seedBase + n`. */
  readonly seedBase: number
  /** Makes episode ids unique across batches of one job (e.g. the RL step). */
  readonly tag?: string
}

/**
 * Puts a batch of episodes on the work queue (whole groups, as the buffer batches them) and
 * returns their trajectories once every one has ended: for in-process drivers (`t1 up`, the
 * learning experiment) that admit work themselves. `onDone` sees each trajectory as it lands.
 */
export const runEpisodeBatch = (
  bus: BusShape,
  subjects: Subjects,
  batch: EpisodeBatch,
  onDone?: (t: Trajectory) => void,
): Effect.Effect<Trajectory[], unknown> =>
  Effect.gen(function* () {
    const ids = batch.groups.map((g) => g.task.id)
    const repeated = ids.find((id, i) => ids.indexOf(id) !== i)
    // Episode ids name the task: a second group of it would be dropped as a duplicate work item.
    if (repeated !== undefined)
      return yield* Effect.fail(
        new Error(`task ${repeated} is in the batch twice; give each group its own task`),
      )
    let n = 0
    for (const { task, samples } of batch.groups) {
      const group = `${task.id}${batch.tag === undefined ? "" : `-${batch.tag}`}`
      for (let k = 0; k < samples; k++) {
        const episodeId = `${group}-s${k}`
        const item = episodeWorkItem({
          jobId: batch.job,
          episodeId,
          task,
          sampling: { ...batch.sampling, seed: BigInt(batch.seedBase + n) },
          limits: batch.limits,
          purpose: batch.purpose,
          admittedPolicyVersion: batch.policyVersion,
          group: { id: `${batch.job}:${group}`, sampleIndex: k, size: samples },
          admittedAtMs: yield* Clock.currentTimeMillis,
        })
        yield* bus.jsPublish(subjects.episodes, toBinary(EpisodeWorkItemSchema, item), {
          msgId: `${batch.job}:${episodeId}:0`,
        })
        n++
      }
    }
    return yield* collectTrajectories(bus, subjects, batch.job, n, `batch-${batch.job}`, onDone)
  })
