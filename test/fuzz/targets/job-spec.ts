import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { clone, type DescMessage, fromBinary, type Message, toBinary } from "@bufbuild/protobuf"
import { reflect } from "@bufbuild/protobuf/reflect"
import { parseJobFile } from "../../../cli/job-file.ts"
import { type JobSpec, JobSpecSchema } from "../../../proto/index.ts"
import { validateJobSpec } from "../../../services/gateway/validate.ts"
import type { Violation } from "../../../services/jobs/index.ts"
import { ACCEPTED, crash, type FuzzTarget, judge, REJECTED, type Verdict } from "../harness.ts"
import { mutateProto, toHex } from "../mutate.ts"
import { randomMessage, randomScalar } from "../proto-gen.ts"
import type { Random } from "../random.ts"

/**
 * JobSpecs as SubmitJob receives them, through the gateway's validateJobSpec: random specs (every
 * field at random), valid specs (the example job files) with a few fields set to random values,
 * and mutated wire bytes that still decode. Every refusal must name a field and a reason.
 */
const EXAMPLES = ["eval.yaml", "train.yaml"].map((name) =>
  fileURLToPath(new URL(`../../../cli/examples/${name}`, import.meta.url)),
)
let valid: JobSpec[] = []

/** `message` with one field, anywhere in its tree, set to a random value of its type. */
const perturb = (rng: Random, message: Message, schema: DescMessage): void => {
  const r = reflect(schema, message)
  const field = rng.pick(schema.fields)
  if (field.fieldKind === "message") {
    if (!r.isSet(field) || rng.bool(0.2)) {
      r.set(field, reflect(field.message, randomMessage(rng, field.message, 2)))
      return
    }
    const nested = r.get(field)
    perturb(rng, nested.message, field.message)
    return
  }
  if (field.fieldKind === "scalar") r.set(field, randomScalar(rng, field.scalar))
  else if (field.fieldKind === "enum") r.set(field, rng.pick([0, 1, 2, 3, 4, 99, -1]))
  else {
    // lists and maps: replaced by a random spec's
    const donor = reflect(schema, randomMessage(rng, schema))
    r.set(field, donor.get(field))
  }
}

const spec = (rng: Random): JobSpec => {
  const roll = rng.int(10)
  if (roll < 3) return randomMessage(rng, JobSpecSchema)
  const base = clone(JobSpecSchema, rng.pick(valid))
  if (roll < 8) {
    for (let n = rng.range(0, 3); n > 0; n--) perturb(rng, base, JobSpecSchema)
    return base
  }
  try {
    return fromBinary(JobSpecSchema, mutateProto(rng, toBinary(JobSpecSchema, base)))
  } catch {
    return base // undecodable bytes never reach validation (the gRPC layer refuses them)
  }
}

/** Every violation names a field under `spec` and says what is wrong. */
export const violationsVerdict = (violations: ReadonlyArray<Violation>): Verdict => {
  if (violations.length === 0) return ACCEPTED
  const bad = violations.find((v) => !v.fieldPath.startsWith("spec") || v.reason === "")
  return bad === undefined
    ? REJECTED
    : crash(`violation without a field or reason: ${JSON.stringify(bad)}`)
}

export const jobSpecTarget: FuzzTarget = {
  name: "job spec",
  description:
    "JobSpec messages (random, perturbed examples, mutated wire bytes) → validateJobSpec",
  setup: async () => {
    valid = EXAMPLES.map((file) => parseJobFile(readFileSync(file, "utf8"), file).spec)
  },
  make: (rng) => {
    const s = spec(rng)
    return {
      input: () => toHex(toBinary(JobSpecSchema, s)),
      run: () => judge(() => violationsVerdict(validateJobSpec(s))),
    }
  },
}
