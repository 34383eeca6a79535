/**
 * Engine replicas hold one policy at a time. A sampler whose replicas follow train jobs without
 * a fixed `--job` (`t1 serve --policy sglang|vllm`) binds them to the first train job whose
 * episode it sees: the engine bridge then loads that job's versions. A second train job that
 * arrives while the bound one is still running is refused: it is failed with
 * FAILED_PRECONDITION (naming the bound job) and its episodes are dropped unrun, because the
 * shared work queue cannot hold them back and running them would sample one job's episodes with
 * another job's weights. Once the bound job has ended, the next train job binds the replicas.
 * Eval and rollout episodes run on whatever the replicas hold; their turns carry its version.
 */
import { Effect, Fiber, type Scope, Semaphore } from "effect"
import { EpisodePurpose, type EpisodeWorkItem, ErrorCode, JobState } from "../../proto/index.ts"
import { isTerminalState, type JobStoreShape } from "../../services/jobs/index.ts"

export interface TrainBindingOptions {
  readonly store: Pick<JobStoreShape, "find" | "transition">
  /** What the replicas are, for the refusal's message (their URLs). */
  readonly replicas: ReadonlyArray<string>
  /** Follows `job`'s weights into the replicas until interrupted (the engine bridge). */
  readonly follow: (job: string) => Effect.Effect<unknown, unknown, Scope.Scope>
}

export interface TrainBinding {
  /** Whether the item's episode may run here; a refused item is settled without running. */
  readonly admit: (item: EpisodeWorkItem) => Effect.Effect<boolean>
  /** The train job the replicas follow now, if any. */
  readonly bound: () => string | undefined
}

export const refusalMessage = (job: string, bound: string, replicas: ReadonlyArray<string>) =>
  `train job ${job} refused: the engine replicas (${replicas.join(", ")}) serve train job ${bound}'s policy and hold one policy at a time; submit ${job} again once ${bound} has ended`

export const trainBinding = (
  o: TrainBindingOptions,
): Effect.Effect<TrainBinding, never, Scope.Scope> =>
  Effect.gen(function* () {
    const outer = yield* Effect.scope
    const lock = yield* Semaphore.make(1)
    let current: { readonly job: string; readonly fiber: Fiber.Fiber<unknown, unknown> } | undefined

    const ended = (job: string) =>
      o.store.find(job).pipe(
        Effect.map((found) => found._tag === "None" || isTerminalState(found.value.state)),
        // A store that cannot be read says nothing about the job: keep the binding.
        Effect.catch(() => Effect.succeed(false)),
      )

    const bind = (job: string) =>
      Effect.gen(function* () {
        if (current !== undefined) yield* Fiber.interrupt(current.fiber)
        const fiber = yield* Effect.scoped(o.follow(job)).pipe(
          Effect.catch((e) =>
            Effect.logError(`sampler: the engine bridge of job ${job} stopped: ${String(e)}`),
          ),
          Effect.forkIn(outer),
        )
        current = { job, fiber }
        yield* Effect.logInfo(`sampler: the engine replicas follow train job ${job}'s weights`)
      })

    const refuse = (job: string, bound: string) =>
      Effect.gen(function* () {
        const message = refusalMessage(job, bound, o.replicas)
        yield* o.store
          .transition(job, JobState.FAILED, {
            error: { code: ErrorCode.FAILED_PRECONDITION, message, retryable: true },
          })
          .pipe(
            Effect.flatMap((r) =>
              r.event === undefined ? Effect.void : Effect.logWarning(`sampler: ${message}`),
            ),
            Effect.catchTag("JobTerminal", () => Effect.void),
            // Its episodes are dropped all the same: running them would mix two jobs' weights.
            Effect.catch((e) =>
              Effect.logError(
                `sampler: ${message}; but the job could not be failed (${String(e)}), so it waits for episodes that will not run`,
              ),
            ),
          )
      })

    const admit = (item: EpisodeWorkItem): Effect.Effect<boolean> =>
      item.purpose !== EpisodePurpose.TRAIN
        ? Effect.succeed(true)
        : lock.withPermit(
            Effect.gen(function* () {
              const job = item.jobId
              if (current?.job === job) return true
              if (current !== undefined && !(yield* ended(current.job))) {
                yield* refuse(job, current.job)
                return false
              }
              yield* bind(job)
              return true
            }),
          )

    return { admit, bound: () => current?.job }
  })
