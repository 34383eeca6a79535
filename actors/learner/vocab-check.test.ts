import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, References } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { BUNDLED_TOKENIZER, loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ErrorCode, JobState } from "../../proto/index.ts"
import { Bus, subjectsFor } from "../../services/bus/index.ts"
import { JobStore } from "../../services/jobs/index.ts"
import { latestAnnouncement } from "../../services/weights/index.ts"
import { runInProcess } from "../../test/support/in-process.ts"
import { smallTrainSpec } from "../../test/support/train-spec.ts"
import { runLearnerPool } from "./job-pool.ts"
import { type PolicyVocabulary, policyVocabulary, policyVocabularyFlag } from "./vocab-check.ts"

const root = mkdtempSync(join(tmpdir(), "t1-vocab-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe("policyVocabulary", () => {
  it("reads an engine model directory's config.json vocab_size, else its tokenizer.json", () => {
    const engine = join(root, "engine")
    const tokenizerOnly = join(root, "tokenizer-only")
    for (const dir of [engine, tokenizerOnly]) {
      mkdirSync(dir, { recursive: true })
      copyFileSync(BUNDLED_TOKENIZER, join(dir, "tokenizer.json"))
    }
    // A Qwen3-sized model: more embedding rows than its tokenizer names.
    writeFileSync(
      join(engine, "config.json"),
      JSON.stringify({ model_type: "qwen3_moe", vocab_size: 151_936 }),
    )
    expect(policyVocabulary(engine)).toEqual({
      size: 151_936,
      source: `${join(engine, "config.json")} vocab_size`,
    })
    const fromTokenizer = policyVocabulary(tokenizerOnly)
    expect(fromTokenizer.size).toBe(loadBundledTokenizer().vocabSize)
    expect(fromTokenizer.source).toContain("tokenizer.json")
    expect(() => policyVocabulary(join(root, "missing"))).toThrow(/tokenizer\.json/)
    // `t1 actor learner --model-dir DIR` (or T1_MODEL_DIR) hands it to the pool.
    expect(policyVocabularyFlag({ "model-dir": engine }).policyVocabulary?.size).toBe(151_936)
    expect(policyVocabularyFlag({})).toEqual({})
    expect(() => policyVocabularyFlag({ "model-dir": join(root, "missing") })).toThrow(
      /--model-dir .*missing.*tokenizer\.json/,
    )
  })
})

/** Submits a train job to a learner pool that knows the policy's vocabulary; what became of it. */
const admit = (policy: PolicyVocabulary) => {
  const subjects = subjectsFor(`voc${Math.random().toString(36).slice(2, 7)}`)
  return runInProcess(
    subjects,
    Effect.gen(function* () {
      const bus = yield* Bus
      const store = yield* JobStore
      const { status } = yield* store.create(
        smallTrainSpec("vocabulary", { ppoSteps: 1 }) as Parameters<typeof store.create>[0],
      )
      const jobId = status.jobId
      yield* Effect.forkScoped(runLearnerPool({ subjects, policyVocabulary: policy }))
      // Either the job is refused (FAILED) or the learner starts it (announces its weights).
      for (let i = 0; i < 300; i++) {
        const now = yield* store.get(jobId)
        const announced = yield* latestAnnouncement(bus, subjects, jobId)
        if (now.state === JobState.FAILED || announced !== undefined)
          return { status: now, announced: announced?.policyVersion }
        yield* Effect.sleep("100 millis")
      }
      return yield* Effect.die(new Error("the learner pool neither refused nor started the job"))
    }).pipe(Effect.provideService(References.MinimumLogLevel, "None")),
  )
}

describe("learner pool: admission against the policy's vocabulary", () => {
  it("refuses a train job whose policy vocabulary exceeds its model's, naming both; admits one that fits", async () => {
    const model = loadBundledTokenizer().vocabSize
    const refused = await admit({ size: 151_936, source: "qwen3/config.json vocab_size" })
    expect(refused.status.state).toBe(JobState.FAILED)
    expect(refused.status.error?.code).toBe(ErrorCode.FAILED_PRECONDITION)
    expect(refused.status.error?.message).toContain("151936 ids, qwen3/config.json vocab_size")
    expect(refused.status.error?.message).toContain(`learner's model vocabulary (${model} ids)`)
    // Nothing was started: no weights announced, so no episode is ever admitted for it.
    expect(refused.announced).toBeUndefined()
    const admitted = await admit({ size: model, source: "the bundled tokenizer" })
    expect(admitted.status.state).not.toBe(JobState.FAILED)
    expect(admitted.announced).toBe(0n)
  }, 60_000)
})
