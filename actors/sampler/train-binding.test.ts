import { randomBytes } from "node:crypto"
import { create } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import {
  EpisodePurpose,
  EpisodeWorkItemSchema,
  ErrorCode,
  JobKind,
  JobSpecSchema,
  JobState,
} from "../../proto/index.ts"
import { Bus, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { type JobStoreShape, makeJobStore } from "../../services/jobs/index.ts"
import { refusalMessage, trainBinding } from "./train-binding.ts"

const running = (store: JobStoreShape, kind: JobKind) =>
  Effect.gen(function* () {
    const { status } = yield* store.create(create(JobSpecSchema, { kind }))
    yield* store.transition(status.jobId, JobState.RUNNING)
    return status.jobId
  })

const item = (jobId: string, purpose: EpisodePurpose) =>
  create(EpisodeWorkItemSchema, { jobId, episodeId: `${jobId}-e0`, purpose })

const REPLICAS = ["http://127.0.0.1:30000", "http://127.0.0.1:30001"]

describe("train binding: engine replicas follow one train job at a time", () => {
  it("binds the first train job, refuses a second while it runs (FAILED_PRECONDITION), follows the next once it ended", () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const store = yield* makeJobStore(
            yield* Bus,
            subjectsFor(`b${randomBytes(3).toString("hex")}`),
          )
          const followed: string[] = []
          const stopped: string[] = []
          const binding = yield* trainBinding({
            store,
            replicas: REPLICAS,
            follow: (job) =>
              Effect.sync(() => followed.push(job)).pipe(
                Effect.andThen(Effect.never),
                Effect.onInterrupt(() => Effect.sync(() => stopped.push(job))),
              ),
          })
          const a = yield* running(store, JobKind.TRAIN)
          const b = yield* running(store, JobKind.TRAIN)
          const evalJob = yield* running(store, JobKind.EVAL)

          expect(yield* binding.admit(item(a, EpisodePurpose.TRAIN))).toBe(true)
          expect(yield* binding.admit(item(a, EpisodePurpose.TRAIN))).toBe(true)
          expect(binding.bound()).toBe(a)
          yield* Effect.sleep("10 millis")
          expect(followed).toEqual([a])
          // Eval episodes run on whatever the replicas hold, and bind nothing.
          expect(yield* binding.admit(item(evalJob, EpisodePurpose.EVAL))).toBe(true)

          expect(yield* binding.admit(item(b, EpisodePurpose.TRAIN))).toBe(false)
          const refused = yield* store.get(b)
          expect(refused.state).toBe(JobState.FAILED)
          expect(refused.error?.code).toBe(ErrorCode.FAILED_PRECONDITION)
          expect(refused.error?.message).toBe(refusalMessage(b, a, REPLICAS))
          expect(refused.error?.message).toContain(`serve train job ${a}'s policy`)
          // Its later episodes are dropped too, and the binding stays.
          expect(yield* binding.admit(item(b, EpisodePurpose.TRAIN))).toBe(false)
          expect(binding.bound()).toBe(a)

          yield* store.transition(a, JobState.SUCCEEDED)
          const c = yield* running(store, JobKind.TRAIN)
          expect(yield* binding.admit(item(c, EpisodePurpose.TRAIN))).toBe(true)
          expect(binding.bound()).toBe(c)
          yield* Effect.sleep("10 millis")
          expect(followed).toEqual([a, c])
          expect(stopped).toEqual([a])
        }),
      ).pipe(Effect.provide(MemoryBusLive())),
    ))
})
