import { Effect, Layer } from "effect"
import { LADDER_RECIPE_DEFAULTS, recipeDefaultsFor } from "../../actors/recipe/index.ts"
import { SANDBOX_DRIVERS } from "../../actors/sandbox/index.ts"
import { MemoryBusLive, NatsBusLive, withBusMetrics } from "../../services/bus/index.ts"
import { MetricsLive, serveMetrics } from "../../services/metrics/index.ts"
import { parseRungs, turnsFor } from "../../tasks/ladder/index.ts"
import { natsFlagSpec, natsOptionsFrom, refuseReplicasInMemory } from "../bus-flags.ts"
import { choiceFlag, intFlag, parseFlags, UsageError } from "../flags.ts"
import { ensureSandboxEngine } from "../sandbox-engine.ts"
import { runUp, summaryTable, type UpOptions, writeReport } from "../up/run.ts"

/**
 * `t1 up`'s defaults: the recipe's (actors/recipe), with 20 RL updates instead of 40 so that the
 * whole run stays within 15 minutes on 2 cores, and one batch of 8 tasks × 8 samples per update
 * (the recipe's dynamic sampling waves are exp:learn's; jobs train on the batch they are given).
 */
export const UP_DEFAULTS = { ...LADDER_RECIPE_DEFAULTS, rlSteps: 20 } as const

export const upUsage = () => `Usage: t1 up [options]

Runs the whole system in this process on the embedded default and shows RL improving a policy:
the gateway (JobService on a free loopback port), the coordinator, a sandbox host and a verifier,
samplers with the embedded TinyMoE, the buffer and the learner pools, on an in-memory bus (or
NATS with --nats). On the task ladder (synthetic file tasks written for this run: rung 1 has one
command each, rungs 2-4 two, three and more) it submits jobs as any client would and follows
their events: an SFT job warm-starts TinyMoE on a few demonstrations, eval jobs score it on
held-out tasks (unseen names and values) and held-out families, a train job runs RL updates
(group-relative PPO) from it, the eval jobs run again on the result; then it prints the
before/after table and writes an HTML report with PNG charts.

Options:
  --seed N                ladder, initialisation and sampling seed (default ${UP_DEFAULTS.seed})
  --demos N               demonstrations per train family (default ${UP_DEFAULTS.demos})
  --train-per-family N    ladder train tasks per family (default ${UP_DEFAULTS.trainPerFamily})
  --eval-per-family N     held-out tasks per family (default ${UP_DEFAULTS.evalPerFamily})
  --rungs 1,2,3,4         ladder rungs trained and evaluated: 1-4, and the observation rungs 5-7
                          (obs: all three; the value each task needs is only in a command's
                          output) (default ${UP_DEFAULTS.rungs.join(",")})
  --sft-steps N           warm-start steps (default ${UP_DEFAULTS.sftSteps})
  --rounds N              RL updates, one batch of episodes each (default ${UP_DEFAULTS.rlSteps})
  --tasks-per-round N     training tasks per update (default ${UP_DEFAULTS.tasksPerStep})
  --samples N             rollouts per task: the group (default ${UP_DEFAULTS.samples})
  --eval-samples N        rollouts per held-out task (default ${UP_DEFAULTS.evalSamples})
  --turns N               agent turns per episode (default: the longest reference of the rungs
                          plus one, at least ${UP_DEFAULTS.turns}; obs: 11)
  --concurrency N         episodes at once (default ${UP_DEFAULTS.concurrency})
  --driver auto|bwrap|docker|local
                          sandboxes (default auto: bwrap for base-image tasks where it runs here,
                          docker for tasks with their own images and where bwrap cannot run,
                          said once with why). bwrap: namespaces over the base image's files, a
                          boundary that starts in milliseconds (needs root, bubblewrap, user
                          namespaces); docker: a container per episode; both seal and guard
                          verification, and the base image is built when missing. local: a shell
                          on this host, not a security boundary (verification unguarded)
  --train DIR --eval DIR  your own task sets instead of the ladder (both)
  --out DIR               report directory (default t1-up-report)
  --metrics-port PORT     serve /metrics here (default 0: any free port, logged)
  --nats URL              use NATS instead of the in-memory bus (and the other NATS flags of t1 actor)`

const spec = {
  train: { type: "string" },
  eval: { type: "string" },
  out: { type: "string" },
  seed: { type: "string" },
  demos: { type: "string" },
  "train-per-family": { type: "string" },
  "eval-per-family": { type: "string" },
  rungs: { type: "string" },
  "sft-steps": { type: "string" },
  rounds: { type: "string" },
  "tasks-per-round": { type: "string" },
  samples: { type: "string" },
  "eval-samples": { type: "string" },
  turns: { type: "string" },
  concurrency: { type: "string" },
  driver: { type: "string" },
  "metrics-port": { type: "string" },
  help: { type: "boolean", short: "h" },
  ...natsFlagSpec,
} as const

/** The run `args` ask for (a UsageError when they cannot be honoured); undefined for --help. */
export const upOptions = (args: ReadonlyArray<string>, usage = upUsage()) => {
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return undefined
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`, usage)
  if ((values.train === undefined) !== (values.eval === undefined))
    throw new UsageError("--train and --eval go together", usage)
  for (const flag of ["train-per-family", "eval-per-family", "rungs"] as const)
    if (values.train !== undefined && values[flag] !== undefined)
      throw new UsageError(
        `--${flag} sizes the ladder; it does not apply with --train/--eval`,
        usage,
      )
  const rungs = rungsFlag(values.rungs, UP_DEFAULTS.rungs, usage)
  // The observation rungs warm-start on more demonstrations and SFT steps (the recipe's measure).
  const D = { ...recipeDefaultsFor(rungs), rlSteps: UP_DEFAULTS.rlSteps }
  const demos = intFlag("demos", values.demos, D.demos, usage, 1)
  const trainPerFamily = intFlag(
    "train-per-family",
    values["train-per-family"],
    D.trainPerFamily,
    usage,
    2,
  )
  if (values.train === undefined && demos >= trainPerFamily)
    throw new UsageError(
      `--demos (${demos}) must be below --train-per-family (${trainPerFamily}): RL needs tasks without demonstrations`,
      usage,
    )
  const options: UpOptions = {
    seed: intFlag("seed", values.seed, D.seed, usage, 0),
    demos,
    trainPerFamily,
    demoPool: D.demoPool,
    rungs,
    evalTemperature: D.evalTemperature,
    rlTemperature: D.rlTemperature,
    evalPerFamily: intFlag("eval-per-family", values["eval-per-family"], D.evalPerFamily, usage, 1),
    sftSteps: intFlag("sft-steps", values["sft-steps"], D.sftSteps, usage, 1),
    sftBatch: D.sftBatch,
    sftLr: D.sftLr,
    rlSteps: intFlag("rounds", values.rounds, D.rlSteps, usage, 1),
    tasksPerStep: intFlag("tasks-per-round", values["tasks-per-round"], D.tasksPerStep, usage, 1),
    samples: intFlag("samples", values.samples, D.samples, usage, 2),
    evalSamples: intFlag("eval-samples", values["eval-samples"], D.evalSamples, usage, 1),
    lr: D.lr,
    turns: intFlag("turns", values.turns, turnsFor(rungs, D.turns), usage, 1),
    concurrency: intFlag("concurrency", values.concurrency, D.concurrency, usage, 1),
    driver: choiceFlag("driver", values.driver, SANDBOX_DRIVERS, D.driver, usage),
    out: values.out ?? "t1-up-report",
    ...(values.train !== undefined && values.eval !== undefined
      ? { taskDirs: { train: values.train, eval: values.eval } }
      : {}),
  }
  const metricsPort = intFlag("metrics-port", values["metrics-port"], 0, usage, 0)
  return { options, metricsPort, values }
}

const rungsFlag = (
  raw: string | undefined,
  fallback: UpOptions["rungs"],
  usage: string,
): UpOptions["rungs"] => {
  if (raw === undefined) return fallback
  try {
    return parseRungs(raw)
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e), usage)
  }
}

export const upCommand = (args: ReadonlyArray<string>): Effect.Effect<void, unknown> | string => {
  const usage = upUsage()
  const parsed = upOptions(args, usage)
  if (parsed === undefined) return usage
  const { options, metricsPort, values } = parsed
  if (values.nats === undefined) refuseReplicasInMemory(values, usage)
  const bus =
    values.nats !== undefined
      ? withBusMetrics(NatsBusLive(natsOptionsFrom(values, usage, "t1-up")))
      : withBusMetrics(MemoryBusLive())
  return Effect.scoped(
    Effect.gen(function* () {
      // Every driver but local runs the base image's files (bwrap exports them from the engine).
      if (options.driver !== "local")
        yield* ensureSandboxEngine(
          "t1 up",
          "; --driver local runs the ladder's sandboxes on this host (no security boundary)",
        )
      const endpoint = yield* serveMetrics({ port: metricsPort })
      yield* Effect.logInfo(`t1 up: metrics at ${endpoint.url}/metrics`)
      const report = yield* runUp(options)
      const path = yield* Effect.promise(() => writeReport(options.out, report))
      process.stdout.write(`\n${summaryTable(report)}\nreport: ${path}\n`)
    }),
  ).pipe(Effect.provide(bus.pipe(Layer.provideMerge(MetricsLive))))
}
