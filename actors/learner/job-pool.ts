/**
 * Learner and buffer pools: `t1 actor learner` and `t1 actor buffer` without `--job` serve the
 * train jobs submitted through the gateway. Each job is claimed by one learner and one buffer
 * (leases in KV `<prefix>-learner-leases` and `<prefix>-buffer-leases`); the learner takes its hyperparameters
 * from the job's spec, starts from its policy_ref (or its checkpoint), reports every update as a
 * learner_step job event, and stops at the spec's step budget.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf"
import { Clock, Effect } from "effect"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate, type Kernels } from "../../model/index.ts"
import {
  JobKind,
  type JobStatus,
  type Task as TaskMessage,
  TrainStepReportSchema,
} from "../../proto/index.ts"
import { Bus, type BusError } from "../../services/bus/index.ts"
import { Metrics } from "../../services/metrics/index.ts"
import { resolvePolicyRef } from "../../services/weights/index.ts"
import { loadTasks, type Task } from "../../tasks/index.ts"
import { selectTasks, taskDirs } from "../coordinator/index.ts"
import { type GoldenToWireError, goldenTrajectories } from "../golden/index.ts"
import { type PoolOptions, poolMembership, runJobPool } from "../pool/index.ts"
import { type ActionFormat, shellBlock } from "../sampler/index.ts"
import { runLearner } from "./actor.ts"
import { jobLearnerPlan, sftStepReport, trainStepReport } from "./job-spec.ts"
import { goldenSequences } from "./sft.ts"
import { type PolicyVocabulary, refuseVocabulary } from "./vocab-check.ts"

/** Golden transcripts longer than this are cut for the SFT warm start (attention cost). */
const SFT_MAX_TOKENS = 1536

/**
 * The learner's jobs: training, and the SFT warm start alone; not a job whose learner is an
 * external trainer (learner.external: it claims the same lease through TrainerService).
 */
const learnsJob = (status: JobStatus): boolean =>
  (status.spec?.kind === JobKind.TRAIN || status.spec?.kind === JobKind.SFT) &&
  status.spec.learner?.external !== true

export interface LearnerPoolOptions extends PoolOptions {
  readonly kernels?: Kernels
  readonly checkpointEvery?: number
  readonly batchWaitMs?: number
  /**
   * The action format of the golden transcripts (SFT): the samplers' own, or the policy learns a
   * format it is never asked to use. Default shell-block, the embedded policy's.
   */
  readonly format?: ActionFormat
  /** A golden task's wire form; default its image resolved on this machine's engine. */
  readonly toWire?: (task: Task) => Effect.Effect<TaskMessage, GoldenToWireError>
  /** Golden episodes run at once (default 4). */
  readonly goldenConcurrency?: number
  /**
   * The weights a job without policy_ref starts from (a policy_ref itself; default tinymoe:init):
   * `t1 serve --model-dir` names the model its engines were launched on.
   */
  readonly defaultPolicyRef?: string
  /**
   * The vocabulary of the policy the samplers run (an engine's model: `policyVocabulary(dir)`).
   * A train job whose model has fewer ids is refused when this learner admits it (FAILED, naming
   * both sizes) instead of having every trajectory with a larger id dropped. Unset: the
   * samplers run the job's own model (the embedded TinyMoE), whose ids it always covers.
   */
  readonly policyVocabulary?: PolicyVocabulary
}

/** Trains every train job (and runs every SFT job), one at a time per process by default. */
export const runLearnerPool = (
  o: LearnerPoolOptions,
): Effect.Effect<never, BusError, Bus | Metrics> =>
  Effect.gen(function* () {
    const bus = yield* Bus
    const membership = yield* poolMembership(bus, o, "learner", 1)
    const { store } = membership
    const jobs = (yield* Metrics).gauge({
      name: "t1_learner_jobs",
      help: "Train jobs this learner process is serving",
    })
    // Read once per process: every job's starting weights and TITO-off template use it.
    const tokenizer = loadBundledTokenizer()
    let template: ChatTemplate | undefined
    return yield* runJobPool({
      ...membership,
      wants: learnsJob,
      onRunning: (n) => jobs.set(n),
      run: (job) =>
        Effect.gen(function* () {
          const spec = job.status.spec
          if (spec === undefined) return
          const plan = jobLearnerPlan(spec)
          // Stamped when the event is written (finished_unix_ms), by the Clock.
          const stepEvent = (value: MessageInitShape<typeof TrainStepReportSchema>) =>
            Clock.currentTimeMillis.pipe(
              Effect.flatMap((now) =>
                store.appendEvent(job.jobId, {
                  event: {
                    case: "learnerStep",
                    value: create(TrainStepReportSchema, { ...value, finishedUnixMs: BigInt(now) }),
                  },
                }),
              ),
              Effect.asVoid,
              Effect.catch((e) =>
                Effect.logWarning(`learner: job ${job.jobId}: step event: ${String(e)}`),
              ),
            )
          const initial = yield* resolvePolicyRef(
            bus,
            o.subjects,
            spec.policyRef === "" ? (o.defaultPolicyRef ?? "") : spec.policyRef,
            tokenizer.vocabSize,
            o.kernels,
          )
          if (
            spec.kind === JobKind.TRAIN &&
            (yield* refuseVocabulary(
              store,
              job.jobId,
              o.policyVocabulary,
              initial.model.config.vocabSize,
            ))
          )
            return
          if (!plan.config.tito || plan.config.sftSteps > 0)
            template ??= new ChatTemplate(tokenizer)
          const chat = template
          // sft_steps: the job's tasks' reference solutions played through the sandboxes and the
          // verifier (shell-block actions, the embedded policy's format), resolved ones kept.
          const golden = Effect.gen(function* () {
            if (chat === undefined) return []
            const tasks = yield* selectTasks(yield* loadTasks(taskDirs(spec)), spec)
            const { trajectories, skipped } = yield* goldenTrajectories(
              bus,
              o.subjects,
              tasks,
              chat,
              o.format ?? shellBlock,
              {
                job: `${job.jobId}-golden`,
                ...(o.toWire === undefined ? {} : { toWire: o.toWire }),
                ...(o.goldenConcurrency === undefined ? {} : { concurrency: o.goldenConcurrency }),
              },
            )
            if (skipped.length > 0)
              yield* Effect.logWarning(
                `learner: job ${job.jobId}: ${skipped.length} reference solutions did not resolve their task; not used for SFT`,
              )
            return yield* goldenSequences(
              trajectories,
              Math.min(SFT_MAX_TOKENS, initial.model.config.maxSeqLen),
            )
          })
          yield* runLearner({
            subjects: o.subjects,
            jobId: job.jobId,
            config: plan.config,
            initial: initial.model,
            initialVersion: initial.version,
            batchSize: plan.batchSize,
            maxStaleness: plan.maxStaleness,
            wholeGroups: plan.groupSize > 1,
            groupSize: plan.groupSize,
            // Zero-variance groups are dropped by the trainer, not the buffer: the coordinator's
            // staleness bound counts every scored episode as accepted, so a batch the buffer
            // thinned would wait for episodes that are never admitted.
            dropZeroVarianceGroups: false,
            golden,
            ...(plan.maxSteps === undefined ? {} : { maxSteps: plan.maxSteps }),
            ...(o.checkpointEvery === undefined ? {} : { checkpointEvery: o.checkpointEvery }),
            ...(o.batchWaitMs === undefined ? {} : { batchWaitMs: o.batchWaitMs }),
            ...(o.kernels ? { kernels: o.kernels } : {}),
            ...(plan.config.tito ? {} : { template }),
            onStep: (r) => stepEvent(trainStepReport(job.jobId, r)),
            onSftStep: (r) => stepEvent(sftStepReport(job.jobId, initial.version, r)),
          })
        }),
    })
  })
