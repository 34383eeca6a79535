/**
 * The in-process system a train job needs besides its samplers (sandbox host and verifier on the
 * local driver, coordinator, buffer, learner, gateway) and the job itself, submitted through the
 * gRPC client: what the engine tests start before attaching their engines and bridge.
 */
import { Effect } from "effect"
import { runBufferPool } from "../../actors/buffer/index.ts"
import { runCoordinator } from "../../actors/coordinator/index.ts"
import { runLearnerPool } from "../../actors/learner/index.ts"
import { startSandboxAndVerifier } from "../../actors/local.ts"
import { shellBlockShort } from "../../actors/sampler/index.ts"
import { BASE_IMAGE, wireTaskFor } from "../../actors/sandbox/index.ts"
import type { Subjects } from "../../services/bus/index.ts"
import { jobServiceClient } from "../../services/gateway/client.ts"
import { serveGateway } from "../../services/gateway/index.ts"
import { smallTrainSpec } from "./train-spec.ts"

export const startTrainJob = (subjects: Subjects, name: string, ppoSteps: number) =>
  Effect.gen(function* () {
    yield* startSandboxAndVerifier(subjects, { concurrency: 2, driver: "local" })
    yield* Effect.forkScoped(
      runCoordinator({ subjects, resolveImage: () => Effect.succeed(BASE_IMAGE) }),
    )
    yield* Effect.forkScoped(runBufferPool({ subjects }))
    yield* Effect.forkScoped(
      runLearnerPool({ subjects, format: shellBlockShort, toWire: wireTaskFor("local") }),
    )
    const gateway = yield* serveGateway({ subjects, port: 0 })
    const client = jobServiceClient(gateway.address, { timeoutMs: 10_000 })
    const { jobId } = yield* Effect.promise(() =>
      client.submitJob({ spec: smallTrainSpec(name, { ppoSteps, criticWarmupSteps: 0 }) }),
    )
    return { client, jobId }
  })
