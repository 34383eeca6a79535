import { create, type MessageInitShape } from "@bufbuild/protobuf"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  type EpisodeEnd,
  EpisodeEndSchema,
  JobKind,
  JobSpecSchema,
  JobState,
  JobStatusSchema,
} from "../../proto/index.ts"
import { JobLedger, newEffects, RUNS_PER_ATTEMPT, type StepContext } from "./ledger.ts"
import { episodeId, type JobPlan, planOf, slotOf } from "./plan.ts"

const JOB = "job-1"

const planFor = (spec: MessageInitShape<typeof JobSpecSchema>, tasks: number): JobPlan => {
  const s = create(JobSpecSchema, spec)
  const kind = s.kind === JobKind.TRAIN ? "train" : s.kind === JobKind.EVAL ? "eval" : "rollout"
  return planOf(JOB, s, kind, tasks, { maxConcurrent: 16 })
}

const ledgerFor = (plan: JobPlan, seed = 7n) =>
  JobLedger.start(
    Array.from({ length: plan.taskCount }, (_, i) => `set/task-${i}`),
    plan.groupSize,
    seed,
  )

const ctx = (over: Partial<StepContext> = {}): StepContext => ({
  now: 1000,
  cancelRequested: undefined,
  learnerStep: undefined,
  policyVersion: 0n,
  cancelGraceMs: 10_000,
  episodeTimeoutMs: 0,
  ...over,
})

type EndFields = Partial<
  Pick<EpisodeEnd, "jobId" | "attempt" | "reward" | "resolved" | "infraFailed">
>

const end = (index: number, over: EndFields = {}): EpisodeEnd =>
  create(EpisodeEndSchema, {
    jobId: JOB,
    episodeId: episodeId(JOB, index),
    attempt: 0,
    reward: 3,
    resolved: false,
    ...over,
  })

const eventCases = (l: JobLedger) => l.outbox.events.map((e) => e.event.case)

describe("episode plan", () => {
  it("covers every (task, sample) of a round exactly once, in a seeded order per round", () => {
    const plan = planFor({ kind: JobKind.TRAIN, samplesPerTask: 3 }, 5)
    for (const round of [0, 1, 2]) {
      const seen = new Set<string>()
      for (let i = 0; i < 15; i++) {
        const slot = slotOf(plan, 42n, round * 15 + i)
        expect(slot.round).toBe(round)
        seen.add(`${slot.taskIndex}:${slot.sampleIndex}`)
      }
      expect(seen.size).toBe(15)
    }
    const order = (round: number) =>
      Array.from({ length: 5 }, (_, t) => slotOf(plan, 42n, round * 15 + t * 3).taskIndex)
    expect(order(0)).not.toEqual(order(1))
    expect(order(0)).toEqual(
      Array.from({ length: 5 }, (_, t) => slotOf(plan, 42n, t * 3).taskIndex),
    )
  })
})

describe("JobLedger", () => {
  it("counts the first scored end of an episode once; duplicates and other jobs change nothing", () => {
    const plan = planFor({ kind: JobKind.EVAL, samplesPerTask: 2, maxConcurrentEpisodes: 8 }, 2)
    const l = ledgerFor(plan)
    const fx = newEffects()
    l.settle(plan, ctx(), fx)
    expect(fx.issue.map((o) => o.index)).toEqual([0, 1, 2, 3])
    expect(l.recordEnd(plan, end(0, { reward: 8, resolved: true }), 1001, fx)).toBe(true)
    // The same end again, and a redelivered run of the same attempt with another score.
    expect(l.recordEnd(plan, end(0, { reward: 8, resolved: true }), 1002, fx)).toBe(false)
    expect(l.recordEnd(plan, end(0, { attempt: 1, reward: 0 }), 1002, fx)).toBe(false)
    expect(l.recordEnd(plan, end(1, { jobId: "other" }), 1002, fx)).toBe(false)
    expect(l.recordEnd(plan, end(99), 1002, fx)).toBe(false)
    expect(l.finished).toBe(1)
    expect(l.resolved).toBe(1)
    expect(l.rewardSum).toBe(8)
    expect(fx.finished).toEqual({ resolved: 1, unresolved: 0, failed: 0 })
  })

  it("re-issues an infra-failed attempt as attempt + 1 and counts the episode failed after the last", () => {
    const plan = planFor(
      { kind: JobKind.EVAL, samplesPerTask: 1, maxEpisodeAttempts: 3, maxConcurrentEpisodes: 4 },
      1,
    )
    const l = ledgerFor(plan)
    l.settle(plan, ctx(), newEffects())
    const fx = newEffects()
    l.recordEnd(plan, end(0, { infraFailed: true }), 1100, fx)
    expect(fx.issue).toEqual([{ index: 0, attempt: 1, issuedAtMs: 1100, admittedVersion: 0n }])
    // A late infra end of the attempt already retried is stale.
    expect(l.recordEnd(plan, end(0, { infraFailed: true, attempt: 1 }), 1101, fx)).toBe(false)
    l.recordEnd(plan, end(0, { infraFailed: true, attempt: RUNS_PER_ATTEMPT }), 1200, fx)
    expect(l.open.get(0)?.attempt).toBe(2)
    l.recordEnd(plan, end(0, { infraFailed: true, attempt: 2 * RUNS_PER_ATTEMPT + 1 }), 1300, fx)
    expect(l.open.size).toBe(0)
    expect({ retried: l.retried, failed: l.failed, finished: l.finished }).toEqual({
      retried: 2,
      failed: 1,
      finished: 0,
    })
    // Every attempt failed: the eval job fails rather than reporting a resolved rate of nothing.
    l.settle(plan, ctx({ now: 1400 }), fx)
    expect(l.phase).toBe("failed")
    const last = l.outbox.events.at(-1)?.event
    expect(last?.case === "stateChanged" && last.value.state).toBe(JobState.FAILED)
  })

  it("a scored end of an older attempt still counts, and the newer attempt's end is then ignored", () => {
    const plan = planFor({ kind: JobKind.EVAL, samplesPerTask: 1 }, 1)
    const l = ledgerFor(plan)
    l.settle(plan, ctx(), newEffects())
    const fx = newEffects()
    l.recordEnd(plan, end(0, { infraFailed: true }), 1100, fx)
    l.recordEnd(plan, end(0, { attempt: 1, reward: 5, resolved: true }), 1200, fx)
    expect(l.recordEnd(plan, end(0, { attempt: RUNS_PER_ATTEMPT, reward: 1 }), 1300, fx)).toBe(
      false,
    )
    expect(l.finished).toBe(1)
    expect(l.rewardSum).toBe(5)
  })

  it("treats an attempt without an end record past the timeout as an infra failure", () => {
    const plan = planFor({ kind: JobKind.ROLLOUT, samplesPerTask: 1 }, 1)
    const l = ledgerFor(plan)
    l.settle(plan, ctx(), newEffects())
    const fx = newEffects()
    l.settle(plan, ctx({ now: 5000, episodeTimeoutMs: 3000 }), fx)
    expect(fx.issue).toEqual([{ index: 0, attempt: 1, issuedAtMs: 5000, admittedVersion: 0n }])
  })

  it("finishes an eval job with its evaluation, then SUCCEEDED", () => {
    const plan = planFor({ kind: JobKind.EVAL, samplesPerTask: 2 }, 2)
    const l = ledgerFor(plan)
    l.settle(plan, ctx(), newEffects())
    const fx = newEffects()
    for (const [i, resolved] of [true, false, true, true].entries())
      l.recordEnd(plan, end(i, { resolved, reward: resolved ? 4 : 1 }), 1100, fx)
    l.settle(plan, ctx({ now: 1200, policyVersion: 3n }), fx)
    expect(l.phase).toBe("succeeded")
    expect(eventCases(l).slice(-2)).toEqual(["evaluation", "stateChanged"])
    const evaluation = l.outbox.events.at(-2)?.event
    if (evaluation?.case !== "evaluation") throw new Error("no evaluation")
    expect(evaluation.value.resolvedRate).toBeCloseTo(0.75, 12)
    expect(evaluation.value.passAtK[1]).toBeCloseTo(0.75, 12)
    expect(evaluation.value.passAtK[2]).toBeCloseTo(1, 12)
    expect(evaluation.value.policyVersion).toBe(3n)
    const status = l.statusOver(create(JobStatusSchema, { jobId: JOB }), plan, {
      lastEventSeq: 9n,
      policyVersion: undefined,
      learnerStep: undefined,
      now: 1300,
    })
    expect(status.state).toBe(JobState.SUCCEEDED)
    expect(status.counts?.episodesTotal).toBe(4)
    expect(status.counts?.episodesFinished).toBe(4)
    expect(status.resolvedRate).toBeCloseTo(0.75, 12)
  })

  it("on a cancel request stops admitting and ends CANCELLED when nothing runs, or after the grace", () => {
    const plan = planFor({ kind: JobKind.EVAL, samplesPerTask: 4, maxConcurrentEpisodes: 2 }, 2)
    const reason = { code: 8, message: "user asked" }
    for (const waitForGrace of [false, true]) {
      const l = ledgerFor(plan)
      l.settle(plan, ctx(), newEffects())
      const fx = newEffects()
      l.settle(plan, ctx({ now: 1100, cancelRequested: reason }), fx)
      expect(l.phase).toBe("cancelling")
      if (!waitForGrace) {
        l.recordEnd(plan, end(0), 1200, fx)
        l.recordEnd(plan, end(1, { infraFailed: true }), 1200, fx)
        expect(fx.issue).toEqual([])
        l.settle(plan, ctx({ now: 1300, cancelRequested: reason }), fx)
      } else {
        l.settle(plan, ctx({ now: 1100 + 9_999, cancelRequested: reason }), fx)
        expect(l.phase).toBe("cancelling")
        l.settle(plan, ctx({ now: 1100 + 10_000, cancelRequested: reason }), fx)
      }
      expect(l.phase).toBe("cancelled")
      expect(l.nextIndex).toBe(2)
      const last = l.outbox.events.at(-1)?.event
      expect(last?.case === "stateChanged" && last.value.error?.message).toBe("user asked")
    }
  })

  it("survives its stored form unchanged", () => {
    const plan = planFor({ kind: JobKind.EVAL, samplesPerTask: 3 }, 3)
    const l = ledgerFor(plan, 123456789012345678n)
    l.settle(plan, ctx({ policyVersion: 5n }), newEffects())
    l.recordEnd(plan, end(0, { reward: 2.5, resolved: true }), 1100, newEffects())
    l.recordEnd(plan, end(1, { infraFailed: true }), 1100, newEffects())
    const copy = JobLedger.fromData(JSON.parse(JSON.stringify(l.toData())))
    expect(copy.toData()).toEqual(l.toData())
    expect(copy.outbox.events).toEqual(l.outbox.events)
    expect(copy.open.get(1)?.attempt).toBe(1)
  })
})

describe("staleness-bounded admission (train)", () => {
  it("admits nothing until the learner has announced its starting weights", () => {
    const plan = planFor({ kind: JobKind.TRAIN, learner: { ppoSteps: 2 } }, 3)
    const l = ledgerFor(plan)
    const before = newEffects()
    l.settle(plan, ctx(), before)
    expect(before.issue).toEqual([])
    const after = newEffects()
    l.settle(plan, ctx({ learnerStep: 0 }), after)
    expect(after.issue.length).toBeGreaterThan(0)
  })
  it("never exceeds max_concurrent nor (η + step + 1) · batch admitted, with a learner advancing versions", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 0xffff }),
        (eta, batch, maxConcurrent, groupSize, seed) => {
          const plan = planFor(
            {
              kind: JobKind.TRAIN,
              samplesPerTask: groupSize,
              maxConcurrentEpisodes: maxConcurrent,
              learner: { maxStaleness: eta, batchTrajectories: batch, ppoSteps: 5 },
            },
            3,
          )
          // max_staleness 0 means the learner's default (2).
          const η = eta === 0 ? 2 : eta
          const l = ledgerFor(plan)
          let step = 0
          let now = 1000
          let rng = seed
          const random = () => {
            rng = (rng * 1103515245 + 12345) & 0x7fffffff
            return rng / 0x7fffffff
          }
          for (let tick = 0; tick < 400 && l.phase === "running"; tick++) {
            const fx = newEffects()
            l.settle(plan, ctx({ now, learnerStep: step, policyVersion: BigInt(step) }), fx)
            expect(l.open.size).toBeLessThanOrEqual(maxConcurrent)
            expect(l.nextIndex).toBeLessThanOrEqual((η + step + 1) * batch)
            for (const o of fx.issue) expect(o.index).toBeLessThan((η + step + 1) * batch)
            // Some running episodes finish, in any order; some fail once for infra reasons.
            for (const o of [...l.open.values()]) {
              if (random() < 0.4) {
                const infra = o.attempt === 0 && random() < 0.1
                l.recordEnd(
                  plan,
                  end(o.index, { attempt: o.attempt * RUNS_PER_ATTEMPT, infraFailed: infra }),
                  now,
                  fx,
                )
              }
            }
            // The learner trains a step per full batch of scored episodes.
            while (l.finished >= (step + 1) * batch) step++
            now += 10
          }
          expect(l.phase).toBe("succeeded")
          expect(step).toBeGreaterThanOrEqual(5)
        },
      ),
      { numRuns: 200 },
    )
  })
})
