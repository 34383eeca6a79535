/**
 * The train/inference alignment experiment (T1's table: TITO and R3 lower the learner–sampler
 * log-prob gap). Episodes of the bundled tasks are sampled with the embedded TinyMoE running as a
 * deployed sampler would — weights rounded to bfloat16 and the gpu.js kernels where they are
 * faster (`auto`) — and the learner re-scores them with the f32 weights and the TypeScript
 * reference kernels:
 *
 *   diff_tito_r3  the sampled ids, the sampler's routing replayed at every position
 *   diff_no_r3    the sampled ids, routing recomputed by the learner's router
 *   diff_no_tito  the conversation re-tokenised from its text (as a text-based trainer would),
 *                 routing recomputed (rows no longer line up with the sampler's positions)
 *
 * Each figure is train_infer_logprob_abs_diff: per episode, the mean over generated tokens of
 * |log p_learner − log p_sampler|, averaged over episodes. Without TITO a re-tokenised assistant
 * message has other tokens than were sampled; for such a message the difference is taken between
 * the message's total log-probabilities and counted per sampled token.
 *
 *   npm run exp:alignment -- [--json] [--episodes N] [--turns N] [--seed S]
 *
 * Needs a Docker engine and the t1-base image (`npx t1 image build-base`). Reports; never asserts.
 */

import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { Effect, Layer, Logger, Result } from "effect"
import { collectTrajectories } from "../actors/buffer/index.ts"
import { episodeWorkItem } from "../actors/coordinator/index.ts"
import {
  DEFAULT_LEARNER_CONFIG,
  messagesOf,
  Trainer,
  trainInferLogprobAbsDiff,
  trainingSequence,
} from "../actors/learner/index.ts"
import { startSandboxAndVerifier } from "../actors/local.ts"
import { embeddedPolicy, runEpisodeHere, shellBlock } from "../actors/sampler/index.ts"
import { dockerEngineAvailable, resolvedWireTask } from "../actors/sandbox/index.ts"
import { loadBundledTokenizer } from "../model/bundled/bundled.ts"
import {
  bf16Round,
  ChatTemplate,
  decodeWeights,
  mapParams,
  TinyMoe,
  tokenLogprobs,
} from "../model/index.ts"
import { selectKernels } from "../model/kernels/select.ts"
import { EpisodePurpose, type Trajectory } from "../proto/index.ts"
import { Bus, MemoryBusLive, subjectsFor } from "../services/bus/index.ts"
import { ensureSamplerStreams } from "../services/episodes/index.ts"
import { Metrics, makeMetrics } from "../services/metrics/index.ts"
import { loadTask } from "../tasks/index.ts"

const USAGE = `usage: npm run exp:alignment -- [--json] [--episodes N] [--turns N] [--seed S] [--weights FILE]

  --json          also print one JSON object as the last line of output
  --episodes N    episodes to sample, one per bundled training task (default 8)
  --turns N       agent turns per episode (default 4)
  --seed S        model initialisation and sampling seed (default 0)
  --weights FILE  TinyMoE weights to use (e.g. from t1 train sft); default: initialised from --seed`

const { values } = parseArgs({
  options: {
    json: { type: "boolean" },
    episodes: { type: "string" },
    turns: { type: "string" },
    seed: { type: "string" },
    weights: { type: "string" },
    help: { type: "boolean", short: "h" },
  },
})
if (values.help) {
  console.log(USAGE)
  process.exit(0)
}
const int = (raw: string | undefined, fallback: number, name: string) => {
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw) || Number(raw) < 1) {
    console.error(`--${name} must be a positive integer\n\n${USAGE}`)
    process.exit(2)
  }
  return Number(raw)
}
const EPISODES = int(values.episodes, 8, "episodes")
const TURNS = int(values.turns, 4, "turns")
const SEED = values.seed === undefined ? 0 : int(values.seed, 0, "seed")

const TRAIN_DIR = join(import.meta.dirname, "../tasks/bundled/train")

const main = Effect.gen(function* () {
  if (!(yield* dockerEngineAvailable()))
    return yield* Effect.fail(
      new Error("no Docker engine answers; the experiment runs episodes in real sandboxes"),
    )
  const tokenizer = loadBundledTokenizer()
  const template = new ChatTemplate(tokenizer)
  const learnerModel = values.weights
    ? decodeWeights(readFileSync(values.weights)).model
    : TinyMoe.create({ config: { vocabSize: tokenizer.vocabSize }, seed: SEED })
  const samplerParams = mapParams(learnerModel.config, learnerModel.params, "f32", (data) =>
    bf16Round(Float32Array.from(data)),
  )
  const samplerModel = TinyMoe.fromParams(
    learnerModel.config,
    samplerParams,
    "f32",
    selectKernels("auto"),
  )
  const subjects = subjectsFor("alignment")
  const bus = yield* Bus
  yield* ensureSamplerStreams(bus, subjects)
  yield* startSandboxAndVerifier(subjects)
  const policy = yield* embeddedPolicy(samplerModel, 0n, { contextLength: 4096 })
  const dirs = readdirSync(TRAIN_DIR).sort().slice(0, EPISODES)
  const started = Date.now()
  yield* Effect.forEach(
    dirs,
    (name, i) =>
      Effect.gen(function* () {
        const task = yield* loadTask(join(TRAIN_DIR, name))
        const wire = yield* resolvedWireTask(task)
        const episodeId = `align-${i}`
        const item = episodeWorkItem({
          jobId: "alignment",
          episodeId,
          task: wire,
          sampling: { temperature: 1, topP: 1, maxTokens: 48, seed: BigInt(SEED * 1000 + i) },
          limits: {
            maxTurns: TURNS,
            maxTokens: 3000,
            commandTimeoutMs: 10_000,
            observationMaxTokens: 256,
          },
          purpose: EpisodePurpose.TRAIN,
          admittedAtMs: Date.now(),
        })
        return yield* runEpisodeHere(bus, subjects, item, { policy, template, format: shellBlock })
      }),
    { concurrency: 4 },
  )
  const trajectories: Trajectory[] = yield* collectTrajectories(
    bus,
    subjects,
    "alignment",
    dirs.length,
  )
  const sampleSeconds = (Date.now() - started) / 1000

  const trainer = new Trainer(learnerModel, { ...DEFAULT_LEARNER_CONFIG, temperature: 1 })
  const withR3: Parameters<typeof trainInferLogprobAbsDiff>[0][number][] = []
  const withoutR3: typeof withR3 = []
  let tokens = 0
  let generated = 0
  let retokenisedTurns = 0
  let turns = 0
  const noTito: number[] = []
  for (const t of trajectories) {
    const s = Result.getOrThrow(trainingSequence(t, 0n))
    if (!s) continue
    tokens += s.ids.length
    const action = s.lossMask.subarray(1)
    const sampler = Float64Array.from(s.logprobs.subarray(1))
    generated += action.reduce((a, b) => a + b, 0)
    withR3.push({ learner: trainer.score(s, true), sampler, action })
    withoutR3.push({ learner: trainer.score(s, false), sampler, action })

    // Without TITO: re-render the conversation from text and score that.
    const { messages, turns: sampled } = messagesOf(template, s.ids, s.lossMask, s.logprobs)
    const rendered = template.render(messages)
    const ids = rendered.ids
    const scored = learnerModel.score(ids.subarray(0, ids.length - 1), { tape: false })
    const lp = tokenLogprobs(scored.logits, ids.subarray(1), learnerModel.config.vocabSize)
    const at = (position: number) => lp[position - 1] as number
    let abs = 0
    let count = 0
    let k = 0
    for (const seg of rendered.segments) {
      if (seg.role !== "assistant" || seg.message >= messages.length) continue
      const turn = sampled[k]
      if (!turn) break
      if (seg.kind === "content") {
        turns++
        const same =
          seg.ids.length === turn.ids.length && seg.ids.every((v, j) => v === turn.ids[j])
        if (same) {
          turn.ids.forEach((_, j) => {
            abs += Math.abs(at(seg.start + j) - (turn.logprobs[j] as number))
          })
        } else {
          retokenisedTurns++
          let learner = 0
          for (let j = 0; j < seg.ids.length; j++) learner += at(seg.start + j)
          abs += Math.abs(learner - turn.logprobs.reduce((a, b) => a + b, 0))
        }
        count += turn.ids.length
      } else if (seg.kind === "end") {
        if (turn.endLogprob !== undefined) {
          abs += Math.abs(at(seg.start) - turn.endLogprob)
          count++
        }
        k++
      }
    }
    if (count > 0) noTito.push(abs / count)
  }
  const result = {
    diff_tito_r3: trainInferLogprobAbsDiff(withR3),
    diff_no_r3: trainInferLogprobAbsDiff(withoutR3),
    diff_no_tito: noTito.reduce((a, b) => a + b, 0) / Math.max(1, noTito.length),
    episodes: trajectories.length,
    tokens,
    generated_tokens: generated,
    retokenised_turns: retokenisedTurns,
    assistant_turns: turns,
    sample_seconds: sampleSeconds,
    sampler:
      "TinyMoE default config, weights rounded to bfloat16, gpu.js kernels where faster (auto)",
    learner: "same weights in f32, TypeScript reference kernels",
  }
  const row = (name: string, v: number) => `| ${name.padEnd(28)} | ${v.toFixed(4).padStart(8)} |`
  console.log(
    `alignment: ${result.episodes} episodes, ${tokens} tokens (${generated} generated), sampled in ${sampleSeconds.toFixed(1)} s`,
  )
  console.log(`sampler: ${result.sampler}\nlearner: ${result.learner}\n`)
  console.log("| train_infer_logprob_abs_diff |  nats   |")
  console.log("|------------------------------|---------|")
  console.log(row("TITO + R3", result.diff_tito_r3))
  console.log(row("TITO, no R3", result.diff_no_r3))
  console.log(row("no TITO (re-tokenised), no R3", result.diff_no_tito))
  console.log(`\nre-tokenisation changed ${retokenisedTurns} of ${turns} assistant turns`)
  if (values.json) console.log(JSON.stringify(result))
})

Effect.runPromise(
  Effect.scoped(main).pipe(
    // Logs go to stderr: with --json the JSON object must be the last line of stdout.
    Effect.provideService(Logger.LogToStderr, true),
    Effect.provide(
      Layer.mergeAll(
        MemoryBusLive(),
        Layer.succeed(Metrics, makeMetrics({ defaultMetrics: false })),
      ),
    ),
  ),
).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(`exp:alignment: ${error instanceof Error ? error.message : String(error)}`)
    process.exit(1)
  },
)
