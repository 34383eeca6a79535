import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { Bus, MemoryBusLive, subjectsFor } from "../bus/index.ts"
import { jobStoreContract, spec } from "./store.contract.ts"
import { JobStore, jobStoreFor, jobStoreLayer, makeJobStore } from "./store.ts"

jobStoreContract("memory", () => MemoryBusLive())

describe("JobStore service", () => {
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
