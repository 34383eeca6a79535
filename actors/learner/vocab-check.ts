/**
 * t1's learner trains on the token ids the samplers' policy produced, so its model must have a
 * row for every id that policy can emit. A train job whose policy (an engine's model) has a
 * larger vocabulary than the learner's model would have its trajectories dropped one by one;
 * it is refused when the learner admits it instead, naming both sizes.
 */
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { loadTokenizerJson } from "../../model/index.ts"
import { ErrorCode, JobState } from "../../proto/index.ts"
import type { JobStoreShape } from "../../services/jobs/index.ts"
import { ActorConfigError, type FlagValues, flagText } from "../hosted.ts"

/** The ids a policy can emit: its model's vocabulary. */
export interface PolicyVocabulary {
  readonly size: number
  /** Where the size comes from, for the refusal's message. */
  readonly source: string
}

/**
 * The vocabulary of an engine's model directory: config.json's `vocab_size` (the rows of the
 * embedding and lm_head an engine samples over, often more than the tokenizer names), else the
 * tokenizer.json's. Throws (naming the file) when neither can be read.
 */
export const policyVocabulary = (dir: string): PolicyVocabulary => {
  const configPath = join(dir, "config.json")
  if (existsSync(configPath)) {
    const json = JSON.parse(readFileSync(configPath, "utf8")) as { vocab_size?: unknown }
    const size = json.vocab_size
    if (typeof size === "number" && Number.isInteger(size) && size > 0)
      return { size, source: `${configPath} vocab_size` }
  }
  const tokenizerPath = join(dir, "tokenizer.json")
  return {
    size: loadTokenizerJson(readFileSync(tokenizerPath, "utf8")).vocabSize,
    source: `${tokenizerPath}, no vocab_size in config.json`,
  }
}

/** Why a job is refused, or undefined when the model covers the policy's vocabulary. */
export const vocabularyMismatch = (
  policy: PolicyVocabulary,
  modelVocabSize: number,
): string | undefined =>
  policy.size <= modelVocabSize
    ? undefined
    : `the policy's vocabulary (${policy.size} ids, ${policy.source}) exceeds the learner's model vocabulary (${modelVocabSize} ids): its trajectories' token ids ${modelVocabSize}..${policy.size - 1} have no row in the model; start from weights whose vocab_size is at least ${policy.size} (policy_ref)`

/**
 * Fails the job (FAILED, FAILED_PRECONDITION naming both sizes, in its state_changed event) when
 * the learner's model cannot train on the policy's ids; true when it did.
 */
export const refuseVocabulary = (
  store: JobStoreShape,
  jobId: string,
  policy: PolicyVocabulary | undefined,
  modelVocabSize: number,
) =>
  Effect.gen(function* () {
    if (policy === undefined) return false
    const why = vocabularyMismatch(policy, modelVocabSize)
    if (why === undefined) return false
    yield* Effect.logWarning(`learner: job ${jobId} refused at admission: ${why}`)
    // Ended meanwhile (cancelled): nothing to refuse, and nothing to train either.
    yield* store
      .transition(jobId, JobState.FAILED, {
        error: { code: ErrorCode.FAILED_PRECONDITION, message: why },
      })
      .pipe(Effect.catchTag("JobTerminal", () => Effect.void))
    return true
  })

/**
 * `t1 actor learner --model-dir DIR` (T1_MODEL_DIR, the variable the samplers read their engine
 * model's directory from): the policy's vocabulary for the pool's admission check; none without it.
 */
export const policyVocabularyFlag = (
  flags: FlagValues,
): { readonly policyVocabulary?: PolicyVocabulary } => {
  const dir = flagText(flags, "model-dir", "T1_MODEL_DIR")
  if (dir === undefined) return {}
  try {
    return { policyVocabulary: policyVocabulary(dir) }
  } catch (e) {
    throw new ActorConfigError(`--model-dir ${dir}: ${e instanceof Error ? e.message : String(e)}`)
  }
}
