/**
 * Does RL make the policy better? The T1 recipe on the task ladder, through the real actors in one
 * process (embedded TinyMoE samplers, sandbox host, verifier, buffer, learner):
 *
 *   1. SFT warm start on a fixed, limited set of demonstrations (reference solutions of a few
 *      ladder train tasks per family, played through the real episode loop);
 *   2. evaluation on held-out tasks: in-distribution (unseen names and values) and
 *      out-of-distribution (families never trained on), k samples per task;
 *   3. RL on many more train tasks that have verifiers but no demonstrations: each step admits
 *      whole groups of episodes, the buffer serves them, the learner updates and publishes
 *      weights the samplers switch to;
 *   4. evaluation again; and an SFT-only control arm: the same warm start given RL's optimiser
 *      steps as more SFT on the same demonstrations, evaluated the same way.
 *
 * Repeated for several seeds (ladder, model initialisation and sampling all follow the seed).
 *
 *   npm run exp:learn -- [--json] [--seeds N] [--ablate] [options below]
 *
 * Sandboxes: the local driver by default (python3 with pytest on this host); `--driver docker`
 * needs a Docker engine and the t1-base image (`npx t1 image build-base`). Reports; never asserts.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { Effect, Fiber, Layer, Logger, Queue, References } from "effect"
import { runBuffer } from "../actors/buffer/index.ts"
import { runLearner, type StepReport } from "../actors/learner/actor.ts"
import { type TrainingSequence, trainingSequence } from "../actors/learner/decode.ts"
import { EMBEDDED_MODEL_CONFIG, EMBEDDED_RL_CONFIG } from "../actors/learner/embedded.ts"
import { goldenTrajectories } from "../actors/learner/golden.ts"
import {
  continuedActorOptimizer,
  DEFAULT_LEARNER_CONFIG,
  type LearnerConfig,
  Trainer,
} from "../actors/learner/trainer.ts"
import { followWeights } from "../actors/learner/weights.ts"
import { startSandboxAndVerifier } from "../actors/local.ts"
import { shellBlockShort } from "../actors/sampler/actions/index.ts"
import { runSampler } from "../actors/sampler/actor.ts"
import { runEpisodeBatch } from "../actors/sampler/batch.ts"
import { embeddedPolicy } from "../actors/sampler/policy/embedded.ts"
import { ensureSamplerStreams } from "../actors/sampler/streams.ts"
import { dockerEngineAvailable } from "../actors/sandbox/docker/index.ts"
import { loadBundledTokenizer } from "../model/bundled/bundled.ts"
import { ChatTemplate, type Kernels, mapParams, Rng, TinyMoe } from "../model/index.ts"
import { selectKernels } from "../model/kernels/select.ts"
import { EpisodePurpose, type Task as TaskMessage, type Trajectory } from "../proto/index.ts"
import {
  Bus,
  type BusShape,
  MemoryBusLive,
  type Subjects,
  subjectsFor,
} from "../services/bus/index.ts"
import { Metrics, makeMetrics } from "../services/metrics/index.ts"
import { loadTasks, type Task } from "../tasks/index.ts"
import { type LadderTask, writeLadder } from "../tasks/ladder/index.ts"
import { resolvedWireTask } from "../tasks/wire.ts"

const USAGE = `usage: npm run exp:learn -- [--json] [--seeds N] [--ablate] [options]

  --json                 print one JSON object as the last line of output
  --seeds N              seeds (ladder, model and sampling), 0..N-1 (default 3)
  --first-seed S         start at seed S (default 0)
  --demos N              demonstrations per train family for the warm start (default 8)
  --train-per-family N   ladder train tasks per family (default 24)
  --eval-per-family N    held-out tasks per family, in-distribution and OOD (default 6)
  --seen-per-family N    unseen tasks with train names per family (default 3)
  --sft-steps N          warm-start SFT steps (default 600)
  --sft-batch N          sequences per SFT step (default 8)
  --sft-lr X             SFT learning rate (default 2e-3)
  --rl-steps N           RL updates (default 40)
  --tasks-per-step N     tasks per RL update (default 8)
  --samples N            episodes per task in an RL update: the group (default 8)
  --eval-samples N       episodes per held-out task (default 2)
  --lr X                 RL learning rate (default 3e-4)
  --turns N              agent turns per episode (default 5)
  --concurrency N        episodes run at once (default 6)
  --driver local|docker  sandbox driver (default local: the ladder's tasks are synthetic and a
                         container per episode would cost most of the run; docker needs the
                         t1-base image)
  --ablate               also run the ablations on the first seed (README table)`

interface Options {
  readonly seeds: number
  readonly firstSeed: number
  readonly demos: number
  readonly trainPerFamily: number
  readonly evalPerFamily: number
  readonly seenPerFamily: number
  readonly sftSteps: number
  readonly sftBatch: number
  readonly sftLr: number
  readonly rlSteps: number
  readonly tasksPerStep: number
  readonly samples: number
  readonly evalSamples: number
  readonly lr: number
  readonly turns: number
  readonly concurrency: number
  readonly driver: "docker" | "local"
}

/** Results of one policy on one held-out set. */
interface Score {
  readonly episodes: number
  readonly resolved: number
  /** Mean over episodes of tests passed / tests total. */
  readonly reward: number
  /** Resolved rate per rung. */
  readonly rungs: Readonly<Record<string, { readonly episodes: number; readonly resolved: number }>>
}

interface SeedResult {
  readonly seed: number
  readonly before: { readonly id: Score; readonly ood: Score; readonly seen: Score }
  readonly after: { readonly id: Score; readonly ood: Score; readonly seen: Score }
  readonly control: Score
  readonly controlSeen: Score
  readonly steps: number
  readonly episodes: number
  readonly minutes: number
  readonly rewardCurve: ReadonlyArray<number>
}

/** Ladder seed offset of the seen-names set (seeds below it stay distinct). */
const SEEN_SEED_OFFSET = 500_000

const rate = (s: Score) => (s.episodes === 0 ? 0 : s.resolved / s.episodes)

const scoreOf = (
  trajectories: ReadonlyArray<Trajectory>,
  rungOf: (taskId: string) => number,
): Score => {
  const scored = trajectories.filter((t) => t.end && !t.end.infraFailed && !t.end.unverifiable)
  const rungs: Record<string, { episodes: number; resolved: number }> = {}
  let resolved = 0
  let reward = 0
  for (const t of scored) {
    const end = t.end
    if (end === undefined) continue
    const rung = String(rungOf(end.task?.taskId ?? ""))
    const r = rungs[rung] ?? { episodes: 0, resolved: 0 }
    rungs[rung] = r
    r.episodes++
    if (end.resolved) {
      r.resolved++
      resolved++
    }
    reward += end.testsTotal > 0 ? end.testsPassed / end.testsTotal : 0
  }
  return {
    episodes: scored.length,
    resolved,
    reward: scored.length === 0 ? 0 : reward / scored.length,
    rungs,
  }
}

/** A copy of the model's weights in f32 on the same kernels, for a trainer or policy of its own. */
const copyOf = (model: TinyMoe): TinyMoe =>
  TinyMoe.fromParams(
    model.config,
    mapParams(model.config, model.params, "f32", (d) => d),
    "f32",
    model.kernels,
  )

/** `steps` supervised updates on `sequences` (batches drawn with `rng`). */
const sftUpdates = (
  trainer: Trainer,
  sequences: ReadonlyArray<TrainingSequence>,
  steps: number,
  batch: number,
  rng: Rng,
): Effect.Effect<number[]> =>
  Effect.gen(function* () {
    const losses: number[] = []
    for (let step = 0; step < steps; step++) {
      const picked = Array.from(
        { length: Math.min(batch, sequences.length) },
        () => sequences[Math.floor(rng.next() * sequences.length)] as TrainingSequence,
      )
      losses.push(trainer.sftStep(picked).loss)
      yield* Effect.yieldNow
    }
    return losses
  })

const LIMITS = (turns: number) => ({
  maxTurns: turns,
  maxTokens: 1024,
  turnMaxTokens: 64,
  commandTimeoutMs: 10_000,
  observationMaxTokens: 96,
  wallClockSec: 120,
})

const runSeed = (
  seed: number,
  o: Options,
  learner: Partial<LearnerConfig>,
  log: (line: string) => void,
): Effect.Effect<SeedResult, unknown, Bus | Metrics> =>
  Effect.scoped(
    Effect.gen(function* () {
      const started = Date.now()
      const bus: BusShape = yield* Bus
      const subjects: Subjects = subjectsFor(`learn${seed}x${Date.now().toString(36)}`)
      const tokenizer = loadBundledTokenizer()
      const template = new ChatTemplate(tokenizer)
      const format = shellBlockShort
      yield* ensureSamplerStreams(bus, subjects)
      yield* startSandboxAndVerifier(subjects, { concurrency: o.concurrency, driver: o.driver })

      // The ladder of this seed: train, in-distribution eval, OOD eval.
      const dir = mkdtempSync(join(tmpdir(), `t1-learn-${seed}-`))
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
      )
      const ladder = yield* writeLadder(dir, {
        seed,
        trainPerFamily: o.trainPerFamily,
        evalPerFamily: o.evalPerFamily,
      })
      const meta = new Map<string, LadderTask>()
      for (const t of [...ladder.splits.train, ...ladder.splits.eval, ...ladder.splits.ood])
        meta.set(t.id, t)
      const rungOf = (id: string) => meta.get(id)?.rung ?? 0
      const load = (path: string) =>
        Effect.gen(function* () {
          const tasks = yield* loadTasks([path])
          return yield* Effect.forEach(tasks, (task) =>
            Effect.map(resolvedWireTask(task), (wire) => ({ task, wire })),
          )
        })
      log(
        `seed ${seed}: ladder of ${ladder.splits.train.length} train, ${ladder.splits.eval.length} held-out and ${ladder.splits.ood.length} OOD tasks in ${dir}`,
      )
      const train = yield* load(ladder.dirs.train)
      const heldIn = yield* load(ladder.dirs.eval)
      const heldOut = yield* load(ladder.dirs.ood)
      // Unseen tasks with seen names: the train families and name pools at another seed, none
      // with an instruction of a train task; what RL learns where it trains.
      const seenLadder = yield* writeLadder(join(dir, "seen"), {
        seed: seed + SEEN_SEED_OFFSET,
        trainPerFamily: o.seenPerFamily,
        evalPerFamily: 0,
        oodPerFamily: 0,
      })
      const trainInstructions = new Set(ladder.splits.train.map((t) => t.generated.instruction))
      for (const t of seenLadder.splits.train) meta.set(t.id, t)
      const seen = (yield* load(seenLadder.dirs.train)).filter(
        (p) => !trainInstructions.has(p.task.instruction),
      )
      // Demonstrations: the first few train tasks of each family; RL gets the rest.
      const demoIds = new Set(ladder.splits.train.filter((t) => t.index < o.demos).map((t) => t.id))
      const demos: Task[] = train.filter((p) => demoIds.has(p.task.id)).map((p) => p.task)
      const pool: TaskMessage[] = train.filter((p) => !demoIds.has(p.task.id)).map((p) => p.wire)

      // 1. Warm start.
      log(`seed ${seed}: playing ${demos.length} demonstrations`)
      const golden = yield* goldenTrajectories(bus, subjects, demos, template, format, {
        job: `golden-${seed}`,
        concurrency: o.concurrency,
      })
      const sequences = golden.trajectories.flatMap((t) => trainingSequence(t, 0n) ?? [])
      if (sequences.length === 0) return yield* Effect.fail(new Error("no golden trajectory"))
      // Training and sampling on the fast kernels (the reference loops are ~15× slower).
      const kernels: Kernels = selectKernels("auto")
      const model = TinyMoe.create({
        config: { ...EMBEDDED_MODEL_CONFIG, vocabSize: tokenizer.vocabSize },
        seed,
        kernels,
      })
      const sftConfig = { ...DEFAULT_LEARNER_CONFIG, sftLr: o.sftLr, replayRouting: false }
      const sft = new Trainer(model, sftConfig)
      const sftLosses = yield* sftUpdates(sft, sequences, o.sftSteps, o.sftBatch, new Rng(seed + 1))
      log(
        `seed ${seed}: SFT on ${sequences.length} demonstrations (${golden.skipped.length} unresolved): loss ${sftLosses[0]?.toFixed(2)} → ${sftLosses.at(-1)?.toFixed(2)} in ${o.sftSteps} steps`,
      )

      // 2. Samplers on the warm start, following the RL job's weights.
      const job = `rl-${seed}`
      const policy = yield* embeddedPolicy(copyOf(model), 0n, {
        contextLength: 1024,
      })
      yield* followWeights(bus, subjects, job, policy, kernels)
      yield* Effect.forkScoped(
        runSampler({ subjects, policy, template, format, concurrency: o.concurrency }),
      )
      let runs = 0
      const evaluate = (
        name: string,
        version: bigint,
        tasks: ReadonlyArray<{ wire: TaskMessage }>,
      ) =>
        Effect.map(
          runEpisodeBatch(bus, subjects, {
            job: `${name}-${seed}`,
            groups: tasks.map((p) => ({ task: p.wire, samples: o.evalSamples })),
            purpose: EpisodePurpose.EVAL,
            policyVersion: version,
            sampling: { temperature: 1, topP: 1, maxTokens: 64 },
            limits: LIMITS(o.turns),
            seedBase: seed * 1_000_000 + 500_000 + runs++ * 10_000,
          }),
          (ts) => scoreOf(ts, rungOf),
        )
      const before = {
        id: yield* evaluate("eval-before", 0n, heldIn),
        ood: yield* evaluate("ood-before", 0n, heldOut),
        seen: yield* evaluate("seen-before", 0n, seen),
      }
      log(
        `seed ${seed}: before RL: held-out ${(rate(before.id) * 100).toFixed(1)}%, OOD ${(rate(before.ood) * 100).toFixed(1)}%`,
      )

      // 3. RL through the buffer and the learner.
      const config: LearnerConfig = { ...EMBEDDED_RL_CONFIG, lr: o.lr, criticLr: o.lr, ...learner }
      yield* Effect.forkScoped(runBuffer({ subjects, jobId: job, groupSize: o.samples }))
      const reports = yield* Queue.unbounded<StepReport>()
      const learnerFiber = yield* Effect.forkScoped(
        runLearner({
          subjects,
          jobId: job,
          config,
          initial: copyOf(model),
          batchWaitMs: 30 * 60_000,
          batchSize: o.tasksPerStep * o.samples,
          // Each step admits exactly one batch: the buffer serves it whole and the trainer drops
          // zero-variance groups itself (a buffer-side drop would leave the batch short for ever).
          dropZeroVarianceGroups: false,
          maxStaleness: 1,
          maxSteps: o.rlSteps,
          checkpointEvery: o.rlSteps,
          onStep: (report) => Queue.offer(reports, report).pipe(Effect.asVoid),
        }),
      )
      const rng = new Rng(seed * 7919 + 3)
      const rewardCurve: number[] = []
      let episodes = 0
      for (let step = 0; step < o.rlSteps; step++) {
        // Distinct tasks (episode ids name the task): a partial Fisher–Yates draw.
        const order = [...pool]
        const picked: TaskMessage[] = []
        for (let i = 0; i < Math.min(o.tasksPerStep, order.length); i++) {
          const j = i + Math.floor(rng.next() * (order.length - i))
          ;[order[i], order[j]] = [order[j] as TaskMessage, order[i] as TaskMessage]
          picked.push(order[i] as TaskMessage)
        }
        const ts = yield* runEpisodeBatch(bus, subjects, {
          job,
          tag: `r${step}`,
          groups: picked.map((task) => ({ task, samples: o.samples })),
          purpose: EpisodePurpose.TRAIN,
          policyVersion: BigInt(step),
          sampling: { temperature: 1, topP: 1, maxTokens: 64 },
          limits: LIMITS(o.turns),
          seedBase: seed * 1_000_000 + step * 1000,
        })
        episodes += ts.length
        const report = yield* Queue.take(reports)
        const s = scoreOf(ts, rungOf)
        rewardCurve.push(s.reward)
        log(
          `seed ${seed}: RL step ${step + 1}/${o.rlSteps}: resolved ${(rate(s) * 100).toFixed(1)}% reward ${s.reward.toFixed(3)} (${report.phase}, clipfrac ${report.clipfrac.toFixed(3)}, kl ${report.approxKl.toFixed(4)}, ${report.seconds.toFixed(1)} s)`,
        )
      }
      const final = yield* Fiber.join(learnerFiber)
      while (policy.version < final.version) yield* Effect.sleep("100 millis")
      const after = {
        id: yield* evaluate("eval-after", final.version, heldIn),
        ood: yield* evaluate("ood-after", final.version, heldOut),
        seen: yield* evaluate("seen-after", final.version, seen),
      }
      log(
        `seed ${seed}: after RL: held-out ${(rate(after.id) * 100).toFixed(1)}%, OOD ${(rate(after.ood) * 100).toFixed(1)}%`,
      )

      // 4. The SFT-only control: RL's optimiser steps spent on more SFT of the same demonstrations.
      const controlSteps = final.steps
      // The control continues the warm start's optimiser (moments and step count), as one longer
      // SFT run would; a fresh AdamW at the SFT rate would jolt the policy and flatter RL.
      const controlModel = copyOf(model)
      const control = new Trainer(
        controlModel,
        sftConfig,
        continuedActorOptimizer(controlModel, sftConfig, sft.optimizer.state()),
      )
      yield* sftUpdates(control, sequences, controlSteps, o.sftBatch, new Rng(seed + 2))
      const controlVersion = final.version + 1_000_000n
      policy.setWeights(copyOf(control.model), controlVersion)
      const controlScore = yield* evaluate("eval-control", controlVersion, heldIn)
      const controlSeen = yield* evaluate("seen-control", controlVersion, seen)
      log(
        `seed ${seed}: SFT control (+${controlSteps} steps): held-out ${(rate(controlScore) * 100).toFixed(1)}%`,
      )
      return {
        seed,
        before,
        after,
        control: controlScore,
        controlSeen,
        steps: o.rlSteps,
        episodes,
        minutes: (Date.now() - started) / 60_000,
        rewardCurve,
      }
    }),
  )

/** Student's t quantile at 0.975 for n − 1 degrees of freedom (n ≤ 11; else the normal's). */
const T975 = [Number.NaN, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]
const mean = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)
const interval = (xs: ReadonlyArray<number>): [number, number] => {
  const m = mean(xs)
  if (xs.length < 2) return [m, m]
  const sd = Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1))
  const t = T975[xs.length - 1] ?? 1.96
  return [m - (t * sd) / Math.sqrt(xs.length), m + (t * sd) / Math.sqrt(xs.length)]
}
/** Wilson 95% interval of a binomial rate. */
const wilson = (k: number, n: number): [number, number] => {
  if (n === 0) return [0, 1]
  const z = 1.96
  const p = k / n
  const d = 1 + (z * z) / n
  const c = p + (z * z) / (2 * n)
  const h = z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))
  return [Math.max(0, (c - h) / d), Math.min(1, (c + h) / d)]
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`

const table = (results: ReadonlyArray<SeedResult>): string => {
  const rows = [
    "| seed | held-out before | after | 95% (after) | SFT control | OOD before | OOD after | seen names before | after | SFT control | minutes |",
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
  ]
  for (const r of results) {
    const w = wilson(r.after.id.resolved, r.after.id.episodes)
    rows.push(
      `| ${r.seed} | ${pct(rate(r.before.id))} | ${pct(rate(r.after.id))} | ${pct(w[0])}–${pct(w[1])} | ${pct(rate(r.control))} | ${pct(rate(r.before.ood))} | ${pct(rate(r.after.ood))} | ${pct(rate(r.before.seen))} | ${pct(rate(r.after.seen))} | ${pct(rate(r.controlSeen))} | ${r.minutes.toFixed(1)} |`,
    )
  }
  const rungs = [...new Set(results.flatMap((r) => Object.keys(r.before.id.rungs)))].sort()
  rows.push("", "| rung | before | after |", "|---|--:|--:|")
  for (const rung of rungs) {
    const sum = (pick: (r: SeedResult) => Score) => {
      let e = 0
      let k = 0
      for (const r of results) {
        const s = pick(r).rungs[rung]
        e += s?.episodes ?? 0
        k += s?.resolved ?? 0
      }
      return e === 0 ? "–" : `${pct(k / e)} (${k}/${e})`
    }
    rows.push(`| ${rung} | ${sum((r) => r.before.id)} | ${sum((r) => r.after.id)} |`)
  }
  return rows.join("\n")
}

const summary = (results: ReadonlyArray<SeedResult>) => {
  const gains = results.map((r) => rate(r.after.id) - rate(r.before.id))
  return {
    seeds: results.length,
    resolved_before: mean(results.map((r) => rate(r.before.id))),
    resolved_after: mean(results.map((r) => rate(r.after.id))),
    reward_before: mean(results.map((r) => r.before.id.reward)),
    reward_after: mean(results.map((r) => r.after.id.reward)),
    gain: mean(gains),
    gain_ci95: interval(gains),
    ood_resolved_before: mean(results.map((r) => rate(r.before.ood))),
    ood_resolved_after: mean(results.map((r) => rate(r.after.ood))),
    sft_control_resolved: mean(results.map((r) => rate(r.control))),
    seen_names_resolved_before: mean(results.map((r) => rate(r.before.seen))),
    seen_names_resolved_after: mean(results.map((r) => rate(r.after.seen))),
    seen_names_sft_control_resolved: mean(results.map((r) => rate(r.controlSeen))),
    steps: mean(results.map((r) => r.steps)),
    episodes: results.reduce((a, r) => a + r.episodes, 0),
    minutes: results.reduce((a, r) => a + r.minutes, 0),
    per_seed: results.map((r) => ({
      seed: r.seed,
      before: rate(r.before.id),
      after: rate(r.after.id),
      after_ci95: wilson(r.after.id.resolved, r.after.id.episodes),
      control: rate(r.control),
      ood_before: rate(r.before.ood),
      ood_after: rate(r.after.ood),
      reward_curve: r.rewardCurve,
    })),
  }
}

/** The ablations (first seed): each changes one learner setting from the default. */
const ABLATIONS: ReadonlyArray<{ readonly name: string; readonly config: Partial<LearnerConfig> }> =
  [{ name: "default", config: {} }]

const driverOf = (raw: string | undefined): "docker" | "local" => {
  if (raw === undefined || raw === "local") return "local"
  if (raw === "docker") return "docker"
  throw new Error(`--driver must be local or docker, got ${JSON.stringify(raw)}\n${USAGE}`)
}

const main = Effect.gen(function* () {
  const { values } = parseArgs({
    options: {
      json: { type: "boolean" },
      ablate: { type: "boolean" },
      help: { type: "boolean", short: "h" },
      seeds: { type: "string" },
      "first-seed": { type: "string" },
      demos: { type: "string" },
      "train-per-family": { type: "string" },
      "eval-per-family": { type: "string" },
      "seen-per-family": { type: "string" },
      "sft-steps": { type: "string" },
      "sft-batch": { type: "string" },
      "sft-lr": { type: "string" },
      "rl-steps": { type: "string" },
      "tasks-per-step": { type: "string" },
      samples: { type: "string" },
      "eval-samples": { type: "string" },
      lr: { type: "string" },
      turns: { type: "string" },
      concurrency: { type: "string" },
      driver: { type: "string" },
    },
  })
  if (values.help) {
    console.log(USAGE)
    return
  }
  const num = (name: keyof typeof values, fallback: number, min: number, integer = true) => {
    const raw = values[name]
    if (raw === undefined) return fallback
    const n = Number(raw)
    if (
      typeof raw !== "string" ||
      raw.trim() === "" ||
      !Number.isFinite(n) ||
      n < min ||
      (integer && !Number.isInteger(n))
    )
      throw new Error(
        `--${name} must be ${integer ? "an integer" : "a number"} >= ${min}, got ${JSON.stringify(raw)}\n${USAGE}`,
      )
    return n
  }
  const o: Options = {
    seeds: num("seeds", 3, 1),
    firstSeed: num("first-seed", 0, 0),
    demos: num("demos", 8, 1),
    trainPerFamily: num("train-per-family", 24, 2),
    evalPerFamily: num("eval-per-family", 6, 1),
    seenPerFamily: num("seen-per-family", 3, 1),
    sftSteps: num("sft-steps", 600, 0),
    sftBatch: num("sft-batch", 8, 1),
    sftLr: num("sft-lr", 2e-3, 0, false),
    rlSteps: num("rl-steps", 40, 1),
    tasksPerStep: num("tasks-per-step", 8, 1),
    samples: num("samples", 8, 2),
    evalSamples: num("eval-samples", 2, 1),
    lr: num("lr", 3e-4, 0, false),
    turns: num("turns", 5, 1),
    concurrency: num("concurrency", 6, 1),
    driver: driverOf(values.driver),
  }
  if (o.firstSeed + o.seeds > SEEN_SEED_OFFSET)
    throw new Error(`--first-seed + --seeds must be at most ${SEEN_SEED_OFFSET}`)
  if (o.demos >= o.trainPerFamily)
    throw new Error(`--demos (${o.demos}) must be below --train-per-family (${o.trainPerFamily})`)
  if (o.driver === "docker" && !(yield* dockerEngineAvailable()))
    throw new Error("no Docker engine answers: start dockerd (as .ci/run does), or --driver local")
  const log = (line: string) => console.error(line)
  const results: SeedResult[] = []
  for (let s = 0; s < o.seeds; s++) results.push(yield* runSeed(o.firstSeed + s, o, {}, log))
  console.log(table(results))
  const figures = summary(results)
  console.log(
    `\nresolved ${pct(figures.resolved_before)} → ${pct(figures.resolved_after)} (gain ${pct(figures.gain)}, 95% ${pct(figures.gain_ci95[0])}–${pct(figures.gain_ci95[1])}); SFT control ${pct(figures.sft_control_resolved)}; OOD ${pct(figures.ood_resolved_before)} → ${pct(figures.ood_resolved_after)}; ${figures.minutes.toFixed(1)} min`,
  )
  if (values.ablate) {
    const rows = ["| variant | before | after | gain |", "|---|--:|--:|--:|"]
    for (const a of ABLATIONS) {
      const r = yield* runSeed(o.firstSeed, o, a.config, log)
      rows.push(
        `| ${a.name} | ${pct(rate(r.before.id))} | ${pct(rate(r.after.id))} | ${pct(rate(r.after.id) - rate(r.before.id))} |`,
      )
    }
    console.log(`\nablations (seed ${o.firstSeed}):\n${rows.join("\n")}`)
  }
  if (values.json) console.log(JSON.stringify(figures))
})

Effect.runPromise(
  main.pipe(
    Effect.provideService(Logger.LogToStderr, true),
    Effect.provideService(
      References.MinimumLogLevel,
      process.env.T1_LOG_LEVEL === "info" ? "Info" : "Warn",
    ),
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
    console.error(`exp:learn: ${error instanceof Error ? error.message : String(error)}`)
    process.exit(1)
  },
)
