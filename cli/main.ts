import { readFileSync } from "node:fs"
import type { Effect } from "effect"
import { actorCommand } from "./commands/actor.ts"
import { cancelCommand } from "./commands/cancel.ts"
import { evalCommand } from "./commands/eval.ts"
import { gatewayCommand } from "./commands/gateway.ts"
import { imageCommand } from "./commands/image.ts"
import { jobsCommand } from "./commands/jobs.ts"
import { modelCommand } from "./commands/model.ts"
import { natsCommand } from "./commands/nats.ts"
import { pingCommand } from "./commands/ping.ts"
import { serveCommand } from "./commands/serve.ts"
import { submitCommand } from "./commands/submit.ts"
import { tasksCommand } from "./commands/tasks.ts"
import { trainCommand } from "./commands/train.ts"
import { upCommand } from "./commands/up.ts"
import { watchCommand } from "./commands/watch.ts"
import { weightsCommand } from "./commands/weights.ts"
import { UsageError } from "./flags.ts"
import { runCommand } from "./run-main.ts"

const commands: Record<
  string,
  {
    readonly summary: string
    readonly run: (args: ReadonlyArray<string>) => Effect.Effect<void, unknown> | string
  }
> = {
  actor: {
    summary: "run one actor against NATS (t1 actor <name> --concurrency N --nats URL)",
    run: actorCommand,
  },
  cancel: { summary: "cancel a job (t1 cancel <job-id> --reason TEXT)", run: cancelCommand },
  eval: {
    summary: "submit an eval job (t1 eval --task-set DIR --samples-per-task K --watch)",
    run: evalCommand,
  },
  gateway: {
    summary: "serve the gRPC JobService against NATS (t1 gateway --listen 127.0.0.1:50051)",
    run: gatewayCommand,
  },
  image: {
    summary: "build sandbox images offline (t1 image build-base | build <task-dir>)",
    run: imageCommand,
  },
  jobs: { summary: "list jobs (t1 jobs --state running --limit 20)", run: jobsCommand },
  model: {
    summary: "train a tokenizer (t1 model train-tokenizer --corpus F --out tokenizer.json)",
    run: modelCommand,
  },
  nats: {
    summary: "a three-node JetStream cluster on loopback (t1 nats cluster --dir DIR)",
    run: natsCommand,
  },
  ping: { summary: "check that the bus and at least one actor answer", run: pingCommand },
  serve: {
    summary: "the whole system in one process: gateway on 127.0.0.1:50051 and every actor",
    run: serveCommand,
  },
  submit: {
    summary: "submit a job file to the gateway (t1 submit job.yaml --watch)",
    run: submitCommand,
  },
  tasks: { summary: "task families, synth, decontam, check (t1 tasks --help)", run: tasksCommand },
  up: {
    summary: "everything in one process on the embedded default: SFT, eval, RL, eval, report",
    run: upCommand,
  },
  train: {
    summary: "SFT warm start on golden trajectories (t1 train sft --out weights.safetensors)",
    run: trainCommand,
  },
  watch: {
    summary: "follow a job's events until it ends (t1 watch <job-id> --json)",
    run: watchCommand,
  },
  weights: {
    summary: "a job's weights as a Hugging Face checkpoint (t1 weights fetch JOB --out DIR)",
    run: weightsCommand,
  },
}

const version = (): string => {
  const pkg: unknown = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"))
  return typeof pkg === "object" && pkg !== null && "version" in pkg
    ? String(pkg.version)
    : "unknown"
}

export const mainUsage = () => `t1 — reinforcement learning for terminal agents

Usage: t1 <command> [options]

Commands:
${Object.entries(commands)
  .map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`)
  .join("\n")}

Options:
  -h, --help     show help (also: t1 <command> --help)
  -v, --version  print the version

Exit codes: 0 success, 1 failure, 2 usage error.`

export const main = async (argv: ReadonlyArray<string>): Promise<void> => {
  const [command, ...rest] = argv
  try {
    if (command === undefined || command === "-h" || command === "--help" || command === "help") {
      process.stdout.write(`${mainUsage()}\n`)
      return
    }
    if (command === "-v" || command === "--version") {
      process.stdout.write(`${version()}\n`)
      return
    }
    const entry = commands[command]
    if (entry === undefined)
      throw new UsageError(`unknown command ${JSON.stringify(command)}`, mainUsage())
    const result = entry.run(rest)
    if (typeof result === "string") {
      process.stdout.write(`${result}\n`)
      return
    }
    runCommand(result)
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`t1: ${error.message}\n\n${error.usage}\n`)
      process.exitCode = 2
      return
    }
    throw error
  }
}
