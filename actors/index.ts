import type { Effect } from "effect"
import { runActor } from "../services/actor/index.ts"
import type { Bus, Subjects } from "../services/bus/index.ts"
import type { Metrics } from "../services/metrics/index.ts"
import { diagnosticActor } from "./diagnostic/index.ts"

export interface HostContext {
  readonly subjects: Subjects
  readonly concurrency: number
  readonly shutdownGraceMs: number
}

export interface HostedActor {
  readonly summary: string
  readonly run: (context: HostContext) => Effect.Effect<never, never, Bus | Metrics>
}

/** The actors `t1 actor <name>` can host; each later actor registers itself here by name. */
export const actorRegistry: Readonly<Record<string, HostedActor>> = {
  diagnostic: {
    summary: "answers Ping on <prefix>.ping with a Pong (bus liveness probe)",
    run: ({ subjects, concurrency, shutdownGraceMs }) =>
      runActor(diagnosticActor(subjects.ping, "diagnostic"), { concurrency, shutdownGraceMs }),
  },
}

export { diagnosticActor, INSTANCE_ID } from "./diagnostic/index.ts"
