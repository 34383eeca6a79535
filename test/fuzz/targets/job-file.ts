import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import YAML from "yaml"
import { parseJobFile } from "../../../cli/job-file.ts"
import { validateJobSpec } from "../../../services/gateway/validate.ts"
import { ACCEPTED, crash, type FuzzTarget, judge, REJECTED, type Verdict } from "../harness.ts"
import { type Doc, mutateDoc } from "../mutate-json.ts"
import { invalidUtf8, mutateText } from "../mutate-text.ts"
import type { Random } from "../random.ts"

/**
 * Job files as `t1 submit` reads them (cli/job-file.ts): the example YAML files and their JSON
 * form, mutated as documents (keys dropped, wrong types, extreme values) and as text, plus random
 * text. parseJobFile never throws; a file it accepts must pass validateJobSpec (what the gateway
 * runs), and every problem must say what is wrong.
 */
const EXAMPLES = ["eval.yaml", "train.yaml"].map((name) =>
  readFileSync(fileURLToPath(new URL(`../../../cli/examples/${name}`, import.meta.url)), "utf8"),
)

interface JobFile {
  readonly name: string
  readonly text: string
}

const jobFile = (rng: Random): JobFile => {
  const yaml = rng.pick(EXAMPLES)
  const json = rng.bool(0.4)
  const doc = YAML.parse(yaml) as Doc
  const roll = rng.int(10)
  const structured = roll < 5 ? mutateDoc(rng, doc) : doc
  let text = json ? JSON.stringify(structured, null, 2) : YAML.stringify(structured)
  if (roll >= 5 && roll < 8) text = mutateText(rng, rng.bool() ? text : yaml)
  else if (roll === 8) text = new TextDecoder().decode(invalidUtf8(rng, text))
  else if (roll === 9) text = rng.text(200)
  return { name: json ? "job.json" : rng.pick(["job.yaml", "job.yml", "job"]), text }
}

const parse = (file: JobFile): Verdict => {
  const parsed = parseJobFile(file.text, file.name)
  if (parsed.problems.length === 0) {
    const violations = validateJobSpec(parsed.spec)
    return violations.length === 0
      ? ACCEPTED
      : crash(`accepted, but the gateway refuses it: ${JSON.stringify(violations)}`)
  }
  const bad = parsed.problems.find((p) => p.reason === "")
  return bad === undefined ? REJECTED : crash(`a problem without a reason: ${JSON.stringify(bad)}`)
}

export const jobFileTarget: FuzzTarget = {
  name: "job file",
  description: "job files (example YAML/JSON, mutated, random) → parseJobFile (cli/job-file.ts)",
  make: (rng) => {
    const file = jobFile(rng)
    return {
      input: () => `${file.name} ${Buffer.from(file.text).toString("hex")}`,
      run: () => judge(() => parse(file)),
    }
  },
}
