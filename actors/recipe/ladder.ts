/**
 * The T1 recipe on the task ladder, through the real actors in one process (embedded TinyMoE
 * samplers, sandbox host, verifier, buffer, learner): the shared engine of `t1 up` and
 * `npm run exp:learn`.
 *
 *   1. SFT warm start on a fixed, limited set of demonstrations (reference solutions of the first
 *      `demos` train tasks of each family, played through the real episode loop);
 *   2. evaluation on held-out tasks (unseen names, and families never trained on);
 *   3. RL on the other train tasks, which have verifiers but no demonstrations: each step admits
 *      whole groups of episodes, the buffer serves them, the learner updates and publishes
 *      weights the samplers switch to;
 *   4. evaluation again.
 *
 * `openLadderRecipe` writes the ladder and starts the sandbox host and verifier; its phases are
 * separate calls so that a caller can add its own (exp:learn's SFT-only control arm).
 */

import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Clock, Effect, Fiber, Queue, type Scope } from "effect"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import {
  ChatTemplate,
  type Kernels,
  mapParams,
  Rng,
  TinyMoe,
  type Tokenizer,
} from "../../model/index.ts"
import { selectKernels } from "../../model/kernels/select.ts"
import { EpisodePurpose, type Task as TaskMessage, type Trajectory } from "../../proto/index.ts"
import { Bus, type BusShape, type Subjects, subjectsFor } from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import type { Metrics } from "../../services/metrics/index.ts"
import { followWeights } from "../../services/weights/index.ts"
import { loadTasks, type Task } from "../../tasks/index.ts"
import { isObserveRung, type LadderTask, type Rung } from "../../tasks/ladder/index.ts"
import { runBuffer } from "../buffer/index.ts"
import { goldenTrajectories } from "../golden/index.ts"
import {
  DEFAULT_LEARNER_CONFIG,
  EMBEDDED_MODEL_CONFIG,
  EMBEDDED_RL_CONFIG,
  type LearnerConfig,
  NoGoldenTrajectory,
  runLearner,
  type StepReport,
  Trainer,
  type TrainingSequence,
  trainingSequences,
} from "../learner/index.ts"
import { startSandboxAndVerifier } from "../local.ts"
import {
  type EmbeddedPolicy,
  embeddedPolicy,
  runEpisodeBatch,
  runSampler,
  shellBlockShort,
} from "../sampler/index.ts"
import { wireTaskFor } from "../sandbox/index.ts"
import { recipeTaskSets } from "./task-sets.ts"

export interface LadderRecipeOptions {
  /** Ladder, model initialisation, SFT batches and sampling all follow the seed. */
  readonly seed: number
  /** Demonstrations per train family for the warm start (the family's first train tasks). */
  readonly demos: number
  readonly trainPerFamily: number
  /** The ladder rungs trained and evaluated (the OOD families of those rungs included). */
  readonly rungs: ReadonlyArray<Rung>
  /**
   * The demonstrations draw their names from the ladder's demo pool (true: one train name in four
   * is met only by RL, tasks/synth/ladder-pools.ts) or from the whole train pool (false, the
   * default).
   */
  readonly demoPool: boolean
  /** Held-out tasks per family, in-distribution and OOD. */
  readonly evalPerFamily: number
  readonly sftSteps: number
  readonly sftBatch: number
  readonly sftLr: number
  /**
   * AdamW's decoupled weight decay in the warm start (RL keeps the learner's own). Larger values
   * keep the policy from memorising which digits follow which word in the demonstrations' names,
   * the prior that makes it miscopy a held-out name (docs/recipe.md, the observation rungs).
   */
  readonly sftWeightDecay: number
  readonly rlSteps: number
  readonly tasksPerStep: number
  /** Episodes per task in an RL update: the group of the group-relative baseline. */
  readonly samples: number
  /**
   * Dynamic sampling (DAPO): an update admits further waves of fresh tasks, at the same policy
   * version, until `tasksPerStep` of its groups have a reward that varies (a group whose
   * episodes all score the same teaches a group baseline nothing), at most this many waves in
   * all (1: one wave, whatever it holds). Each further wave is sized by the run's share of
   * informative groups so far; the update trains on every episode of the step.
   */
  readonly waves: number
  /** Episodes per held-out task in an evaluation. */
  readonly evalSamples: number
  /**
   * Sampling temperature of evaluation episodes (RL samples at 1): 1 measures the policy RL
   * trains; 0 is greedy, what the policy would do at its most likely.
   */
  readonly evalTemperature: number
  /**
   * Sampling temperature of RL episodes; the learner trains the log-probs at the same
   * temperature (above 1: more of a group's samples differ, so fewer groups teach nothing).
   */
  readonly rlTemperature: number
  readonly lr: number
  readonly turns: number
  readonly concurrency: number
  /**
   * The sandboxes' driver (sandbox/choice.ts): `auto` (bwrap for the ladder's base-image tasks
   * where it runs, else docker), `bwrap`, `docker`, or `local` (this host's shell, no boundary).
   */
  readonly driver: "auto" | "bwrap" | "docker" | "local"
  /** Learner settings over EMBEDDED_RL_CONFIG (and `lr`). */
  readonly learner?: Partial<LearnerConfig>
  /**
   * RL continues the warm start's AdamW moments (true) or starts a fresh optimiser (false, the
   * default by measurement: continued, the SFT moments shrank the steps to approx KL ~0.002 per
   * update at 3e-4, and at 1e-3 the held-out and seen-names rates fell).
   */
  readonly continueOptimizer: boolean
  /**
   * Task sets of your own instead of the ladder: the demonstrations are the first `demos` tasks
   * (by id) of each train family that have a reference solution, the RL pool every other train
   * task (all of them when that leaves none), and `eval` the held-out set (no OOD set).
   */
  readonly taskDirs?: { readonly train: string; readonly eval: string }
}

/**
 * The recipe's defaults, chosen by measurement on 2 cores (docs/recipe.md, `npm run exp:learn`): rung 1
 * (one command per task: at d_model 128 the warm start fails rungs 2–3 by losing the second or
 * third name, and RL on them moved nothing in 21 updates), 8 demonstrations per family, 600 SFT
 * steps at 2e-3, then RL steps of 8 tasks × 4 samples at 3e-4 (1e-3 with a fresh optimiser
 * collapsed the train reward within 8 updates; 8 × 8, which gained +10.8 and +26.7 points on
 * two seeds, made a seed take ~30 minutes: pytest's start-up and the sandbox's processes cost
 * most of an episode). 64 train tasks per family leave 56 per family to RL, so 40 updates
 * rarely meet a task twice: with 16 the train reward climbed on tasks seen before while
 * held-out rates did not move. RL samples at temperature 1 (`rlTemperature`): at 1.25 with 7 tasks
 * a step (session 12 acceptance) fewer groups scored all-equal (2 skipped updates of 120 against
 * 17), but held-out rates moved 32.5→30.0, 17.5→35.0 and 21.7→11.7% (mean +1.7 against +8.9 at
 * 1), below the SFT control. Fewer SFT steps left the held-out rate at 0% (200 and 350 steps).
 * Session 13 made episodes ~1.75x cheaper (bash test scripts, fewer verifier processes): 70
 * updates of 8 × 4 then fit in 19.7 minutes and gained +7.5 (seed 0; +11.7 with 40), the train
 * reward flat at ~0.5 throughout, while 8 × 8 had gained +10.8 and +26.7 (session 10, 40
 * updates, two seeds): groups of 8 carry signal more often. 32 updates of 8 × 8 gained +10.8,
 * +25.0 and −8.3 (session 13). Session 15: dynamic sampling, at most 2 waves an update, 20
 * updates (~2500 episodes against 2048) gained +16.7, +24.2 and +10.0 on seeds 0–2 (mean +17.0,
 * each above its SFT control; every update trains on ~8 groups whose rewards vary instead of the
 * ~3 of a single wave), at 27–30 minutes a seed with a CI run on the same 2 cores. Session 16
 * (cheaper local-driver episodes): 15.0 minutes a seed alone, gains +9.2, +24.2 and +4.2 (mean
 * +12.5): a seed's outcome swings by ~7 points between runs. Session 17, on cores that ran an
 * update in ~11 s: 26 updates gained +15.0, +25.0 and +3.3 (mean +14.4, 7 minutes a seed), 40
 * gained +16.7, +33.3 and +12.5 (mean +20.8, 10–11 minutes a seed). `exp:learn --seed-minutes`
 * (18 by default) stops RL early where updates are slower (the session-16 cores: ~30 s each).
 */
export const LADDER_RECIPE_DEFAULTS: LadderRecipeOptions = {
  seed: 0,
  demos: 8,
  trainPerFamily: 64,
  rungs: [1],
  demoPool: false,
  evalPerFamily: 6,
  sftSteps: 600,
  sftBatch: 8,
  sftLr: 2e-3,
  sftWeightDecay: 0.01,
  rlSteps: 40,
  tasksPerStep: 8,
  samples: 8,
  waves: 2,
  evalSamples: 2,
  evalTemperature: 1,
  rlTemperature: 1,
  lr: 3e-4,
  turns: 5,
  concurrency: 6,
  driver: "auto",
  continueOptimizer: false,
}

/**
 * What the observation rungs (5–7) change in the defaults: multi-turn look-then-act transcripts
 * need more demonstrations and more SFT steps before the warm start copies what it read. Measured
 * in session 29 (seed 0, `--rungs obs`): 8 demonstrations a family and 600 steps gave 0% held-out
 * before RL (every RL group all-fail, nothing trained); 40 and 600 also 0% (SFT loss 0.38); 40 and
 * 1500 gave 24.1%, and RL lifted it to 27.8% in 15 updates (rung 5: 43.3% → 50.0%).
 */
export const OBSERVE_RECIPE_DEFAULTS = { demos: 40, trainPerFamily: 80, sftSteps: 1500 } as const

/** The recipe's defaults for `rungs`: the observation rungs' where any is chosen. */
export const recipeDefaultsFor = (rungs: ReadonlyArray<Rung>): LadderRecipeOptions =>
  rungs.some(isObserveRung)
    ? { ...LADDER_RECIPE_DEFAULTS, ...OBSERVE_RECIPE_DEFAULTS, rungs }
    : { ...LADDER_RECIPE_DEFAULTS, rungs }

/**
 * Episode limits of every recipe episode: short turns, short observations. `blind`: the policy
 * reads empty observations (Limits.blind_observations), the control of an evaluation that shows
 * how much of a score needs looking at command output.
 */
export const recipeLimits = (turns: number, blind = false) => ({
  maxTurns: turns,
  maxTokens: 1024,
  turnMaxTokens: 64,
  commandTimeoutMs: 10_000,
  observationMaxTokens: 96,
  wallClockSec: 120,
  blindObservations: blind,
})

const SAMPLING = { temperature: 1, topP: 1, maxTokens: 64 } as const

/** A loaded task with its wire form. */
export interface RecipeTask {
  readonly task: Task
  readonly wire: TaskMessage
}

/** Results of one policy on one task set. */
export interface RecipeScore {
  readonly episodes: number
  readonly resolved: number
  /** Mean over episodes of tests passed / tests total. */
  readonly reward: number
  /** Agent turns summed over the resolved episodes (see meanResolvedTurns). */
  readonly resolvedTurns: number
  /** Episodes and resolved ones per rung. */
  readonly rungs: Readonly<Record<string, { readonly episodes: number; readonly resolved: number }>>
  /** Episodes and resolved ones per task: what a paired before/after comparison needs. */
  readonly tasks: Readonly<Record<string, { readonly episodes: number; readonly resolved: number }>>
}

export const resolvedRate = (s: RecipeScore): number =>
  s.episodes === 0 ? 0 : s.resolved / s.episodes

/** Mean agent turns of the resolved episodes; null when none resolved. */
export const meanResolvedTurns = (s: RecipeScore): number | null =>
  s.resolved === 0 ? null : s.resolvedTurns / s.resolved

/** Scores the trajectories that were verified (infra failures and unverifiable ones left out). */
export const scoreTrajectories = (
  trajectories: ReadonlyArray<Trajectory>,
  rungOf: (taskId: string) => number,
): RecipeScore => {
  const rungs: Record<string, { episodes: number; resolved: number }> = {}
  const tasks: Record<string, { episodes: number; resolved: number }> = {}
  let episodes = 0
  let resolved = 0
  let reward = 0
  let resolvedTurns = 0
  for (const t of trajectories) {
    const end = t.end
    if (end === undefined || end.infraFailed || end.unverifiable) continue
    const taskId = end.task?.taskId ?? ""
    const rung = String(rungOf(taskId))
    const r = rungs[rung] ?? { episodes: 0, resolved: 0 }
    rungs[rung] = r
    const k = tasks[taskId] ?? { episodes: 0, resolved: 0 }
    tasks[taskId] = k
    r.episodes++
    k.episodes++
    episodes++
    if (end.resolved) {
      r.resolved++
      k.resolved++
      resolved++
      resolvedTurns += end.turns
    }
    reward += end.testsTotal > 0 ? end.testsPassed / end.testsTotal : 0
  }
  const mean = episodes === 0 ? 0 : reward / episodes
  return { episodes, resolved, reward: mean, resolvedTurns, rungs, tasks }
}

/**
 * Groups of `trajectories` whose verified rewards differ (the learner's zero-variance filter keeps
 * exactly these; infra failures and unverifiable episodes carry no reward and are left out).
 */
export const informativeGroups = (trajectories: ReadonlyArray<Trajectory>): number => {
  const rewards = new Map<string, Set<number>>()
  for (const t of trajectories) {
    const end = t.end
    if (end === undefined || end.infraFailed || end.unverifiable) continue
    const seen = rewards.get(end.groupId) ?? new Set<number>()
    rewards.set(end.groupId, seen)
    seen.add(end.reward)
  }
  let n = 0
  for (const r of rewards.values()) if (r.size > 1) n++
  return n
}

/** A copy of the model's weights in f32 on the same kernels, for a trainer or policy of its own. */
export const copyModel = (model: TinyMoe): TinyMoe =>
  TinyMoe.fromParams(
    model.config,
    mapParams(model.config, model.params, "f32", (d) => d),
    "f32",
    model.kernels,
  )

/** `steps` supervised updates on `sequences`, batches drawn with `rng`; the losses. */
export const sftUpdates = (
  trainer: Trainer,
  sequences: ReadonlyArray<TrainingSequence>,
  steps: number,
  batch: number,
  rng: Rng,
  onStep?: (step: number, loss: number) => void,
): Effect.Effect<number[]> =>
  Effect.gen(function* () {
    const losses: number[] = []
    for (let step = 0; step < steps; step++) {
      const picked = Array.from(
        { length: Math.min(batch, sequences.length) },
        () => sequences[Math.floor(rng.next() * sequences.length)] as TrainingSequence,
      )
      const loss = trainer.sftStep(picked).loss
      losses.push(loss)
      onStep?.(step + 1, loss)
      yield* Effect.yieldNow
    }
    return losses
  })

export interface WarmStart {
  /** The warm-started policy (version 0). */
  readonly model: TinyMoe
  /** Its trainer: the SFT optimiser's state, for a control arm that continues it. */
  readonly trainer: Trainer
  /** The SFT learner settings. */
  readonly config: LearnerConfig
  /** The demonstrations as training sequences. */
  readonly sequences: ReadonlyArray<TrainingSequence>
  readonly losses: ReadonlyArray<number>
  /** Demonstrations whose reference solution did not resolve the task (left out). */
  readonly skipped: ReadonlyArray<string>
}

export interface RlResult {
  /** The learner's last published version and its update count. */
  readonly version: bigint
  readonly steps: number
  readonly episodes: number
  /** Per RL step: the scored train batch and the learner's report. */
  readonly curve: ReadonlyArray<{ readonly score: RecipeScore; readonly report: StepReport }>
}

export interface LadderRecipe {
  /** Where the ladder was written (removed with the scope). */
  readonly dir: string
  readonly tokenizer: Tokenizer
  readonly train: ReadonlyArray<RecipeTask>
  /** In-distribution held-out tasks (unseen names and values). */
  readonly heldIn: ReadonlyArray<RecipeTask>
  /** Tasks of the families held out of training. */
  readonly heldOut: ReadonlyArray<RecipeTask>
  /** The demonstrations' tasks (the warm start's) and the RL pool (every other train task). */
  readonly demos: ReadonlyArray<Task>
  readonly pool: ReadonlyArray<TaskMessage>
  readonly rungOf: (taskId: string) => number
  readonly instructionOf: (taskId: string) => string
  /** Loads a task directory (its wire form for the recipe's driver). */
  readonly load: (dir: string) => Effect.Effect<RecipeTask[], unknown>
  /** Registers ladder tasks written elsewhere (their rungs and instructions). */
  readonly remember: (tasks: ReadonlyArray<LadderTask>) => void
  readonly warmStart: (
    onStep?: (step: number, loss: number) => void,
  ) => Effect.Effect<WarmStart, unknown>
  /** Samplers on `model` (version 0) that follow the RL job's published weights. */
  readonly startSamplers: (
    model: TinyMoe,
  ) => Effect.Effect<EmbeddedPolicy, unknown, Bus | Metrics | Scope.Scope>
  /** `evalSamples` episodes of each task at `version`. */
  readonly evaluate: (
    name: string,
    version: bigint,
    tasks: ReadonlyArray<RecipeTask>,
    onEpisode?: (t: Trajectory) => void,
    options?: EvaluateOptions,
  ) => Effect.Effect<Trajectory[], unknown>
  /**
   * RL from the warm start through the buffer and the learner; waits until `policy` runs the last
   * published version. `onStep` sees each scored train batch with the learner's report.
   */
  readonly reinforce: (
    warm: WarmStart,
    policy: EmbeddedPolicy,
    hooks?: RlHooks,
  ) => Effect.Effect<RlResult, unknown, Bus | Metrics | Scope.Scope>
}

export interface EvaluateOptions {
  /** The policy reads empty observations (recipeLimits' `blind`); the commands still run. */
  readonly blind?: boolean
  /**
   * Sample with the seeds of the earlier evaluation of this name (the same tasks in the same
   * order): a paired control whose episodes draw alike until what they read differs.
   */
  readonly seedsOf?: string
}

/** What a driver of the recipe's RL phase hears and decides. */
export interface RlHooks {
  readonly onStep?: (step: number, score: RecipeScore, report: StepReport) => void
  readonly onEpisode?: (step: number, t: Trajectory) => void
  /**
   * Asked before each update after the first with the updates done so far: true ends RL there
   * (a run out of time), the last update's policy final.
   */
  readonly stopBefore?: (stepsDone: number) => boolean
}

/**
 * The ladder of `options.seed` written to a private directory (removed with the scope), a sandbox
 * host and a verifier on the current bus, and the recipe's phases.
 */
export const openLadderRecipe = (
  options: LadderRecipeOptions,
): Effect.Effect<LadderRecipe, unknown, Bus | Metrics | Scope.Scope> =>
  Effect.gen(function* () {
    const o = options
    const bus: BusShape = yield* Bus
    const seed = o.seed
    const subjects: Subjects = subjectsFor(
      `ladder${seed}x${(yield* Clock.currentTimeMillis).toString(36)}`,
    )
    const tokenizer = loadBundledTokenizer()
    const template = new ChatTemplate(tokenizer)
    const format = shellBlockShort
    // Training and sampling on the fast kernels (the reference loops are ~15× slower).
    const kernels: Kernels = selectKernels("auto")
    yield* ensureSamplerStreams(bus, subjects)
    yield* startSandboxAndVerifier(subjects, { concurrency: o.concurrency, driver: o.driver })

    const dir = mkdtempSync(join(tmpdir(), `t1-ladder-${seed}-`))
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
    )
    const meta = new Map<string, LadderTask>()
    const remember = (tasks: ReadonlyArray<LadderTask>) => {
      for (const t of tasks) meta.set(t.id, t)
    }
    const toWire = wireTaskFor(o.driver)
    const wired = (tasks: ReadonlyArray<Task>) =>
      Effect.forEach(tasks, (task) => Effect.map(toWire(task), (wire) => ({ task, wire })))
    const load = (path: string) => Effect.flatMap(loadTasks([path]), wired)
    const sets = yield* recipeTaskSets(o, dir)
    remember([...sets.ladder.values()])
    const train = yield* wired(sets.train)
    const heldIn = yield* wired(sets.heldIn)
    const heldOut = yield* wired(sets.heldOut)
    const demos = sets.demos
    const pool = yield* Effect.forEach(sets.pool, toWire)
    const rungOf = (id: string) => meta.get(id)?.rung ?? 0
    const instructionOf = (id: string) => meta.get(id)?.generated.instruction ?? ""
    const job = `rl-${seed}`
    let runs = 0

    const warmStart = (onStep?: (step: number, loss: number) => void) =>
      Effect.gen(function* () {
        const golden = yield* goldenTrajectories(bus, subjects, demos, template, format, {
          job: `golden-${seed}`,
          concurrency: o.concurrency,
          toWire,
        })
        // In task order (goldenTrajectories sorts them): the SFT batches are drawn by index.
        const sequences = yield* trainingSequences(golden.trajectories, 0n)
        if (sequences.length === 0)
          return yield* new NoGoldenTrajectory({
            tasks: demos.length,
            skipped: golden.skipped.length,
          })
        const model = TinyMoe.create({
          config: { ...EMBEDDED_MODEL_CONFIG, vocabSize: tokenizer.vocabSize },
          seed,
          kernels,
        })
        const config: LearnerConfig = {
          ...DEFAULT_LEARNER_CONFIG,
          sftLr: o.sftLr,
          weightDecay: o.sftWeightDecay,
          replayRouting: false,
        }
        const trainer = new Trainer(model, config)
        const losses = yield* sftUpdates(
          trainer,
          sequences,
          o.sftSteps,
          o.sftBatch,
          new Rng(seed + 1),
          onStep,
        )
        return { model, trainer, config, sequences, losses, skipped: golden.skipped }
      })

    const startSamplers = (model: TinyMoe) =>
      Effect.gen(function* () {
        const policy = yield* embeddedPolicy(copyModel(model), 0n, { contextLength: 1024 })
        yield* followWeights(bus, subjects, job, policy, kernels)
        yield* Effect.forkScoped(
          runSampler({ subjects, policy, template, format, concurrency: o.concurrency }),
        )
        return policy
      })

    // Each evaluation's seed base by name, for a later one that pairs with it.
    const seedBases = new Map<string, number>()
    const evaluate = (
      name: string,
      version: bigint,
      tasks: ReadonlyArray<RecipeTask>,
      onEpisode?: (t: Trajectory) => void,
      options: EvaluateOptions = {},
    ) => {
      const paired = options.seedsOf === undefined ? undefined : seedBases.get(options.seedsOf)
      if (options.seedsOf !== undefined && paired === undefined)
        return Effect.fail(new Error(`no evaluation named ${options.seedsOf} to take seeds from`))
      const job = `${name}-${seed}-${runs}`
      // A paired run takes no fresh seed base: every other evaluation keeps the seeds it had.
      const seedBase = paired ?? seed * 1_000_000 + 500_000 + runs++ * 10_000
      seedBases.set(name, seedBase)
      return runEpisodeBatch(
        bus,
        subjects,
        {
          job,
          groups: tasks.map((p) => ({ task: p.wire, samples: o.evalSamples })),
          purpose: EpisodePurpose.EVAL,
          policyVersion: version,
          sampling: { ...SAMPLING, temperature: o.evalTemperature },
          limits: recipeLimits(o.turns, options.blind === true),
          seedBase,
        },
        onEpisode,
      )
    }

    const reinforce = (warm: WarmStart, policy: EmbeddedPolicy, hooks: RlHooks = {}) =>
      Effect.gen(function* () {
        const config: LearnerConfig = {
          ...EMBEDDED_RL_CONFIG,
          lr: o.lr,
          criticLr: o.lr,
          temperature: o.rlTemperature,
          ...o.learner,
        }
        yield* Effect.forkScoped(runBuffer({ subjects, jobId: job, groupSize: o.samples }))
        const reports = yield* Queue.unbounded<StepReport>()
        // Each update trains on every episode its waves admitted: the learner asks for the size.
        const sizes = yield* Queue.unbounded<number>()
        const learner = yield* Effect.forkScoped(
          runLearner({
            subjects,
            jobId: job,
            config,
            initial: copyModel(warm.model),
            // The TITO-off ablation re-renders trajectories from their text with it.
            template,
            ...(o.continueOptimizer ? { initialOptimizer: warm.trainer.optimizer.state() } : {}),
            batchWaitMs: 30 * 60_000,
            batchSize: o.tasksPerStep * o.samples,
            nextBatchSize: Queue.take(sizes),
            // Each step's episodes make one batch: the buffer serves it whole and the trainer drops
            // zero-variance groups itself (a buffer-side drop would leave the batch short for ever).
            dropZeroVarianceGroups: false,
            maxStaleness: 1,
            maxSteps: o.rlSteps,
            checkpointEvery: o.rlSteps,
            onStep: (report) => Queue.offer(reports, report).pipe(Effect.asVoid),
          }),
        )
        const rng = new Rng(seed * 7919 + 3)
        const curve: Array<{ score: RecipeScore; report: StepReport }> = []
        let episodes = 0
        // The run's informative groups and groups so far (a prior of one in two): the share
        // that sizes a further wave.
        let informative = 1
        let groups = 2
        for (let step = 0; step < o.rlSteps; step++) {
          if (step > 0 && hooks.stopBefore?.(step) === true) {
            yield* Queue.offer(sizes, 0)
            break
          }
          const ts: Trajectory[] = []
          // Distinct tasks within the step (episode ids name the task): a partial Fisher–Yates
          // draw over the pool, continued by each wave.
          const order = [...pool]
          let drawn = 0
          let useful = 0
          for (let wave = 0; wave < Math.max(1, o.waves) && useful < o.tasksPerStep; wave++) {
            const share = Math.max(0.25, informative / groups)
            const want =
              wave === 0
                ? o.tasksPerStep
                : Math.min(o.tasksPerStep, Math.ceil((o.tasksPerStep - useful) / share))
            const picked: TaskMessage[] = []
            for (; picked.length < want && drawn < order.length; drawn++) {
              const j = drawn + Math.floor(rng.next() * (order.length - drawn))
              ;[order[drawn], order[j]] = [order[j] as TaskMessage, order[drawn] as TaskMessage]
              picked.push(order[drawn] as TaskMessage)
            }
            if (picked.length === 0) break
            const wavesOf = yield* runEpisodeBatch(
              bus,
              subjects,
              {
                job,
                tag: `r${step}`,
                groups: picked.map((task) => ({ task, samples: o.samples })),
                purpose: EpisodePurpose.TRAIN,
                policyVersion: BigInt(step),
                sampling: { ...SAMPLING, temperature: o.rlTemperature },
                limits: recipeLimits(o.turns),
                seedBase: seed * 1_000_000 + step * 1000 + (drawn - picked.length) * o.samples,
              },
              (t) => hooks.onEpisode?.(step, t),
            )
            const found = informativeGroups(wavesOf)
            useful += found
            informative += found
            groups += picked.length
            ts.push(...wavesOf)
          }
          episodes += ts.length
          yield* Queue.offer(sizes, ts.length)
          const report = yield* Queue.take(reports)
          const score = scoreTrajectories(ts, rungOf)
          curve.push({ score, report })
          hooks.onStep?.(step + 1, score, report)
        }
        const final = yield* Fiber.join(learner)
        // The samplers switch on the announcement; wait until they run the last version.
        while (policy.version < final.version) yield* Effect.sleep("100 millis")
        return { version: final.version, steps: final.steps, episodes, curve }
      })

    return {
      dir,
      tokenizer,
      train,
      heldIn,
      heldOut,
      demos,
      pool,
      rungOf,
      instructionOf,
      load,
      remember,
      warmStart,
      startSamplers,
      evaluate,
      reinforce,
    }
  })
