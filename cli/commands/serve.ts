import { Effect, Layer } from "effect"
import { actorRegistry, diagnosticActor, type FlagValues } from "../../actors/index.ts"
import { BASE_IMAGE, checkBwrapRuns, SANDBOX_DRIVERS } from "../../actors/sandbox/index.ts"
import { trainerService } from "../../actors/trainer/index.ts"
import { runActor } from "../../services/actor/index.ts"
import {
  Bus,
  MemoryBusLive,
  NatsBusLive,
  subjectsFor,
  withBusMetrics,
} from "../../services/bus/index.ts"
import { serveGateway } from "../../services/gateway/index.ts"
import { jobStoreLayer } from "../../services/jobs/index.ts"
import { MetricsLive, serveMetrics } from "../../services/metrics/index.ts"
import {
  natsFlagSpec,
  natsFlagsHelp,
  natsOptionsFrom,
  prefixFrom,
  refuseReplicasInMemory,
} from "../bus-flags.ts"
import { choiceFlag, intFlag, parseFlags, UsageError } from "../flags.ts"
import { logFlagSpec, logFlagsHelp, loggingLayer } from "../run-main.ts"
import { ensureSandboxEngine } from "../sandbox-engine.ts"
import { gatewayServeFlagSpec, gatewayServeFlagsHelp, gatewayServeOptionsFrom } from "./gateway.ts"
import {
  MODEL_DIR_POLICY_REF,
  publishModelDir,
  serveEngineFlagSpec,
  serveEngineFlagsHelp,
  serveEngineFrom,
} from "./serve-engine.ts"

export const serveUsage = () => `Usage: t1 serve [options]

The whole system in this process, on the embedded default: the gRPC JobService gateway (with
grpc.health.v1 and reflection), the coordinator, a sandbox host, a verifier, a sampler with the
bundled TinyMoE, the buffer and the learner, and /metrics, on an in-memory bus (jobs last as long
as the process) or on NATS with --nats. Then, from another terminal:

  t1 eval --task-set tasks/bundled/eval --samples-per-task 2 --watch
  t1 submit cli/examples/train.yaml --watch

or any gRPC client of t1.v1.JobService. Unless the driver is local the sandbox base image is built
first when the engine lacks it (about a minute, once).

Options:
  --driver auto|bwrap|docker|local
                            sandbox driver (T1_SANDBOX_DRIVER; default auto: bwrap for base-image
                            tasks where it runs here, docker for tasks with their own images and
                            where bwrap cannot run, said once with why). bwrap needs root,
                            bubblewrap and user namespaces (T1_BWRAP: its path); local runs the
                            agent's commands on this host, no security boundary: synthetic
                            tasks you trust only
  --concurrency N           episodes at once (default 4): the sampler runs N, the verifier N,
                            the sandbox host serves 4N requests at once
${serveEngineFlagsHelp}
${gatewayServeFlagsHelp}
${natsFlagsHelp}
                            (without --nats or T1_NATS_URL the bus is in memory)
${logFlagsHelp}

Each actor's own settings (policy, tokenizer, weights, sandbox image, leases, …) are read from
their environment variables, as \`t1 actor <name> --help\` lists them.`

const spec = {
  ...serveEngineFlagSpec,
  ...natsFlagSpec,
  ...logFlagSpec,
  ...gatewayServeFlagSpec,
  driver: { type: "string" },
  concurrency: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const

/** The actors of one process and how many messages each handles at once, given the episodes. */
const members = (episodes: number) =>
  [
    ["coordinator", 1],
    ["sandbox", 4 * episodes],
    ["verifier", episodes],
    ["sampler", episodes],
    ["buffer", 1],
    ["learner", 1],
  ] as const

export const serveCommand = (
  args: ReadonlyArray<string>,
): Effect.Effect<void, unknown> | string => {
  const usage = serveUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  if (positionals.length > 0) {
    throw new UsageError(`unexpected arguments: ${positionals.join(" ")}`, usage)
  }
  const gateway = gatewayServeOptionsFrom(values, usage)
  const driver = choiceFlag(
    "driver",
    values.driver ?? (process.env.T1_SANDBOX_DRIVER || undefined),
    SANDBOX_DRIVERS,
    "auto",
    usage,
  )
  const concurrency = intFlag("concurrency", values.concurrency, 4, usage, 1)
  const engine = serveEngineFrom(values, usage)
  const onNats = values.nats !== undefined || (process.env.T1_NATS_URL ?? "") !== ""
  if (!onNats) refuseReplicasInMemory(values, usage)
  const bus = onNats
    ? withBusMetrics(NatsBusLive(natsOptionsFrom(values, usage, "t1-serve")))
    : withBusMetrics(MemoryBusLive())
  const subjects = subjectsFor(prefixFrom(values, usage))
  const logging = loggingLayer(values, usage)
  const shutdownGraceMs = gateway.shutdownGraceMs
  // Actor flags are validated before anything starts, so a bad variable fails at once.
  const started = members(concurrency).map(([name, n]) => {
    const actor = actorRegistry[name]
    if (actor === undefined) throw new Error(`no actor ${name}`)
    const flags: FlagValues =
      name === "sandbox" || name === "coordinator"
        ? { driver }
        : name === "sampler" && engine !== undefined
          ? engine.sampler
          : name === "learner" && engine !== undefined
            ? { "default-policy-ref": MODEL_DIR_POLICY_REF, "model-dir": engine.modelDir }
            : {}
    return [name, actor.run({ subjects, concurrency: n, shutdownGraceMs }, flags)] as const
  })

  const program = Effect.gen(function* () {
    const image = process.env.T1_SANDBOX_IMAGE ?? ""
    // Before any member starts: a bwrap that cannot run here says why now, not at a first job.
    if (driver === "bwrap")
      yield* checkBwrapRuns(process.env.T1_BWRAP || undefined).pipe(
        Effect.mapError((e) => new Error(`t1 serve: --driver bwrap: ${e.reason}`)),
      )
    // The base image only matters when the sandboxes use it (bwrap exports its files).
    if (driver !== "local" && (image === "" || image === BASE_IMAGE))
      yield* ensureSandboxEngine(
        "t1 serve",
        "; --driver local runs sandboxes on this host instead (no security boundary: trusted synthetic tasks only)",
      )
    if (engine !== undefined) {
      const model = yield* publishModelDir(yield* Bus, subjects, engine.modelDir)
      yield* Effect.logInfo(
        `t1 serve: --policy ${engine.policy}: a train job without policy_ref starts from ${engine.modelDir} (${model.files.length} weight files, ${model.config.nLayers} layers, vocabulary ${model.config.vocabSize})`,
      )
    }
    const endpoint = yield* serveMetrics({ host: gateway.metricsHost, port: gateway.metricsPort })
    yield* Effect.logInfo(`t1 serve: metrics at ${endpoint.url}/metrics`)
    yield* Effect.forkScoped(runActor(diagnosticActor(subjects.ping, "serve")))
    // One supervisor: a member that stops takes the process down (with its reason) rather than
    // leaving a gateway that admits jobs nobody runs.
    return yield* Effect.all(
      [
        ...started.map(([name, run]) =>
          run.pipe(
            Effect.mapError((e) => new Error(`t1 serve: the ${name} stopped: ${e.message}`)),
          ),
        ),
        serveGateway({
          subjects,
          host: gateway.host,
          port: gateway.port,
          shutdownGraceMs,
          services: [yield* trainerService({ subjects })],
          ...(gateway.tokens === undefined ? {} : { tokens: gateway.tokens }),
          ...(gateway.tls === undefined ? {} : { tls: gateway.tls }),
        }).pipe(
          // Said once the port is bound: users and scripts connect when they read this line.
          Effect.tap((endpoint) =>
            Effect.logInfo(
              `t1 serve: ${onNats ? "NATS" : "in-memory"} bus, prefix ${subjects.prefix}; ${started.map(([n]) => n).join(", ")}; JobService on ${endpoint.address}`,
            ),
          ),
          Effect.andThen(Effect.never),
          Effect.scoped,
        ),
      ],
      { concurrency: "unbounded", discard: true },
    )
  })
  return program.pipe(
    Effect.scoped,
    // One job store for the gateway, the coordinator and the pools of this process.
    Effect.provide(
      jobStoreLayer(subjects).pipe(Layer.provideMerge(bus.pipe(Layer.provideMerge(MetricsLive)))),
    ),
    Effect.provide(logging),
  )
}
