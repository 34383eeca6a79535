import { readFile } from "node:fs/promises"
import { Clock, Effect } from "effect"
import type { ChatTemplate } from "../../model/index.ts"
import { EpisodePurpose, type Task as TaskMessage, type Trajectory } from "../../proto/index.ts"
import type { MalformedMessage } from "../../services/actor/index.ts"
import type { BusError, BusShape, Subjects } from "../../services/bus/index.ts"
import type { Task } from "../../tasks/index.ts"
import type { TaskWireError } from "../../tasks/wire.ts"
import type { TrajectoryCorrupt } from "../buffer/index.ts"
import { collectTrajectories } from "../buffer/index.ts"
import { episodeWorkItem } from "../coordinator/index.ts"
import type { ActionFormat, EpisodeInfraError } from "../sampler/index.ts"
import { runEpisodeHere, scriptedPolicy } from "../sampler/index.ts"
import { type ResolveTaskImageError, resolvedWireTask } from "../sandbox/index.ts"

/** Why a task has no wire form here: its image cannot be resolved, or its files not packed. */
export type GoldenToWireError = ResolveTaskImageError | TaskWireError

/** Why golden transcripts could not be made: a task's wire form, an episode's infrastructure, the bus. */
export type GoldenError =
  | GoldenToWireError
  | EpisodeInfraError
  | BusError
  | MalformedMessage
  | TrajectoryCorrupt

/**
 * Golden trajectories for the SFT warm start: each task's reference solution played as agent
 * turns (the oracle agent) through the real episode loop — sandbox, observations, verifier — so
 * the transcripts are built by the same TITO builder as the policy's own rollouts. Only episodes
 * the verifier resolves are kept.
 */
export const goldenTrajectories = (
  bus: BusShape,
  subjects: Subjects,
  tasks: ReadonlyArray<Task>,
  template: ChatTemplate,
  format: ActionFormat,
  options: {
    readonly job?: string
    readonly concurrency?: number
    /** A task's wire form; default resolvedWireTask (its image on this machine's engine). */
    readonly toWire?: (task: Task) => Effect.Effect<TaskMessage, GoldenToWireError>
  } = {},
): Effect.Effect<{ trajectories: Trajectory[]; skipped: string[] }, GoldenError> =>
  Effect.gen(function* () {
    const job = options.job ?? `golden-${(yield* Clock.currentTimeMillis).toString(36)}`
    const withSolutions = tasks.filter((t) => t.solution !== undefined)
    const scripts = new Map<string, ReadonlyArray<string>>()
    for (const task of withSolutions) {
      scripts.set(
        `${job}:${task.id}:0`,
        format.renderSolution(
          yield* Effect.promise(() => readFile(task.solution as string, "utf8")),
        ),
      )
    }
    const policy = scriptedPolicy(template.tokenizer, (session) => scripts.get(session) ?? [])
    const ends = yield* Effect.forEach(
      withSolutions,
      (task) =>
        Effect.gen(function* () {
          const wire = yield* (options.toWire ?? resolvedWireTask)(task)
          const item = episodeWorkItem({
            jobId: job,
            episodeId: task.id,
            task: wire,
            sampling: { temperature: 1, topP: 1, maxTokens: 4096 },
            limits: { maxTurns: 64, maxTokens: 16_384, commandTimeoutMs: 60_000 },
            purpose: EpisodePurpose.ROLLOUT,
            admittedAtMs: yield* Clock.currentTimeMillis,
          })
          return yield* runEpisodeHere(bus, subjects, item, { policy, template, format })
        }),
      { concurrency: options.concurrency ?? 4 },
    )
    // In task order: the episodes end in any order, and SFT draws its batches by index, so a
    // seeded warm start is the same run after run.
    const all = (yield* collectTrajectories(bus, subjects, job, ends.length)).sort((a, b) =>
      a.episodeId < b.episodeId ? -1 : a.episodeId > b.episodeId ? 1 : 0,
    )
    const trajectories = all.filter((t) => t.end?.resolved === true)
    const skipped = all.filter((t) => t.end?.resolved !== true).map((t) => t.episodeId)
    return { trajectories, skipped }
  })
