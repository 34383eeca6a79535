import { create, toBinary } from "@bufbuild/protobuf"
import { Effect, Result } from "effect"
import { TrajectoryAssembler } from "../../../actors/buffer/assemble.ts"
import { takeBatch } from "../../../actors/buffer/client.ts"
import { trainingSequence } from "../../../actors/learner/decode.ts"
import { BatchSchema, type Trajectory } from "../../../proto/index.ts"
import { subjectsFor } from "../../../services/bus/index.ts"
import {
  ACCEPTED,
  type FuzzTarget,
  judge,
  REJECTED,
  type Verdict,
  verdictOfExit,
} from "../harness.ts"
import { FuzzBus } from "../memory-bus.ts"
import { mutateProto, toHex } from "../mutate.ts"
import { protoInput } from "../proto-gen.ts"
import type { Random } from "../random.ts"
import { validRecords } from "./trajectory.ts"

/**
 * What the learner does with a batch: the buffer's reply through takeBatch, then every
 * trajectory in it through trainingSequence. Batches are random, or built from well-formed
 * trajectories and then mutated, so both the rejections and the accepted path are reached.
 */
const fuzzBus = new FuzzBus()
const subjects = subjectsFor("fuzz")

const assembled = (rng: Random): Trajectory[] => {
  const out: Trajectory[] = []
  for (let i = rng.range(1, 3); i > 0; i--) {
    const assembler = new TrajectoryAssembler()
    for (const record of validRecords(rng)) {
      const done = assembler.add(record, 0)
      if (done !== undefined && !(done instanceof Error)) out.push(done.toTrajectory())
    }
  }
  return out
}

const batchBytes = (rng: Random): Uint8Array => {
  if (rng.bool(0.3)) return protoInput(rng, BatchSchema, mutateProto)
  const valid = toBinary(
    BatchSchema,
    create(BatchSchema, { jobId: "j", batchId: "b-1", trajectories: assembled(rng) }),
  )
  return rng.bool(0.3) ? valid : mutateProto(rng, valid)
}

const learn = async (data: Uint8Array): Promise<Verdict> => {
  const exit = await Effect.runPromiseExit(
    takeBatch(fuzzBus.replying(data), subjects, { jobId: "j" }),
  )
  if (exit._tag === "Failure") return verdictOfExit(exit)
  return judge(() => {
    const read = exit.value.trajectories.map((t) => trainingSequence(t, 1n))
    return read.length > 0 && read.every(Result.isSuccess) ? ACCEPTED : REJECTED
  })
}

export const learnerBatchTarget: FuzzTarget = {
  name: "learner batch",
  description: "Batch replies → takeBatch, then trainingSequence per trajectory (learner)",
  setup: fuzzBus.setup,
  teardown: fuzzBus.teardown,
  make: (rng) => {
    const data = batchBytes(rng)
    return { input: () => toHex(data), run: () => learn(data) }
  },
}
