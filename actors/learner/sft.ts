import { Data, Effect } from "effect"
import { type ChatTemplate, Rng, TinyMoe } from "../../model/index.ts"
import type { Trajectory } from "../../proto/index.ts"
import type { BusShape, Subjects } from "../../services/bus/index.ts"
import type { Task } from "../../tasks/index.ts"
import { type GoldenError, goldenTrajectories } from "../golden/index.ts"
import type { ActionFormat } from "../sampler/index.ts"
import { type TrainingSequence, type TrajectoryMalformed, trainingSequences } from "./decode.ts"
import { DEFAULT_LEARNER_CONFIG, Trainer } from "./trainer.ts"

export interface SftOptions {
  readonly steps: number
  readonly batch: number
  readonly lr: number
  readonly seed: number
  /** Cut golden transcripts to this many tokens (attention cost grows with the square). */
  readonly maxTokens?: number
  readonly onStep?: (step: number, loss: number) => void
}

/**
 * Golden trajectories as training sequences, each cut to `maxTokens` (attention cost grows with
 * the square; a cut sequence loses its routing, which covered the whole of it).
 */
export const goldenSequences = (
  trajectories: ReadonlyArray<Trajectory>,
  maxTokens = Number.POSITIVE_INFINITY,
): Effect.Effect<TrainingSequence[], TrajectoryMalformed> =>
  Effect.map(trainingSequences(trajectories, 0n), (all) =>
    all.map((s) => {
      if (s.ids.length <= maxTokens) return s
      const n = Math.max(2, Math.floor(maxTokens))
      return {
        ...s,
        ids: s.ids.subarray(0, n),
        lossMask: s.lossMask.subarray(0, n),
        logprobs: s.logprobs.subarray(0, n),
        routing: undefined,
      }
    }),
  )

/** None of the tasks' reference solutions was resolved: there is nothing to warm-start on. */
export class NoGoldenTrajectory extends Data.TaggedError("NoGoldenTrajectory")<{
  readonly tasks: number
  readonly skipped: number
}> {
  override get message(): string {
    return `no golden trajectory: none of ${this.tasks} tasks was resolved by its reference solution (${this.skipped} skipped)`
  }
}

/**
 * The SFT warm start: golden trajectories of `tasks` (their reference solutions through the real
 * episode loop), then `steps` supervised updates of a fresh TinyMoE on their generated tokens.
 */
export const sftWarmStart = (
  bus: BusShape,
  subjects: Subjects,
  tasks: ReadonlyArray<Task>,
  template: ChatTemplate,
  format: ActionFormat,
  o: SftOptions,
): Effect.Effect<
  { model: TinyMoe; golden: number; skipped: string[]; losses: number[] },
  GoldenError | NoGoldenTrajectory | TrajectoryMalformed
> =>
  Effect.gen(function* () {
    const { trajectories, skipped } = yield* goldenTrajectories(
      bus,
      subjects,
      tasks,
      template,
      format,
    )
    const sequences = yield* goldenSequences(trajectories, o.maxTokens)
    if (sequences.length === 0)
      return yield* new NoGoldenTrajectory({ tasks: tasks.length, skipped: skipped.length })
    const model = TinyMoe.create({
      config: { vocabSize: template.tokenizer.vocabSize },
      seed: o.seed,
    })
    const trainer = new Trainer(model, {
      ...DEFAULT_LEARNER_CONFIG,
      lr: o.lr,
      sftLr: o.lr,
      replayRouting: false,
    })
    const rng = new Rng(o.seed + 1)
    const losses: number[] = []
    for (let step = 0; step < o.steps; step++) {
      const picked = Array.from(
        { length: Math.min(o.batch, sequences.length) },
        () => sequences[Math.floor(rng.next() * sequences.length)] as (typeof sequences)[number],
      )
      const { loss } = trainer.sftStep(picked)
      losses.push(loss)
      o.onStep?.(step + 1, loss)
      yield* Effect.yieldNow
    }
    return { model, golden: sequences.length, skipped, losses }
  })
