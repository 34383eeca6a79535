/**
 * The system `t1 up` runs its jobs on, in this process: the gateway (JobService on a free
 * loopback port), the coordinator, a sandbox host and a verifier, the samplers (the embedded
 * TinyMoE per job, in the recipe's short shell-block format), and the buffer and learner pools.
 * The same actors `t1 serve` hosts; what differs is set here and said in `t1 up --help`.
 */

import { Effect, type Scope } from "effect"
import { runBufferPool } from "../../actors/buffer/index.ts"
import { runCoordinator } from "../../actors/coordinator/index.ts"
import { runLearnerPool } from "../../actors/learner/index.ts"
import { startSandboxAndVerifier } from "../../actors/local.ts"
import { jobPolicies, runSampler, shellBlockShort } from "../../actors/sampler/index.ts"
import {
  BASE_IMAGE,
  type ChosenDriverError,
  type SandboxDriverChoice,
  wireTaskFor,
} from "../../actors/sandbox/index.ts"
import { trainerService } from "../../actors/trainer/index.ts"
import { ChatTemplate, type Tokenizer } from "../../model/index.ts"
import { selectKernels } from "../../model/kernels/select.ts"
import { Bus, type BusError, type Subjects } from "../../services/bus/index.ts"
import {
  type GatewayEndpoint,
  type GatewayStartError,
  serveGateway,
} from "../../services/gateway/index.ts"
import { JobStore, makeJobStore } from "../../services/jobs/index.ts"
import type { Metrics } from "../../services/metrics/index.ts"

export interface UpSystemOptions {
  readonly concurrency: number
  readonly driver: SandboxDriverChoice
  /** TinyMoE's per-episode context (the recipe's episodes fit in 1024 tokens). */
  readonly contextLength: number
  /** The samplers' tokenizer (the caller's, read once). */
  readonly tokenizer: Tokenizer
}

/**
 * An update waits this long for its whole batch: `t1 up` trains on full batches of each step's
 * groups, as the recipe measured (a 2 s wait would train on the first group to finish).
 */
const BATCH_WAIT_MS = 30 * 60_000

/** Starts every actor in the scope; the gateway's endpoint once it listens. */
export const startUpSystem = (
  subjects: Subjects,
  o: UpSystemOptions,
): Effect.Effect<
  GatewayEndpoint,
  GatewayStartError | BusError | ChosenDriverError,
  Bus | Metrics | Scope.Scope
> =>
  Effect.gen(function* () {
    const kernels = selectKernels("auto")
    const { tokenizer } = o
    // The local driver runs every task on this host: no image to resolve, no engine needed.
    const local = o.driver === "local"
    yield* startSandboxAndVerifier(subjects, { concurrency: o.concurrency, driver: o.driver })
    yield* Effect.forkScoped(
      runCoordinator({
        subjects,
        defaultMaxConcurrent: o.concurrency,
        ...(local ? { resolveImage: () => Effect.succeed(BASE_IMAGE) } : {}),
      }),
    )
    const policies = yield* jobPolicies({
      bus: yield* Bus,
      subjects,
      vocabSize: tokenizer.vocabSize,
      contextLength: o.contextLength,
      kernels,
    })
    yield* Effect.forkScoped(
      runSampler({
        subjects,
        policy: policies.forItem,
        template: new ChatTemplate(tokenizer),
        format: shellBlockShort,
        concurrency: o.concurrency,
      }),
    )
    yield* Effect.forkScoped(runBufferPool({ subjects }))
    yield* Effect.forkScoped(
      runLearnerPool({
        subjects,
        kernels,
        batchWaitMs: BATCH_WAIT_MS,
        format: shellBlockShort,
        toWire: wireTaskFor(o.driver),
        goldenConcurrency: o.concurrency,
      }),
    )
    return yield* serveGateway({
      subjects,
      port: 0,
      services: [yield* trainerService({ subjects })],
    })
  }).pipe(
    // One job store for the gateway, the coordinator and the pools of this process.
    Effect.provideServiceEffect(
      JobStore,
      Bus.use((bus) => makeJobStore(bus, subjects)),
    ),
  )
