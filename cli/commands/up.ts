import { Effect, Layer } from "effect"
import {
  MemoryBusLive,
  NatsBusLive,
  subjectsFor,
  withBusMetrics,
} from "../../services/bus/index.ts"
import { MetricsLive, serveMetrics } from "../../services/metrics/index.ts"
import { natsFlagSpec, natsOptionsFrom } from "../bus-flags.ts"
import { intFlag, parseFlags } from "../flags.ts"
import { ensureSandboxEngine } from "../sandbox-engine.ts"
import { runUp, summaryTable, writeReport } from "../up/run.ts"

export const upUsage = () => `Usage: t1 up [options]

Runs the whole system in this process on the embedded default: a sandbox host on the local
Docker engine and a verifier, samplers with the bundled TinyMoE, the buffer and the learner, on
an in-memory bus (or NATS with --nats). It warm-starts TinyMoE on golden trajectories of the
bundled training tasks (SFT), evaluates on the held-out eval tasks, runs RL rounds, evaluates
again, prints a summary and writes an HTML report with PNG charts.

Options:
  --train DIR             training tasks (default tasks/bundled/train)
  --eval DIR              held-out evaluation tasks (default tasks/bundled/eval)
  --out DIR               report directory (default t1-up-report)
  --sft-steps N           warm-start steps (default 30)
  --rounds N              RL updates, one batch of episodes each (default 3)
  --tasks-per-round N     training tasks per round (default 6)
  --samples N             rollouts per task (group size) (default 2)
  --eval-samples N        rollouts per eval task (default 1)
  --turns N               agent turns per episode (default 4)
  --concurrency N         episodes at once (default 4)
  --seed N                initialisation and sampling seed (default 0)
  --metrics-port PORT     serve /metrics here (default 0: any free port, logged)
  --nats URL              use NATS instead of the in-memory bus (and the other NATS flags of t1 actor)`

const spec = {
  train: { type: "string" },
  eval: { type: "string" },
  out: { type: "string" },
  "sft-steps": { type: "string" },
  rounds: { type: "string" },
  "tasks-per-round": { type: "string" },
  samples: { type: "string" },
  "eval-samples": { type: "string" },
  turns: { type: "string" },
  concurrency: { type: "string" },
  seed: { type: "string" },
  "metrics-port": { type: "string" },
  help: { type: "boolean", short: "h" },
  ...natsFlagSpec,
} as const

export const upCommand = (args: ReadonlyArray<string>): Effect.Effect<void, unknown> | string => {
  const usage = upUsage()
  const { values } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  const options = {
    trainDir: values.train ?? "tasks/bundled/train",
    evalDir: values.eval ?? "tasks/bundled/eval",
    out: values.out ?? "t1-up-report",
    sftSteps: intFlag("sft-steps", values["sft-steps"], 30, usage, 1),
    rounds: intFlag("rounds", values.rounds, 3, usage, 1),
    tasksPerRound: intFlag("tasks-per-round", values["tasks-per-round"], 6, usage, 1),
    samplesPerTask: intFlag("samples", values.samples, 2, usage, 1),
    evalSamples: intFlag("eval-samples", values["eval-samples"], 1, usage, 1),
    turns: intFlag("turns", values.turns, 4, usage, 1),
    concurrency: intFlag("concurrency", values.concurrency, 4, usage, 1),
    seed: intFlag("seed", values.seed, 0, usage, 0),
  }
  const metricsPort = intFlag("metrics-port", values["metrics-port"], 0, usage, 0)
  const bus =
    values.nats !== undefined
      ? withBusMetrics(NatsBusLive(natsOptionsFrom(values, usage, "t1-up")))
      : withBusMetrics(MemoryBusLive())
  const subjects = subjectsFor(`t1up${Date.now().toString(36)}`)
  return Effect.scoped(
    Effect.gen(function* () {
      yield* ensureSandboxEngine("t1 up")
      const endpoint = yield* serveMetrics({ port: metricsPort })
      yield* Effect.logInfo(`t1 up: metrics at ${endpoint.url}/metrics`)
      const report = yield* runUp(options, subjects, "docker")
      const path = yield* Effect.promise(() => writeReport(options.out, report))
      process.stdout.write(`\n${summaryTable(report)}\nreport: ${path}\n`)
    }),
  ).pipe(Effect.provide(bus.pipe(Layer.provideMerge(MetricsLive))))
}
