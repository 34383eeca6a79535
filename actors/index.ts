import { runActor } from "../services/actor/index.ts"
import { bufferActor } from "./buffer/hosted.ts"
import { coordinatorActor } from "./coordinator/index.ts"
import { diagnosticActor } from "./diagnostic/index.ts"
import type { HostedActor } from "./hosted.ts"
import { learnerActor } from "./learner/hosted.ts"
import { samplerActor } from "./sampler/hosted.ts"
import { sandboxActor } from "./sandbox/index.ts"
import { verifierActor } from "./verifier/index.ts"

/**
 * The actors `t1 actor <name>` can host; each later actor registers itself here by name. The
 * registry imports each pooled actor's hosted.ts itself: a folder's surface (index.ts) leaves its
 * hosting out, so that folders that use each other do not load each other's flag tables.
 */
export const actorRegistry: Readonly<Record<string, HostedActor>> = {
  diagnostic: {
    summary: "answers Ping on <prefix>.ping with a Pong (bus liveness probe)",
    run: ({ subjects, concurrency, shutdownGraceMs }, _flags) =>
      runActor(diagnosticActor(subjects.ping, "diagnostic"), { concurrency, shutdownGraceMs }),
  },
  buffer: bufferActor,
  coordinator: coordinatorActor,
  learner: learnerActor,
  sampler: samplerActor,
  sandbox: sandboxActor,
  verifier: verifierActor,
}

export { diagnosticActor, INSTANCE_ID } from "./diagnostic/index.ts"
export { ActorConfigError, type FlagValues, type HostContext, type HostedActor } from "./hosted.ts"
