import { create } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { EpisodeEndSchema } from "../../proto/index.ts"
import { makeMemoryBus, subjectsFor } from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import { encodeRecord, endRecord } from "../sampler/records.ts"
import { collectTrajectories } from "./collect.ts"

describe("collectTrajectories", () => {
  it("fails with MalformedMessage on an undecodable record instead of dying (found by npm run test:fuzz)", async () => {
    const subjects = subjectsFor("ctest")
    const job = "job-c"
    const exit = await Effect.runPromiseExit(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* makeMemoryBus()
          yield* ensureSamplerStreams(bus, subjects)
          // A truncated message: fromBinary throws RangeError("premature EOF") on it.
          yield* bus.jsPublish(subjects.trajectories(job), Uint8Array.of(0x0a, 0x05))
          const end = create(EpisodeEndSchema, { jobId: job, episodeId: "e", totalChunks: 0 })
          yield* bus.jsPublish(subjects.trajectories(job), encodeRecord(endRecord(end)))
          return yield* collectTrajectories(bus, subjects, job, 1)
        }),
      ),
    )
    expect(exit._tag).toBe("Failure")
    if (exit._tag === "Failure") {
      const reasons = exit.cause.reasons
      expect(reasons.map((r) => r._tag)).toEqual(["Fail"])
      expect(String(reasons[0]?._tag === "Fail" ? reasons[0].error : "")).toMatch(
        /MalformedMessage.*premature EOF/,
      )
    }
  })
})
