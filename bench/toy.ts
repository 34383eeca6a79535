/**
 * A fast loop for the learning question of `npm run exp:learn`: the same ladder tasks, policy,
 * warm start and PPO update, without the actors — one reply per task, checked as a string
 * against the reference commands instead of by the task's tests. `--format chat` (the default)
 * lays the prompt out as the episode loop does (system prompt, chat template) and asks for the
 * reply in the episode's action format (one ```bash block, then <|done|>), so the format tokens
 * are trained as they are through the actors; `--format plain` is the bare instruction and a `$`.
 * An RL update takes ~2–4 s here against ~40 s through the actors, so hundreds of updates fit in
 * minutes. Figures are for choosing what to run through the real
 * recipe, not for reporting RL gains (exp:learn is that).
 *
 *   npm run exp:toy -- [--seed S] [--rungs 1] [--format chat|plain] [--demos N]
 *     [--demo-names demo|train] [--sft-steps N] [--sft-weight-decay X] [--updates N] [--tasks N] [--samples N] [--lr X]
 *     [--ppo-epochs N] [--minibatches N] [--every N] [--eval-temperature X] [--eval-samples N]
 *     [--json]
 *
 * Evaluation (greedy by default, one episode per task) runs on the held-out tasks (unseen names),
 * on unseen tasks with train names ("seen") and on up to 200 RL-pool tasks ("train").
 */
import { parseArgs } from "node:util"
import { Effect } from "effect"
import type { TrainingSequence } from "../actors/learner/index.ts"
import {
  DEFAULT_LEARNER_CONFIG,
  EMBEDDED_MODEL_CONFIG,
  EMBEDDED_RL_CONFIG,
  Trainer,
} from "../actors/learner/index.ts"
import { LADDER_RECIPE_DEFAULTS as D, sftUpdates } from "../actors/recipe/index.ts"
import {
  DONE_TOKEN,
  episodeSystemPrompt,
  parseShellBlock,
  shellBlockShort,
} from "../actors/sampler/index.ts"
import { loadBundledTokenizer } from "../model/bundled/bundled.ts"
import { type Generated, generateBatch, Rng, TinyMoe } from "../model/index.ts"
import { selectKernels } from "../model/kernels/select.ts"
import { Sequence } from "../model/moe/sequence.ts"
import { ChatTemplate } from "../model/tokenizer/chat.ts"
import { type LadderTask, ladderSplits, parseRungs } from "../tasks/ladder/index.ts"

const USAGE = `usage: npm run exp:toy -- [options]

  --seed S               ladder, model and sampling seed (default 0)
  --rungs 1,2,3          ladder rungs (default 1: one command per task)
  --format chat|plain    chat: the episode's system prompt and chat template, the reply one
                         \`\`\`bash block and <|done|> (a task's commands as one block); plain:
                         the instruction, a $ and the commands (default chat)
  --demos N              demonstrations per train family (default ${D.demos})
  --demo-names demo|train
                         demonstrations from the ladder's demo pool or the whole train pool
                         (default train)
  --sft-steps N          warm-start SFT steps of 8 sequences at ${D.sftLr} (default ${D.sftSteps})
  --sft-weight-decay X   AdamW weight decay of the warm start (default ${D.sftWeightDecay})
  --updates N            RL updates (default 300)
  --tasks N              tasks per update (default ${D.tasksPerStep})
  --samples N            samples per task: the group (default ${D.samples})
  --lr X                 RL learning rate (default ${D.lr})
  --ppo-epochs N         (default ${EMBEDDED_RL_CONFIG.ppoEpochs})
  --minibatches N        (default ${EMBEDDED_RL_CONFIG.minibatches})
  --every N              evaluate every N updates (default 50)
  --eval-temperature X   sampling temperature of evaluations (default 0: greedy)
  --eval-samples N       episodes per task in an evaluation (default 1)
  --json                 print one JSON object last: held, seen and train rates per evaluation`

class UsageError extends Error {}

const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    rungs: { type: "string" },
    demos: { type: "string" },
    "demo-names": { type: "string" },
    "sft-steps": { type: "string" },
    "sft-weight-decay": { type: "string" },
    updates: { type: "string" },
    tasks: { type: "string" },
    samples: { type: "string" },
    lr: { type: "string" },
    "ppo-epochs": { type: "string" },
    minibatches: { type: "string" },
    every: { type: "string" },
    format: { type: "string" },
    "eval-temperature": { type: "string" },
    "eval-samples": { type: "string" },
    json: { type: "boolean" },
    help: { type: "boolean", short: "h" },
  },
})

const num = (name: keyof typeof values, fallback: number, min: number, integer = true): number => {
  const raw = values[name]
  if (raw === undefined) return fallback
  const n = Number(raw)
  if (typeof raw !== "string" || raw.trim() === "" || !Number.isFinite(n) || n < min)
    throw new UsageError(`--${name} must be a number >= ${min}, got ${JSON.stringify(raw)}`)
  if (integer && !Number.isInteger(n))
    throw new UsageError(`--${name} must be an integer, got ${JSON.stringify(raw)}`)
  return n
}

interface ToyTask {
  readonly id: string
  readonly prompt: ReadonlyArray<number>
  /** The reference commands, one per line. */
  readonly answer: string
}

interface Evaluation {
  readonly update: number
  readonly held: number
  readonly seen: number
  readonly train: number
}

const main = async () => {
  if (values.help) {
    console.log(USAGE)
    return
  }
  const seed = num("seed", 0, 0)
  const rungs = new Set<number>(
    (() => {
      try {
        return parseRungs(values.rungs ?? "1", [1, 2, 3])
      } catch (e) {
        throw new UsageError(e instanceof Error ? e.message : String(e))
      }
    })(),
  )
  const demoNames = values["demo-names"] ?? "train"
  if (demoNames !== "demo" && demoNames !== "train")
    throw new UsageError(`--demo-names must be demo or train, got ${JSON.stringify(demoNames)}`)
  const demosPer = num("demos", D.demos, 1)
  const sftSteps = num("sft-steps", D.sftSteps, 0)
  const sftWeightDecay = num("sft-weight-decay", D.sftWeightDecay, 0, false)
  const updates = num("updates", 300, 0)
  const tasksPer = num("tasks", D.tasksPerStep, 1)
  const samples = num("samples", D.samples, 2)
  const lr = num("lr", D.lr, 0, false)
  const every = num("every", 50, 1)
  const evalTemperature = num("eval-temperature", 0, 0, false)
  const evalSamples = num("eval-samples", 1, 1)
  const format = values.format ?? "chat"
  if (format !== "chat" && format !== "plain")
    throw new UsageError(`--format must be chat or plain, got ${JSON.stringify(format)}`)

  const tokenizer = loadBundledTokenizer()
  const end = tokenizer.specialId("<|end|>")
  const template = new ChatTemplate(tokenizer)
  const system = episodeSystemPrompt(shellBlockShort)
  // plain: commands after a prompt sign, one per line, as a shell transcript would show them;
  // chat: the first turn of an episode, as the sampler lays it out.
  const toToy = (t: LadderTask): ToyTask => ({
    id: t.id,
    prompt:
      format === "chat"
        ? [
            ...template.render(
              [
                { role: "system", content: system },
                { role: "user", content: t.generated.instruction },
              ],
              { addGenerationPrompt: true },
            ).ids,
          ]
        : [...tokenizer.encode(`${t.generated.instruction}\n$`)],
    answer: (t.generated.solution ?? "").trim(),
  })
  const answerIds = (t: ToyTask) =>
    format === "chat"
      ? [
          ...tokenizer.encode(`\`\`\`bash\n${t.answer}\n\`\`\`\n${DONE_TOKEN}`, {
            allowSpecial: true,
          }),
          end,
        ]
      : [...tokenizer.encode(` ${t.answer.replace(/\n/g, "\n$ ")}\n`), end]
  /** 1 when the reply runs exactly the reference commands (and, in chat, completes the task). */
  const score = (t: ToyTask, tokens: ArrayLike<number>): number => {
    const ids = Array.from(tokens).filter((x) => x !== end)
    if (format === "plain")
      return tokenizer.decode(ids).trim().replace(/\n\$ /g, "\n") === t.answer ? 1 : 0
    const action = parseShellBlock(tokenizer.decode(ids))
    return action.kind === "commands" &&
      action.taskComplete &&
      action.commands[0]?.keystrokes.trim() === t.answer
      ? 1
      : 0
  }
  const splits = ladderSplits({
    seed,
    trainPerFamily: D.trainPerFamily,
    evalPerFamily: D.evalPerFamily,
    demosPerFamily: demoNames === "demo" ? demosPer : 0,
  })
  const train = splits.train.filter((t) => rungs.has(t.rung))
  const demos = train.filter((t) => t.index < demosPer).map(toToy)
  const pool = train.filter((t) => t.index >= demosPer).map(toToy)
  const held = splits.eval.filter((t) => rungs.has(t.rung)).map(toToy)
  // Unseen tasks with train names: the train families at another seed (as exp:learn's "seen").
  const seen = ladderSplits({ seed: seed + 500_000, trainPerFamily: 6, evalPerFamily: 0 })
    .train.filter((t) => rungs.has(t.rung))
    .map(toToy)
  if (pool.length === 0) throw new UsageError("no RL tasks: --demos leaves none")

  const model = TinyMoe.create({
    config: { ...EMBEDDED_MODEL_CONFIG, vocabSize: tokenizer.vocabSize },
    seed,
    kernels: selectKernels("auto"),
  })
  const sequence = (
    t: ToyTask,
    answer: ReadonlyArray<number>,
    logprobs: ReadonlyArray<number>,
    reward: number,
    group: string,
    n: number,
  ): TrainingSequence => {
    const ids = Uint32Array.from([...t.prompt, ...answer])
    const lossMask = new Uint8Array(ids.length)
    const lp = new Float32Array(ids.length)
    for (let i = t.prompt.length; i < ids.length; i++) {
      lossMask[i] = 1
      lp[i] = logprobs[i - t.prompt.length] ?? 0
    }
    return {
      episodeId: `${group}-${n}`,
      ids,
      lossMask,
      logprobs: lp,
      routing: undefined,
      reward,
      resolved: reward === 1,
      staleness: 0n,
      testsTotal: 1,
      groupId: group,
    }
  }
  const sample = (tasks: ReadonlyArray<ToyTask>, k: number, temperature: number, rng: Rng) => {
    const requests = tasks.flatMap((t) =>
      Array.from({ length: k }, () => {
        const s = new Sequence(model, model.newCache())
        s.append(t.prompt)
        return {
          task: t,
          request: {
            sequence: s,
            params: {
              temperature,
              topP: 1,
              maxTokens: format === "chat" ? 64 : 48,
              stopTokenIds: new Set([end]),
            },
            rng,
          },
        }
      }),
    )
    const generated = generateBatch(
      model,
      requests.map((r) => r.request),
    )
    return requests.map((r, i) => {
      const g = generated[i] as Generated
      return { task: r.task, generated: g, reward: score(r.task, g.tokens) }
    })
  }
  const rate = (tasks: ReadonlyArray<ToyTask>) => {
    const r = sample(tasks, evalSamples, evalTemperature, new Rng(1))
    return r.reduce((a, b) => a + b.reward, 0) / Math.max(1, r.length)
  }
  const t0 = Date.now()
  const log = (line: string) =>
    console.error(`[${((Date.now() - t0) / 1000).toFixed(0)} s] ${line}`)
  const evaluations: Evaluation[] = []
  const evaluate = (update: number) => {
    const e = { update, held: rate(held), seen: rate(seen), train: rate(pool.slice(0, 200)) }
    evaluations.push(e)
    log(
      `update ${update}: held-out ${(100 * e.held).toFixed(1)}%, seen names ${(100 * e.seen).toFixed(1)}%, train ${(100 * e.train).toFixed(1)}% (${evalTemperature === 0 ? "greedy" : `temperature ${evalTemperature}`})`,
    )
  }

  const sft = new Trainer(model, {
    ...DEFAULT_LEARNER_CONFIG,
    sftLr: D.sftLr,
    weightDecay: sftWeightDecay,
    replayRouting: false,
  })
  const demoSequences = demos.map((t, i) => sequence(t, answerIds(t), [], 1, `demo${i}`, 0))
  const rng = new Rng(seed + 1)
  await Effect.runPromise(sftUpdates(sft, demoSequences, sftSteps, D.sftBatch, rng))
  log(
    `SFT: ${sftSteps} steps on ${demos.length} demonstrations; ${held.length} held-out, ${seen.length} seen-names and ${pool.length} RL tasks`,
  )
  evaluate(0)
  const rl = new Trainer(model, {
    ...EMBEDDED_RL_CONFIG,
    lr,
    criticLr: lr,
    replayRouting: false,
    ppoEpochs: num("ppo-epochs", EMBEDDED_RL_CONFIG.ppoEpochs, 1),
    minibatches: num("minibatches", EMBEDDED_RL_CONFIG.minibatches, 1),
    seed,
  })
  for (let u = 1; u <= updates; u++) {
    const picked = Array.from(
      { length: tasksPer },
      () => pool[Math.floor(rng.next() * pool.length)] as ToyTask,
    )
    const results = sample(picked, samples, 1, rng)
    rl.ppoStep(
      results.map((r, i) =>
        sequence(
          r.task,
          r.generated.tokens,
          r.generated.logprobs,
          r.reward,
          `u${u}t${Math.floor(i / samples)}`,
          i,
        ),
      ),
    )
    if (u % every === 0 || u === updates) evaluate(u)
  }
  if (values.json) console.log(JSON.stringify({ seed, updates, lr, evaluations }))
}

main().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error)
  console.error(`exp:toy: ${message}${error instanceof UsageError ? `\n${USAGE}` : ""}`)
  process.exit(error instanceof UsageError ? 2 : 1)
})
