import type { Effect } from "effect"
import type { Bus, Subjects } from "../services/bus/index.ts"
import type { Metrics } from "../services/metrics/index.ts"

export interface HostContext {
  readonly subjects: Subjects
  readonly concurrency: number
  readonly shutdownGraceMs: number
}

export type FlagValues = Readonly<Record<string, string | boolean | undefined>>

/** A flag of an actor's own with a bad value; the CLI prints it with the usage (exit 2). */
export class ActorConfigError extends Error {}

export interface HostedActor {
  readonly summary: string
  /** Flags of its own besides the common ones (node:util parseArgs specs), and their help. */
  readonly flags?: Readonly<Record<string, { readonly type: "string" | "boolean" }>>
  readonly flagsHelp?: string
  /** Throws ActorConfigError for bad flag values; the program fails only on start-up errors. */
  readonly run: (
    context: HostContext,
    flags: FlagValues,
  ) => Effect.Effect<never, { readonly message: string }, Bus | Metrics>
}
