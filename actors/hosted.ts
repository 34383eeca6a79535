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

/** A flag's value, else its environment variable's, else undefined (empty counts as unset). */
export const flagText = (flags: FlagValues, name: string, env: string): string | undefined => {
  const v = flags[name] ?? process.env[env]
  return typeof v === "string" && v !== "" ? v : undefined
}

/** An integer flag (or environment variable) of at least `min`; else ActorConfigError. */
export const flagInt = (
  flags: FlagValues,
  name: string,
  env: string,
  fallback: number,
  min = 0,
): number => {
  const raw = flagText(flags, name, env)
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw) || Number(raw) < min) {
    throw new ActorConfigError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(raw)}`)
  }
  return Number(raw)
}
