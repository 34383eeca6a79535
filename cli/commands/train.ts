import { writeFile } from "node:fs/promises"
import { Effect, Layer } from "effect"
import { sftWarmStart } from "../../actors/learner/index.ts"
import { startSandboxAndVerifier } from "../../actors/local.ts"
import { shellBlock } from "../../actors/sampler/index.ts"
import { dockerEngineAvailable } from "../../actors/sandbox/index.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate, encodeWeights } from "../../model/index.ts"
import { Bus, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import { Metrics, makeMetrics } from "../../services/metrics/index.ts"
import { loadTasks } from "../../tasks/index.ts"
import { intFlag, parseFlags, UsageError } from "../flags.ts"

export const trainUsage = () => `Usage: t1 train sft [options]

Supervised warm start of the embedded TinyMoE on golden trajectories: every task's reference
solution is played as agent turns (the oracle agent) through sandboxes and the verifier, the
resolved transcripts are kept exactly as the TITO builder records them, and the model is trained
on their generated tokens. Needs a Docker engine and the t1-base image.

Options:
  --tasks DIR[,DIR…]    task directories or sets (default tasks/bundled/train)
  --out FILE            where to write the weights (safetensors, required)
  --steps N             optimiser steps (default 60)
  --batch N             trajectories per step (default 4)
  --lr X                learning rate (default 0.003)
  --seed N              initialisation and shuffling seed (default 0)
  --json                print a JSON summary as the last line`

const spec = {
  tasks: { type: "string" },
  out: { type: "string" },
  steps: { type: "string" },
  batch: { type: "string" },
  lr: { type: "string" },
  seed: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const

export const trainCommand = (
  args: ReadonlyArray<string>,
): Effect.Effect<void, unknown> | string => {
  const usage = trainUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  const [action, ...rest] = positionals
  if (action !== "sft")
    throw new UsageError(
      action === undefined ? "which action? sft" : `unknown action ${JSON.stringify(action)}`,
      usage,
    )
  if (rest.length > 0) throw new UsageError(`unexpected arguments: ${rest.join(" ")}`, usage)
  const out = values.out
  if (!out) throw new UsageError("--out is required", usage)
  const steps = intFlag("steps", values.steps, 60, usage, 1)
  const batch = intFlag("batch", values.batch, 4, usage, 1)
  const seed = intFlag("seed", values.seed, 0, usage, 0)
  const lr = values.lr === undefined ? 3e-3 : Number(values.lr)
  if (!(lr > 0 && lr < 1)) throw new UsageError(`--lr must be in (0, 1), got ${values.lr}`, usage)
  const dirs = (values.tasks ?? "tasks/bundled/train").split(",").filter((d) => d !== "")
  return sft({ dirs, out, steps, batch, lr, seed, json: values.json === true })
}

const sft = (o: {
  dirs: string[]
  out: string
  steps: number
  batch: number
  lr: number
  seed: number
  json: boolean
}) =>
  Effect.scoped(
    Effect.gen(function* () {
      if (!(yield* dockerEngineAvailable()))
        return yield* Effect.fail(
          new Error("no Docker engine answers: golden trajectories run in sandboxes"),
        )
      const tokenizer = loadBundledTokenizer()
      const template = new ChatTemplate(tokenizer)
      const tasks = yield* loadTasks(o.dirs)
      const subjects = subjectsFor("sft")
      const bus = yield* Bus
      yield* ensureSamplerStreams(bus, subjects)
      yield* startSandboxAndVerifier(subjects)
      const started = Date.now()
      const { model, golden, skipped, losses } = yield* sftWarmStart(
        bus,
        subjects,
        tasks,
        template,
        shellBlock,
        {
          steps: o.steps,
          batch: o.batch,
          lr: o.lr,
          seed: o.seed,
          onStep: (step, loss) => {
            if (step % 10 === 0 || step === 1)
              process.stderr.write(
                `t1 train sft: step ${step}/${o.steps} loss ${loss.toFixed(3)}\n`,
              )
          },
        },
      )
      if (skipped.length > 0)
        yield* Effect.logWarning(
          `t1 train sft: oracle did not resolve ${skipped.join(", ")}; skipped`,
        )
      yield* Effect.promise(() =>
        writeFile(
          o.out,
          encodeWeights(model, "F32", { version: 0n, extra: { sft_steps: String(o.steps) } }),
        ),
      )
      const summary = {
        golden,
        steps: o.steps,
        first_loss: losses[0],
        last_loss: losses.at(-1),
        seconds: (Date.now() - started) / 1000,
        out: o.out,
      }
      process.stdout.write(
        `SFT: ${golden} golden trajectories, ${o.steps} steps, loss ${summary.first_loss?.toFixed(3)} → ${summary.last_loss?.toFixed(3)}, ${summary.seconds.toFixed(1)} s; weights in ${o.out}\n`,
      )
      if (o.json) process.stdout.write(`${JSON.stringify(summary)}\n`)
    }),
  ).pipe(
    Effect.provide(
      Layer.mergeAll(
        MemoryBusLive(),
        Layer.succeed(Metrics, makeMetrics({ defaultMetrics: false })),
      ),
    ),
  )
