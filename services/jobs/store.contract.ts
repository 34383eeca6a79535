import { randomUUID } from "node:crypto"
import { create } from "@bufbuild/protobuf"
import { Effect, Exit, Fiber, type Layer, Option, type Scope, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { ErrorCode, JobKind, type JobSpec, JobSpecSchema, JobState } from "../../proto/index.ts"
import { Bus, type BusError, subjectsFor } from "../bus/index.ts"
import { type JobStoreShape, makeJobStore } from "./store.ts"

export const spec = (name = "demo", taskIds: ReadonlyArray<string> = ["t1"]): JobSpec =>
  create(JobSpecSchema, {
    name,
    kind: JobKind.EVAL,
    taskSet: "bundled-eval",
    taskIds: [...taskIds],
    samplesPerTask: 2,
  })

const failureTag = (exit: Exit.Exit<unknown, { readonly _tag: string }>): string | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Exit.findErrorOption(exit))?._tag : undefined

/** The job store's behaviour, for every bus adapter. Each test uses a prefix of its own. */
export const jobStoreContract = (name: string, layer: () => Layer.Layer<Bus, BusError>) => {
  const run = <A, E>(f: (store: JobStoreShape) => Effect.Effect<A, E, Scope.Scope>) =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          const subjects = subjectsFor(`j${randomUUID().replaceAll("-", "").slice(0, 10)}`)
          return yield* f(yield* makeJobStore(bus, subjects))
        }),
      ).pipe(Effect.provide(layer())),
    )

  describe(`job store (${name})`, () => {
    it("creates a PENDING job with its first event; a request id makes submission idempotent", () =>
      run((store) =>
        Effect.gen(function* () {
          const { status, created } = yield* store.create(spec())
          expect(created).toBe(true)
          expect(status.state).toBe(JobState.PENDING)
          expect(status.lastEventSeq).toBe(1n)
          expect(status.jobId).toMatch(/^job-/)
          const got = yield* store.get(status.jobId)
          expect(got.spec?.name).toBe("demo")
          expect(got.lastEventSeq).toBe(1n)

          const first = yield* store.create(spec("a"), { requestId: "req-1" })
          const again = yield* store.create(spec("a"), { requestId: "req-1" })
          expect(again.created).toBe(false)
          expect(again.status.jobId).toBe(first.status.jobId)
          const clash = yield* Effect.exit(store.create(spec("b"), { requestId: "req-1" }))
          expect(failureTag(clash)).toBe("JobAlreadyExists")
          expect(failureTag(yield* Effect.exit(store.get("job-nope")))).toBe("JobNotFound")
        }),
      ))

    it("keeps the spec's labels with the job: get and list return them", () =>
      run((store) =>
        Effect.gen(function* () {
          const labelled = create(JobSpecSchema, {
            ...spec("labelled"),
            labels: { team: "research", "run.id": "42" },
          })
          const { status } = yield* store.create(labelled)
          const got = yield* store.get(status.jobId)
          expect(got.spec?.labels).toEqual({ team: "research", "run.id": "42" })
          const listed = yield* store.list({})
          expect(listed.jobs.find((j) => j.jobId === status.jobId)?.spec?.labels).toEqual({
            team: "research",
            "run.id": "42",
          })
        }),
      ))

    it("numbers concurrent events 1..n without gaps, in order", () =>
      run((store) =>
        Effect.gen(function* () {
          const { status } = yield* store.create(spec())
          const id = status.jobId
          yield* Effect.forEach(
            Array.from({ length: 24 }, (_, i) => i),
            (i) =>
              store.appendEvent(id, {
                event: { case: "admitted", value: { episodesTotal: i, tasks: 1 } },
              }),
            { concurrency: 6 },
          )
          yield* store.transition(id, JobState.SUCCEEDED)
          const events = yield* Stream.runCollect(store.watch(id))
          expect(events.map((e) => e.seq)).toEqual(
            Array.from({ length: 26 }, (_, i) => BigInt(i + 1)),
          )
          expect(new Set(events.map((e) => e.jobId))).toEqual(new Set([id]))
          const admitted = events.flatMap((e) =>
            e.event.case === "admitted" ? [e.event.value.episodesTotal] : [],
          )
          expect(admitted.sort((a, b) => a - b)).toEqual(Array.from({ length: 24 }, (_, i) => i))
          expect((yield* store.get(id)).lastEventSeq).toBe(26n)
        }),
      ))

    it("watch replays from a seq, follows live events and ends after the terminal one", () =>
      run((store) =>
        Effect.gen(function* () {
          const { status } = yield* store.create(spec())
          const id = status.jobId
          yield* store.transition(id, JobState.RUNNING)
          const fiber = yield* Effect.forkChild(Stream.runCollect(store.watch(id, 2n)))
          yield* Effect.sleep("100 millis")
          yield* store.appendEvent(id, {
            event: { case: "episodeFinished", value: { episodeId: "e1", reward: 3 } },
          })
          yield* store.transition(id, JobState.FAILED, {
            error: { code: ErrorCode.INTERNAL, message: "boom" },
          })
          const events = yield* Fiber.join(fiber)
          expect(events.map((e) => [e.seq, e.event.case])).toEqual([
            [2n, "stateChanged"],
            [3n, "episodeFinished"],
            [4n, "stateChanged"],
          ])
          const failed = yield* store.get(id)
          expect(failed.state).toBe(JobState.FAILED)
          expect(failed.error?.message).toBe("boom")
          // Past the end of a terminal job: nothing, at once.
          expect((yield* Stream.runCollect(store.watch(id, 5n))).length).toBe(0)
          expect(failureTag(yield* Effect.exit(store.transition(id, JobState.RUNNING)))).toBe(
            "JobTerminal",
          )
        }),
      ))

    it("holds a terminal event published before its status until GetJob shows the final state", () =>
      run((store) =>
        Effect.gen(function* () {
          const { status } = yield* store.create(spec())
          const id = status.jobId
          yield* store.transition(id, JobState.RUNNING)
          // The coordinator's order: the event first, then the status it leads to.
          yield* store.appendEvent(id, {
            event: {
              case: "stateChanged",
              value: { state: JobState.SUCCEEDED, previousState: JobState.RUNNING },
            },
          })
          let ended = false
          const fiber = yield* Effect.forkChild(
            Stream.runCollect(store.watch(id, 1n)).pipe(
              Effect.tap(() => Effect.sync(() => (ended = true))),
            ),
          )
          yield* Effect.sleep("300 millis")
          expect(ended).toBe(false)
          yield* store.update(id, (s) => {
            s.state = JobState.SUCCEEDED
            return s
          })
          const events = yield* Fiber.join(fiber)
          expect(events.map((e) => e.seq)).toEqual([1n, 2n, 3n])
          expect((yield* store.get(id)).state).toBe(JobState.SUCCEEDED)
        }),
      ))

    it("cancels a PENDING job outright and asks the coordinator to stop a RUNNING one", () =>
      run((store) =>
        Effect.gen(function* () {
          const pending = (yield* store.create(spec())).status.jobId
          const cancelled = yield* store.cancel(pending, "not needed")
          expect(cancelled.state).toBe(JobState.CANCELLED)
          const events = yield* Stream.runCollect(store.watch(pending))
          const last = events[events.length - 1]
          expect(last?.event.case === "stateChanged" && last.event.value.error?.message).toBe(
            "not needed",
          )
          expect(failureTag(yield* Effect.exit(store.cancel(pending)))).toBe("JobTerminal")

          const running = (yield* store.create(spec())).status.jobId
          yield* store.transition(running, JobState.RUNNING)
          const requested = yield* store.cancel(running, "stop")
          expect(requested.state).toBe(JobState.RUNNING)
          expect(requested.error?.code).toBe(ErrorCode.CANCELLED)
        }),
      ))

    it("lists newest first, by state, a page at a time", () =>
      run((store) =>
        Effect.gen(function* () {
          const ids: string[] = []
          for (let i = 0; i < 5; i++) {
            ids.push((yield* store.create(spec(`j${i}`))).status.jobId)
            yield* Effect.sleep("3 millis")
          }
          yield* store.transition(ids[1] ?? "", JobState.RUNNING)
          const first = yield* store.list({}, "", 2)
          expect(first.jobs.map((j) => j.jobId)).toEqual([ids[4], ids[3]])
          const second = yield* store.list({}, first.nextPageToken, 2)
          expect(second.jobs.map((j) => j.jobId)).toEqual([ids[2], ids[1]])
          const third = yield* store.list({}, second.nextPageToken, 2)
          expect(third.jobs.map((j) => j.jobId)).toEqual([ids[0]])
          expect(third.nextPageToken).toBe("")
          const running = yield* store.list({ state: JobState.RUNNING })
          expect(running.jobs.map((j) => j.jobId)).toEqual([ids[1]])
          expect(failureTag(yield* Effect.exit(store.list({}, "garbage!")))).toBe("InvalidArgument")
        }),
      ))
  })
}
