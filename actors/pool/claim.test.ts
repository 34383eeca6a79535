import { randomBytes } from "node:crypto"
import { create } from "@bufbuild/protobuf"
import { Effect, Fiber } from "effect"
import { describe, expect, it } from "vitest"
import { JobKind, JobSpecSchema, JobState } from "../../proto/index.ts"
import { Bus, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { type JobStoreShape, makeJobStore } from "../../services/jobs/index.ts"
import { runJobPool } from "./claim.ts"

/** A submitted job the coordinator has admitted: RUNNING. Returns its id. */
const running = (store: JobStoreShape, kind: JobKind) =>
  Effect.gen(function* () {
    const { status } = yield* store.create(create(JobSpecSchema, { kind }))
    yield* store.transition(status.jobId, JobState.RUNNING)
    return status.jobId
  })

const until = (cond: () => boolean, what: string, timeoutMs = 5000) =>
  Effect.gen(function* () {
    const start = Date.now()
    while (!cond()) {
      if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`)
      yield* Effect.sleep("20 millis")
    }
  })

describe("job pool", () => {
  it("serves each wanted job once across replicas, ends runs with their jobs, and a dead holder's job moves on", () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          const subjects = subjectsFor(`p${randomBytes(3).toString("hex")}`)
          const store = yield* makeJobStore(bus, subjects)
          const leases = yield* bus.kv(`${subjects.prefix}-pool`)
          const runs: Array<{ owner: string; jobId: string }> = []
          const active = new Map<string, string>()
          const replica = (owner: string) =>
            runJobPool({
              name: owner,
              store,
              leases,
              owner,
              ttlMs: 300,
              maxJobs: 2,
              wants: (s) => s.spec?.kind === JobKind.TRAIN,
              run: (job) =>
                Effect.gen(function* () {
                  runs.push({ owner, jobId: job.jobId })
                  if (active.has(job.jobId)) throw new Error(`${job.jobId} served twice at once`)
                  active.set(job.jobId, owner)
                  yield* Effect.never
                }).pipe(Effect.ensuring(Effect.sync(() => active.delete(job.jobId)))),
            }).pipe(Effect.forkScoped)

          const a = yield* replica("a")
          yield* replica("b")
          const train: string[] = []
          for (let i = 0; i < 3; i++) train.push(yield* running(store, JobKind.TRAIN))
          const evalJob = yield* running(store, JobKind.EVAL)
          yield* until(() => active.size === 3, "three train jobs served")
          expect(active.has(evalJob)).toBe(false)
          expect(runs.length).toBe(3)

          // A job that ends stops its run and frees the slot.
          yield* store.transition(train[0] as string, JobState.SUCCEEDED)
          yield* until(() => !active.has(train[0] as string), "the ended job's run to stop")

          // The replica holding a job dies (interrupted): its lease is released and the other
          // replica takes the job.
          const heldByA = [...active].filter(([, owner]) => owner === "a").map(([id]) => id)
          yield* Fiber.interrupt(a)
          yield* until(
            () => heldByA.every((id) => active.get(id) === "b"),
            "b to take over a's jobs",
          )
          expect(new Set(runs.map((r) => r.jobId))).toEqual(new Set(train))
          for (const id of train.slice(1)) expect(active.get(id)).toBe("b")
        }),
      ).pipe(Effect.provide(MemoryBusLive())),
    ))

  it("does not hand a job over while its holder heartbeats, and retries a failed run after the cool-down", () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          const subjects = subjectsFor(`p${randomBytes(3).toString("hex")}`)
          const store = yield* makeJobStore(bus, subjects)
          const leases = yield* bus.kv(`${subjects.prefix}-pool`)
          const starts: string[] = []
          let failures = 1
          const replica = (owner: string) =>
            runJobPool({
              name: owner,
              store,
              leases,
              owner,
              ttlMs: 200,
              maxJobs: 1,
              coolDownMs: 300,
              wants: () => true,
              run: () =>
                Effect.gen(function* () {
                  starts.push(owner)
                  if (failures-- > 0) return yield* Effect.fail(new Error("boom"))
                  yield* Effect.never
                }),
            }).pipe(Effect.forkScoped)
          yield* replica("a")
          yield* running(store, JobKind.TRAIN)
          yield* until(() => starts.length === 2, "the failed run to be retried")
          yield* replica("b")
          // Long past the lease TTL: a holder that heartbeats keeps its job.
          yield* Effect.sleep("800 millis")
          expect(starts).toEqual(["a", "a"])
        }),
      ).pipe(Effect.provide(MemoryBusLive())),
    ))
})
