import { create, type MessageInitShape } from "@bufbuild/protobuf"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  type EpisodeEnd,
  EpisodeEndSchema,
  ErrorCode,
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
  const kind =
    s.kind === JobKind.TRAIN
      ? "train"
      : s.kind === JobKind.EVAL
        ? "eval"
        : s.kind === JobKind.SFT
          ? "sft"
          : "rollout"
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
  Pick<
    EpisodeEnd,
    "jobId" | "attempt" | "reward" | "resolved" | "infraFailed" | "unverifiable" | "missingPackages"
  >
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
    expect(fx.finished).toEqual({ resolved: 1, unresolved: 0, failed: 0, unverifiable: 0 })
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

  it("an unverifiable end is final, never retried, and left out of every rate, mean and pass@k", () => {
    const plan = planFor({ kind: JobKind.EVAL, samplesPerTask: 2, maxConcurrentEpisodes: 8 }, 2)
    const l = ledgerFor(plan)
    l.settle(plan, ctx(), newEffects())
    const fx = newEffects()
    const taskOf = (i: number) => slotOf(plan, 7n, i).taskIndex
    // Both samples of one task are unverifiable (one of them on a later attempt); the other
    // task's two samples score: one resolved.
    const needsNumpy = taskOf(0)
    const [u1, u2] = [0, 1, 2, 3].filter((i) => taskOf(i) === needsNumpy)
    const [s1, s2] = [0, 1, 2, 3].filter((i) => taskOf(i) !== needsNumpy)
    if ([u1, u2, s1, s2].some((i) => i === undefined)) throw new Error("two samples per task")
    const missing = { unverifiable: true, reward: 0, missingPackages: ["numpy"] }
    expect(l.recordEnd(plan, end(u1 as number, missing), 1100, fx)).toBe(true)
    l.recordEnd(plan, end(u2 as number, { infraFailed: true }), 1100, fx)
    const retry = l.open.get(u2 as number)?.attempt ?? 0
    l.recordEnd(
      plan,
      end(u2 as number, {
        ...missing,
        attempt: retry * RUNS_PER_ATTEMPT,
        missingPackages: ["requests", "numpy"],
      }),
      1150,
      fx,
    )
    // A redelivered unverifiable end of a final episode changes nothing.
    expect(l.recordEnd(plan, end(u1 as number, missing), 1160, fx)).toBe(false)
    l.recordEnd(plan, end(s1 as number, { reward: 4, resolved: true }), 1200, fx)
    l.recordEnd(plan, end(s2 as number, { reward: 2 }), 1200, fx)
    expect(fx.issue.map((o) => o.index)).toEqual([u2])
    expect(fx.finished).toEqual({ resolved: 1, unresolved: 1, failed: 0, unverifiable: 2 })
    expect({ finished: l.finished, unverifiable: l.unverifiable, failed: l.failed }).toEqual({
      finished: 2,
      unverifiable: 2,
      failed: 0,
    })
    const finished = l.outbox.events.flatMap((e) =>
      e.event.case === "episodeFinished" && e.event.value.unverifiable ? [e.event.value] : [],
    )
    expect(finished.map((f) => [f.episodeId, f.attempt, f.missingPackages, f.reward])).toEqual([
      [episodeId(JOB, u1 as number), 0, ["numpy"], 0],
      [episodeId(JOB, u2 as number), retry, ["requests", "numpy"], 0],
    ])
    expect(finished.every((f) => !f.infraFailed && !f.resolved)).toBe(true)

    l.settle(plan, ctx({ now: 1300 }), fx)
    expect(l.phase).toBe("succeeded")
    const evaluation = l.outbox.events.at(-2)?.event
    if (evaluation?.case !== "evaluation") throw new Error("no evaluation")
    const v = evaluation.value
    expect({
      rate: v.resolvedRate,
      reward: v.rewardMean,
      episodes: v.episodes,
      tasks: v.tasks,
    }).toEqual({
      rate: 0.5,
      reward: 3,
      episodes: 2,
      tasks: 1,
    })
    expect(v.unverifiable).toBe(2)
    expect(v.passAtK[1]).toBeCloseTo(0.5, 12)
    const perTask = v.perTask[needsNumpy]
    expect(perTask).toMatchObject({
      samples: 0,
      unverifiable: 2,
      missingPackages: ["numpy", "requests"],
    })
    expect(v.perTask[1 - needsNumpy]).toMatchObject({ samples: 2, resolved: 1, unverifiable: 0 })
    const status = l.statusOver(create(JobStatusSchema, { jobId: JOB }), plan, {
      lastEventSeq: 9n,
      policyVersion: undefined,
      learnerStep: undefined,
      now: 1400,
    })
    expect(status.counts).toMatchObject({
      episodesTotal: 4,
      episodesFinished: 2,
      episodesUnverifiable: 2,
      episodesFailed: 0,
      episodesInfraRetried: 1,
    })
    expect(status.resolvedRate).toBeCloseTo(0.5, 12)
    expect(status.rewardMean).toBeCloseTo(3, 12)
  })

  it("fails an eval job none of whose episodes could be scored, naming the missing packages", () => {
    for (const infraToo of [false, true]) {
      const plan = planFor({ kind: JobKind.EVAL, samplesPerTask: 1, maxEpisodeAttempts: 1 }, 2)
      const l = ledgerFor(plan)
      l.settle(plan, ctx(), newEffects())
      const fx = newEffects()
      l.recordEnd(plan, end(0, { unverifiable: true, missingPackages: ["numpy"] }), 1100, fx)
      l.recordEnd(
        plan,
        end(
          1,
          infraToo ? { infraFailed: true } : { unverifiable: true, missingPackages: ["scipy"] },
        ),
        1100,
        fx,
      )
      l.settle(plan, ctx({ now: 1200 }), fx)
      expect(l.phase).toBe("failed")
      expect(l.error).toEqual(
        infraToo
          ? {
              code: ErrorCode.UNAVAILABLE,
              message:
                "no episode could be scored: 1 failed for infrastructure reasons, 1 unverifiable (the tests need packages the sandbox lacks: numpy)",
            }
          : {
              code: ErrorCode.FAILED_PRECONDITION,
              message:
                "no episode could be scored: 2 unverifiable (the tests need packages the sandbox lacks: numpy, scipy)",
            },
      )
    }
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
    const before = l.toData()
    // A ledger stored before unverifiable episodes existed still reads.
    expect(before.unverifiable).toBeUndefined()
    expect(JobLedger.fromData(JSON.parse(JSON.stringify(before))).unverifiable).toBe(0)
    l.recordEnd(
      plan,
      end(2, { unverifiable: true, missingPackages: ["numpy"] }),
      1100,
      newEffects(),
    )
    const copy = JobLedger.fromData(JSON.parse(JSON.stringify(l.toData())))
    expect(copy.toData()).toEqual(l.toData())
    expect(copy.outbox.events).toEqual(l.outbox.events)
    expect(copy.open.get(1)?.attempt).toBe(1)
    expect(copy.unverifiable).toBe(1)
    expect(copy.tallies.flatMap((t) => t.missing)).toEqual(["numpy"])
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
  it("an SFT job admits no episode and SUCCEEDS at its learner's one announcement", () => {
    const plan = planFor({ kind: JobKind.SFT, learner: { sftSteps: 10 } }, 4)
    expect(plan.total).toBeUndefined()
    expect(plan.targetStep).toBe(0)
    const l = ledgerFor(plan)
    const waiting = newEffects()
    l.settle(plan, ctx(), waiting)
    expect(waiting.issue).toEqual([])
    expect(l.phase).toBe("running")
    const announced = newEffects()
    l.settle(plan, ctx({ learnerStep: 0 }), announced)
    expect(announced.issue).toEqual([])
    expect(l.phase).toBe("succeeded")
    expect(l.outbox.events.at(-1)?.event).toMatchObject({
      case: "stateChanged",
      value: { state: JobState.SUCCEEDED },
    })
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
