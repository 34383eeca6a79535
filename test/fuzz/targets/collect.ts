import { Effect } from "effect"
import { collectTrajectories } from "../../../actors/buffer/collect.ts"
import { encodeRecord } from "../../../actors/sampler/records.ts"
import { makeMemoryBus, subjectsFor } from "../../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../../services/episodes/index.ts"
import { type FuzzTarget, judgeEffectAsync } from "../harness.ts"
import { toHex } from "../mutate.ts"
import { disturbed, validRecords } from "./trajectory.ts"

/**
 * collectTrajectories (what `t1 up`, the SFT warm start and exp:alignment read the trajectory
 * stream with) over one job's stream holding a disturbed episode and then a well-formed one, so
 * that the collection of one trajectory always has something to finish with. Each case gets a
 * fresh in-memory bus: consumers left behind by earlier cases would slow every later one.
 */
const subjects = subjectsFor("fuzz")
const JOB = "job-f"

export const collectTarget: FuzzTarget = {
  name: "trajectory collect",
  description: "disturbed trajectory streams (JetStream, in memory) → collectTrajectories",
  make: (rng) => {
    const messages = [
      ...disturbed(rng),
      ...validRecords(rng, { jobId: JOB, episodeId: "sentinel", attempt: 1 }).map(encodeRecord),
    ]
    return {
      input: () => messages.map(toHex).join(" "),
      run: () =>
        judgeEffectAsync(
          Effect.scoped(
            Effect.gen(function* () {
              const bus = yield* makeMemoryBus()
              yield* ensureSamplerStreams(bus, subjects)
              for (const m of messages) yield* bus.jsPublish(subjects.trajectories(JOB), m)
              return yield* collectTrajectories(bus, subjects, JOB, 1)
            }),
          ),
        ),
    }
  },
}
