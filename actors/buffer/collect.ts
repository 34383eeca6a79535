import { Clock, Effect, Stream } from "effect"
import { type Trajectory, TrajectoryRecordSchema } from "../../proto/index.ts"
import { type MalformedMessage, protobufDecoder } from "../../services/actor/index.ts"
import type { BusError, BusShape, Subjects } from "../../services/bus/index.ts"
import { TrajectoryAssembler, TrajectoryCorrupt } from "./assemble.ts"

const decodeRecord = protobufDecoder(TrajectoryRecordSchema)

/**
 * Reads one job's trajectory stream from the start with a durable consumer of its own and
 * returns the first `count` complete trajectories (tools, experiments and tests; the buffer
 * actor is the production reader). Corrupt trajectories and undecodable records (a
 * MalformedMessage) fail the effect.
 */
export const collectTrajectories = (
  bus: BusShape,
  subjects: Subjects,
  job: string,
  count: number,
  durable = `collect-${job}`,
  onTrajectory?: (t: Trajectory) => void,
): Effect.Effect<Trajectory[], BusError | MalformedMessage | TrajectoryCorrupt> =>
  Effect.gen(function* () {
    yield* bus.ensureConsumer({
      stream: subjects.trajectoriesStream,
      durable,
      filterSubject: subjects.trajectories(job),
      ackWaitMs: 60_000,
      maxDeliver: 5,
    })
    const assembler = new TrajectoryAssembler()
    const found = yield* bus
      .consume(subjects.trajectoriesStream, durable, { maxInFlight: 256 })
      .pipe(
        Stream.mapEffect((item) =>
          Effect.gen(function* () {
            const record = yield* decodeRecord(item.data)
            yield* item.ack
            const done = assembler.add(record, yield* Clock.currentTimeMillis)
            if (done instanceof TrajectoryCorrupt) return yield* Effect.fail(done)
            if (done === undefined) return undefined
            const t = done.toTrajectory()
            onTrajectory?.(t)
            return t
          }),
        ),
        Stream.filter((t): t is Trajectory => t !== undefined),
        Stream.take(count),
        Stream.runCollect,
      )
    return Array.from(found)
  })
