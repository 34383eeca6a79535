/**
 * A job's progress as the coordinator keeps it: which episodes were admitted, which are still
 * open (with their attempt), what finished, and the events not yet known to be published. It is
 * stored with the job's lease (one KV value, compare-and-set), so a restarted or replacing
 * coordinator resumes exactly where the last commit left off. Its size is bounded by the tasks
 * and the episodes running, never by the episodes run: episode i is admitted iff
 * i < nextIndex, and final iff admitted and not open.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Schema } from "effect"
import {
  type EpisodeEnd,
  EpisodeFinishedSchema,
  ErrorCode,
  ErrorDetailSchema,
  EvaluationSummarySchema,
  JobCountsSchema,
  type JobEvent,
  JobEventSchema,
  JobState,
  JobStateChangedSchema,
  type JobStatus,
  JobStatusSchema,
} from "../../proto/index.ts"
import type { JobEventPayload } from "../../services/jobs/index.ts"
import { admissionCapacity } from "./admission.ts"
import { evaluationStats } from "./pass-at-k.ts"
import { episodeId, episodeIndex, type IssueInput, type JobPlan, slotOf } from "./plan.ts"

/**
 * The sampler numbers each run of a work item attempt · 256 + (delivery − 1) (see runAttempt in
 * actors/sampler/actor.ts), so the coordinator's attempt of an end record is attempt / 256.
 */
export const RUNS_PER_ATTEMPT = 256

export type Phase = "running" | "cancelling" | "succeeded" | "failed" | "cancelled"

export const isFinalPhase = (phase: Phase): boolean =>
  phase === "succeeded" || phase === "failed" || phase === "cancelled"

const STATE_OF: Record<Phase, JobState> = {
  running: JobState.RUNNING,
  cancelling: JobState.RUNNING,
  succeeded: JobState.SUCCEEDED,
  failed: JobState.FAILED,
  cancelled: JobState.CANCELLED,
}

export interface OpenEpisode extends IssueInput {}

export interface TaskTally {
  samples: number
  resolved: number
  rewardSum: number
  /** Episodes the verifier could not score (not in samples). */
  unverifiable: number
  /** The packages they reported missing: deduplicated, sorted, at most MAX_MISSING_PER_TASK. */
  missing: string[]
}

/** Missing package names remembered per task (the ledger's size stays bounded by the tasks). */
export const MAX_MISSING_PER_TASK = 16

export interface LedgerError {
  readonly code: ErrorCode
  readonly message: string
}

/** The stored (JSON) form. */
export const LedgerJson = Schema.Struct({
  phase: Schema.Literals(["running", "cancelling", "succeeded", "failed", "cancelled"]),
  taskKeys: Schema.Array(Schema.String),
  groupSize: Schema.Number,
  seed: Schema.String,
  nextIndex: Schema.Number,
  /** [index, attempt, issuedAtMs, admitted policy version]. */
  open: Schema.Array(Schema.Tuple([Schema.Number, Schema.Number, Schema.Number, Schema.String])),
  /** Per task: [scored samples, resolved, reward sum]. */
  tallies: Schema.Array(Schema.Tuple([Schema.Number, Schema.Number, Schema.Number])),
  /**
   * Per task, when any episode was unverifiable: [unverifiable episodes, missing packages].
   * Optional, so that a ledger stored before it existed still reads.
   */
  unverifiableTallies: Schema.optionalKey(
    Schema.Array(Schema.Tuple([Schema.Number, Schema.Array(Schema.String)])),
  ),
  finished: Schema.Number,
  failed: Schema.Number,
  retried: Schema.Number,
  /** Episodes final as unverifiable (optional: absent in ledgers stored before it existed). */
  unverifiable: Schema.optionalKey(Schema.Number),
  resolved: Schema.Number,
  rewardSum: Schema.Number,
  cancelAtMs: Schema.optionalKey(Schema.Number),
  error: Schema.optionalKey(Schema.Struct({ code: Schema.Number, message: Schema.String })),
  /** Events (JobEvent without seq, base64) and the first seq they were given, if any yet. */
  outbox: Schema.Struct({
    seqFrom: Schema.optionalKey(Schema.Number),
    events: Schema.Array(Schema.String),
  }),
})
export type LedgerData = typeof LedgerJson.Type

/** What one step asks of the outside world, and what to count. */
export interface StepEffects {
  /** Work items to publish (new episodes, retries, re-publications after a restart). */
  readonly issue: OpenEpisode[]
  admitted: number
  retried: number
  readonly finished: { resolved: number; unresolved: number; failed: number; unverifiable: number }
  /** The ledger changed and must be committed. */
  changed: boolean
}

export const newEffects = (): StepEffects => ({
  issue: [],
  admitted: 0,
  retried: 0,
  finished: { resolved: 0, unresolved: 0, failed: 0, unverifiable: 0 },
  changed: false,
})

/** What the rest of the system says when a step runs. */
export interface StepContext {
  readonly now: number
  /** The job's status carries a cancel request (its error is the reason). */
  readonly cancelRequested: LedgerError | undefined
  /** Latest learner step announced for the job (train), if any. */
  readonly learnerStep: number | undefined
  /** Latest announced policy version (0 before any). */
  readonly policyVersion: bigint
  readonly cancelGraceMs: number
  /** An open attempt older than this is treated as an infra failure; 0: never. */
  readonly episodeTimeoutMs: number
}

export class JobLedger {
  constructor(
    public phase: Phase,
    readonly taskKeys: ReadonlyArray<string>,
    readonly groupSize: number,
    readonly seed: bigint,
    public nextIndex: number,
    readonly open: Map<number, OpenEpisode>,
    readonly tallies: TaskTally[],
    public finished: number,
    public failed: number,
    public retried: number,
    /** Episodes final as unverifiable: not in finished, resolved or rewardSum. */
    public unverifiable: number,
    public resolved: number,
    public rewardSum: number,
    public cancelAtMs: number | undefined,
    public error: LedgerError | undefined,
    public outbox: { seqFrom: number | undefined; events: JobEvent[] },
  ) {}

  /** A job just admitted: nothing run yet. */
  static start(taskKeys: ReadonlyArray<string>, groupSize: number, seed: bigint): JobLedger {
    return new JobLedger(
      "running",
      taskKeys,
      groupSize,
      seed,
      0,
      new Map(),
      taskKeys.map(() => ({ samples: 0, resolved: 0, rewardSum: 0, unverifiable: 0, missing: [] })),
      0,
      0,
      0,
      0,
      0,
      0,
      undefined,
      undefined,
      { seqFrom: undefined, events: [] },
    )
  }

  static fromData(d: LedgerData): JobLedger {
    return new JobLedger(
      d.phase,
      [...d.taskKeys],
      d.groupSize,
      BigInt(d.seed),
      d.nextIndex,
      new Map(
        d.open.map(([index, attempt, issuedAtMs, v]) => [
          index,
          { index, attempt, issuedAtMs, admittedVersion: BigInt(v) },
        ]),
      ),
      d.tallies.map(([samples, resolved, rewardSum], i) => {
        const [unverifiable, missing] = d.unverifiableTallies?.[i] ?? [0, []]
        return { samples, resolved, rewardSum, unverifiable, missing: [...missing] }
      }),
      d.finished,
      d.failed,
      d.retried,
      d.unverifiable ?? 0,
      d.resolved,
      d.rewardSum,
      d.cancelAtMs,
      d.error === undefined
        ? undefined
        : { code: d.error.code as ErrorCode, message: d.error.message },
      {
        seqFrom: d.outbox.seqFrom,
        events: d.outbox.events.map((b) => fromBinary(JobEventSchema, Buffer.from(b, "base64"))),
      },
    )
  }

  toData(): LedgerData {
    return {
      phase: this.phase,
      taskKeys: [...this.taskKeys],
      groupSize: this.groupSize,
      seed: this.seed.toString(),
      nextIndex: this.nextIndex,
      open: [...this.open.values()]
        .sort((a, b) => a.index - b.index)
        .map((o) => [o.index, o.attempt, o.issuedAtMs, o.admittedVersion.toString()] as const),
      tallies: this.tallies.map((t) => [t.samples, t.resolved, t.rewardSum] as const),
      ...(this.unverifiable === 0
        ? {}
        : {
            unverifiable: this.unverifiable,
            unverifiableTallies: this.tallies.map((t) => [t.unverifiable, [...t.missing]] as const),
          }),
      finished: this.finished,
      failed: this.failed,
      retried: this.retried,
      resolved: this.resolved,
      rewardSum: this.rewardSum,
      ...(this.cancelAtMs === undefined ? {} : { cancelAtMs: this.cancelAtMs }),
      ...(this.error === undefined ? {} : { error: { ...this.error } }),
      outbox: {
        ...(this.outbox.seqFrom === undefined ? {} : { seqFrom: this.outbox.seqFrom }),
        events: this.outbox.events.map((e) =>
          Buffer.from(toBinary(JobEventSchema, e)).toString("base64"),
        ),
      },
    }
  }

  clone(): JobLedger {
    return JobLedger.fromData(this.toData())
  }

  // ---- events ----

  emit(jobId: string, payload: JobEventPayload, now: number, fx: StepEffects): void {
    this.outbox.events.push(
      create(JobEventSchema, { jobId, seq: 0n, unixMs: BigInt(now), event: payload }),
    )
    // New events join the unpublished ones and are numbered together when flushed.
    this.outbox.seqFrom = undefined
    fx.changed = true
  }

  // ---- transitions ----

  /**
   * An episode's end record. The first scored (non-infra) end of an episode counts, whatever
   * its attempt; an infra failure of the current attempt re-issues the episode as attempt + 1
   * (or, after the last allowed attempt, counts it failed). An unverifiable end (the tests need
   * packages the sandbox lacks) is final like a scored one, whatever its attempt, but never
   * retried and counted apart: in no rate, mean or pass@k. Anything else is a duplicate, a
   * stale attempt or not this job's, and changes nothing.
   */
  recordEnd(plan: JobPlan, end: EpisodeEnd, now: number, fx: StepEffects): boolean {
    if (isFinalPhase(this.phase) || end.jobId !== plan.jobId) return false
    const index = episodeIndex(plan.jobId, end.episodeId)
    const open = index === undefined ? undefined : this.open.get(index)
    if (open === undefined) return false
    const attempt = Math.floor(end.attempt / RUNS_PER_ATTEMPT)
    if (end.infraFailed) {
      if (attempt < open.attempt) return false
      this.failAttempt(plan, open, now, fx)
      return true
    }
    if (end.unverifiable) {
      this.recordUnverifiable(plan, open, end, attempt, now, fx)
      return true
    }
    this.open.delete(open.index)
    this.finished += 1
    this.rewardSum += end.reward
    if (end.resolved) this.resolved += 1
    const slot = slotOf(plan, this.seed, open.index)
    const tally = this.tallies[slot.taskIndex]
    if (tally !== undefined) {
      tally.samples += 1
      tally.rewardSum += end.reward
      if (end.resolved) tally.resolved += 1
    }
    if (end.resolved) fx.finished.resolved += 1
    else fx.finished.unresolved += 1
    this.emit(
      plan.jobId,
      {
        case: "episodeFinished",
        value: create(EpisodeFinishedSchema, {
          episodeId: end.episodeId,
          reward: end.reward,
          resolved: end.resolved,
          taskId: end.task?.taskId || this.taskIdOf(slot.taskIndex),
          attempt,
          turns: end.turns,
          testsPassed: end.testsPassed,
          testsTotal: end.testsTotal,
        }),
      },
      now,
      fx,
    )
    return true
  }

  /** The episode is final and excluded: no score exists, and a rerun would find the same. */
  private recordUnverifiable(
    plan: JobPlan,
    open: OpenEpisode,
    end: EpisodeEnd,
    attempt: number,
    now: number,
    fx: StepEffects,
  ): void {
    this.open.delete(open.index)
    this.unverifiable += 1
    fx.finished.unverifiable += 1
    const slot = slotOf(plan, this.seed, open.index)
    const tally = this.tallies[slot.taskIndex]
    if (tally !== undefined) {
      tally.unverifiable += 1
      tally.missing = [...new Set([...tally.missing, ...end.missingPackages])]
        .sort()
        .slice(0, MAX_MISSING_PER_TASK)
    }
    this.emit(
      plan.jobId,
      {
        case: "episodeFinished",
        value: create(EpisodeFinishedSchema, {
          episodeId: end.episodeId,
          taskId: end.task?.taskId || this.taskIdOf(slot.taskIndex),
          attempt,
          turns: end.turns,
          unverifiable: true,
          missingPackages: end.missingPackages.slice(0, MAX_MISSING_PER_TASK),
        }),
      },
      now,
      fx,
    )
  }

  private taskIdOf(taskIndex: number): string {
    const key = this.taskKeys[taskIndex] ?? ""
    return key.slice(key.indexOf("/") + 1)
  }

  /** The current attempt of an open episode failed for infrastructure reasons. */
  private failAttempt(plan: JobPlan, open: OpenEpisode, now: number, fx: StepEffects): void {
    if (this.phase === "running" && open.attempt + 1 < plan.maxAttempts) {
      const next: OpenEpisode = { ...open, attempt: open.attempt + 1, issuedAtMs: now }
      this.open.set(open.index, next)
      this.retried += 1
      fx.retried += 1
      fx.issue.push(next)
      fx.changed = true
      return
    }
    this.open.delete(open.index)
    this.failed += 1
    fx.finished.failed += 1
    this.emit(
      plan.jobId,
      {
        case: "episodeFinished",
        value: create(EpisodeFinishedSchema, {
          episodeId: episodeId(plan.jobId, open.index),
          taskId: this.taskIdOf(slotOf(plan, this.seed, open.index).taskIndex),
          attempt: open.attempt,
          infraFailed: true,
        }),
      },
      now,
      fx,
    )
  }

  /** Attempts with no end record for too long (e.g. their work item was dropped). */
  expireOverdue(plan: JobPlan, now: number, timeoutMs: number, fx: StepEffects): void {
    if (timeoutMs <= 0) return
    for (const open of [...this.open.values()])
      if (now - open.issuedAtMs > timeoutMs) this.failAttempt(plan, open, now, fx)
  }

  /**
   * Admits new episodes: training within the staleness bound (admissionCapacity, with the
   * learner step as the version counted from the job's start and the scored episodes as
   * accepted) once the learner has announced weights, eval and rollout within max_concurrent
   * and the job's total.
   */
  admit(plan: JobPlan, ctx: StepContext, fx: StepEffects): void {
    if (this.phase !== "running") return
    // A train job waits for its learner's first announcement (its starting weights, v0): an
    // episode sampled before would use weights the learner never had.
    if (plan.kind === "train" && ctx.learnerStep === undefined) return
    // An SFT job's episodes are its learner's golden ones.
    if (plan.kind === "sft") return
    const running = this.open.size
    let capacity =
      plan.kind === "train"
        ? admissionCapacity({
            maxConcurrent: plan.maxConcurrent,
            running,
            maxStaleness: plan.maxStaleness,
            policyVersion: ctx.learnerStep ?? 0,
            batchSize: plan.batchSize,
            accepted: this.finished,
          })
        : Math.max(0, plan.maxConcurrent - running)
    if (plan.total !== undefined) capacity = Math.min(capacity, plan.total - this.nextIndex)
    for (let i = 0; i < capacity; i++) {
      const open: OpenEpisode = {
        index: this.nextIndex,
        attempt: 0,
        issuedAtMs: ctx.now,
        admittedVersion: ctx.policyVersion,
      }
      this.nextIndex += 1
      this.open.set(open.index, open)
      fx.issue.push(open)
      fx.admitted += 1
      fx.changed = true
    }
  }

  /** One step of the job's life after its inputs were recorded: cancel, expiry, admission, end. */
  settle(plan: JobPlan, ctx: StepContext, fx: StepEffects): void {
    if (isFinalPhase(this.phase)) return
    if (this.phase === "running" && ctx.cancelRequested !== undefined) {
      this.phase = "cancelling"
      this.cancelAtMs = ctx.now
      fx.changed = true
    }
    this.expireOverdue(plan, ctx.now, ctx.episodeTimeoutMs, fx)
    if (this.phase === "running") {
      const target = plan.targetStep
      if (target !== undefined && ctx.learnerStep !== undefined && ctx.learnerStep >= target) {
        this.finish(plan, "succeeded", undefined, ctx.now, fx)
        return
      }
      this.admit(plan, ctx, fx)
      if (plan.total !== undefined && this.nextIndex >= plan.total && this.open.size === 0)
        this.finishRun(plan, ctx, fx)
      return
    }
    if (
      this.phase === "cancelling" &&
      (this.open.size === 0 || ctx.now >= (this.cancelAtMs ?? ctx.now) + ctx.cancelGraceMs)
    ) {
      this.finish(
        plan,
        "cancelled",
        ctx.cancelRequested ?? { code: ErrorCode.CANCELLED, message: "cancelled" },
        ctx.now,
        fx,
      )
    }
  }

  /** Every episode of an eval or rollout job is final. */
  private finishRun(plan: JobPlan, ctx: StepContext, fx: StepEffects): void {
    if (this.finished === 0 && (this.failed > 0 || this.unverifiable > 0)) {
      this.finish(plan, "failed", this.nothingScored(), ctx.now, fx)
      return
    }
    if (plan.kind === "eval") {
      const stats = this.evaluation()
      this.emit(
        plan.jobId,
        {
          case: "evaluation",
          value: create(EvaluationSummarySchema, {
            policyVersion: ctx.policyVersion,
            resolvedRate: stats.resolvedRate,
            passAtK: Object.fromEntries(stats.passAtK),
            rewardMean: stats.rewardMean,
            tasks: stats.tasks,
            episodes: stats.episodes,
            perTask: stats.perTask.map((t, i) => ({
              task: t.taskId,
              samples: t.samples,
              resolved: t.resolved,
              passAtK: Object.fromEntries(t.passAtK),
              rewardMean: t.samples === 0 ? 0 : (this.tallies[i]?.rewardSum ?? 0) / t.samples,
              unverifiable: this.tallies[i]?.unverifiable ?? 0,
              missingPackages: [...(this.tallies[i]?.missing ?? [])],
            })),
            unverifiable: this.unverifiable,
          }),
        },
        ctx.now,
        fx,
      )
    }
    this.finish(plan, "succeeded", undefined, ctx.now, fx)
  }

  /** Why a job none of whose episodes was scored failed. */
  private nothingScored(): LedgerError {
    const missing = [...new Set(this.tallies.flatMap((t) => t.missing))].sort()
    const unverifiable =
      this.unverifiable === 0
        ? undefined
        : `${this.unverifiable} unverifiable (the tests need packages the sandbox lacks${
            missing.length === 0 ? "" : `: ${missing.join(", ")}`
          })`
    if (this.failed === 0 && unverifiable !== undefined)
      return {
        // Deterministic: the same tasks on the same images would be unverifiable again.
        code: ErrorCode.FAILED_PRECONDITION,
        message: `no episode could be scored: ${unverifiable}`,
      }
    if (unverifiable === undefined)
      return {
        code: ErrorCode.UNAVAILABLE,
        message: `every episode (${this.failed}) failed for infrastructure reasons`,
      }
    return {
      code: ErrorCode.UNAVAILABLE,
      message: `no episode could be scored: ${this.failed} failed for infrastructure reasons, ${unverifiable}`,
    }
  }

  evaluation() {
    return evaluationStats(
      this.tallies.map((t, i) => ({
        taskId: this.taskKeys[i] ?? `task${i}`,
        samples: t.samples,
        resolved: t.resolved,
        rewardSum: t.rewardSum,
      })),
      this.groupSize,
    )
  }

  /** Moves to a final phase; episodes still open are abandoned. */
  finish(
    plan: JobPlan,
    phase: "succeeded" | "failed" | "cancelled",
    error: LedgerError | undefined,
    now: number,
    fx: StepEffects,
  ): void {
    this.phase = phase
    this.error = error
    this.open.clear()
    this.emit(plan.jobId, stateChanged(STATE_OF[phase], JobState.RUNNING, error), now, fx)
  }

  /** The job's status as this ledger says it is, over the stored one (whose other fields stay). */
  statusOver(
    current: JobStatus,
    plan: JobPlan | undefined,
    extra: {
      readonly lastEventSeq: bigint
      readonly policyVersion: bigint | undefined
      readonly learnerStep: bigint | undefined
      readonly now: number
    },
  ): JobStatus {
    const final = isFinalPhase(this.phase)
    const error =
      this.phase === "failed" || this.phase === "cancelled"
        ? this.error === undefined
          ? current.error
          : create(ErrorDetailSchema, {
              code: this.error.code,
              message: this.error.message,
              retryable: this.error.code === ErrorCode.UNAVAILABLE,
            })
        : current.error
    return create(JobStatusSchema, {
      ...current,
      state: STATE_OF[this.phase],
      counts: create(JobCountsSchema, {
        episodesTotal: plan?.total ?? this.nextIndex,
        episodesFinished: this.finished,
        episodesFailed: this.failed,
        episodesInfraRetried: this.retried,
        episodesRunning: final ? 0 : this.open.size,
        episodesUnverifiable: this.unverifiable,
      }),
      policyVersion: extra.policyVersion ?? current.policyVersion,
      learnerStep: extra.learnerStep ?? current.learnerStep,
      lastEventSeq: extra.lastEventSeq,
      resolvedRate: this.finished === 0 ? 0 : this.resolved / this.finished,
      rewardMean: this.finished === 0 ? 0 : this.rewardSum / this.finished,
      updatedUnixMs: BigInt(extra.now),
      ...(error === undefined ? {} : { error }),
    })
  }
}

export const stateChanged = (
  state: JobState,
  previous: JobState,
  error: LedgerError | undefined,
): JobEventPayload => ({
  case: "stateChanged",
  value: create(JobStateChangedSchema, {
    state,
    previousState: previous,
    ...(error === undefined ? {} : { error: { code: error.code, message: error.message } }),
  }),
})
