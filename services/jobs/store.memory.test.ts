import { Effect, Layer, Stream } from "effect"
import { TestClock } from "effect/testing"
import { describe, expect, it } from "vitest"
import { JobState } from "../../proto/index.ts"
import { Bus, MemoryBusLive, subjectsFor } from "../bus/index.ts"
import { jobStoreContract, spec } from "./store.contract.ts"
import { JobStore, jobStoreFor, jobStoreLayer, makeJobStore } from "./store.ts"

jobStoreContract("memory", () => MemoryBusLive())

describe("JobStore service", () => {
  it("stamps jobs and events with the Clock's time (TestClock)", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        const store = yield* makeJobStore(yield* Bus, subjectsFor("clock"))
        const t0 = 1_760_000_000_000
        yield* TestClock.setTime(t0)
        const { status } = yield* store.create(spec())
        expect(status.createdUnixMs).toBe(BigInt(t0))
        expect(status.jobId.startsWith(`job-${t0.toString(36)}-`)).toBe(true)
        yield* TestClock.adjust("90 seconds")
        const { status: running, event } = yield* store.transition(status.jobId, JobState.RUNNING)
        expect(running.updatedUnixMs).toBe(BigInt(t0 + 90_000))
        expect(event?.unixMs).toBe(BigInt(t0 + 90_000))
        const events = yield* store.watch(status.jobId).pipe(Stream.take(2), Stream.runCollect)
        expect(events.map((e) => e.unixMs)).toEqual([BigInt(t0), BigInt(t0 + 90_000)])
      }).pipe(Effect.scoped, Effect.provide(MemoryBusLive()), Effect.provide(TestClock.layer())),
    ))

  it("is the one store of a process for its prefix; another prefix gets a store of its own", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        const bus = yield* Bus
        const provided = yield* JobStore
        const same = yield* jobStoreFor(bus, subjectsFor("one"))
        const other = yield* jobStoreFor(bus, subjectsFor("two"))
        expect(same).toBe(provided)
        expect(other).not.toBe(provided)
        expect(other.subjects.prefix).toBe("two")
        // Both read the same bus: a job created through one is seen through a fresh store.
        const { status } = yield* provided.create(spec())
        const fresh = yield* makeJobStore(bus, subjectsFor("one"))
        expect((yield* fresh.get(status.jobId)).jobId).toBe(status.jobId)
      }).pipe(
        Effect.provide(jobStoreLayer(subjectsFor("one")).pipe(Layer.provideMerge(MemoryBusLive()))),
      ),
    ))
})
