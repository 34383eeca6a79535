import { Cause, Effect, Exit } from "effect"
import { caseSeed, Random } from "./random.ts"

/**
 * What a fuzz target is and how its outcomes are judged. A case is accepted (the input was
 * taken) or rejected with a typed error — an Effect tagged error (`_tag`) with a message —
 * and anything else is a crash: a raw TypeError/RangeError escaping, a defect, a failure that
 * is not a tagged error, an interruption, a case that outlives its time limit.
 */

export type Verdict =
  | { readonly kind: "accepted" }
  | { readonly kind: "rejected" }
  | { readonly kind: "crash"; readonly reason: string }

export const ACCEPTED: Verdict = { kind: "accepted" }
export const REJECTED: Verdict = { kind: "rejected" }
export const crash = (reason: string): Verdict => ({ kind: "crash", reason })

export interface FuzzCase {
  /** The input, printed (as hex) when the case crashes. */
  readonly input: () => string
  readonly run: () => Verdict | Promise<Verdict>
}

export interface FuzzTarget {
  readonly name: string
  /** One line: what is fed to which function. */
  readonly description: string
  /** Builds one case from its own generator; cheap, the work happens in `run`. */
  readonly make: (rng: Random) => FuzzCase
  /** Once before the first case (temporary directories, valid seed inputs). */
  readonly setup?: () => Promise<void>
  readonly teardown?: () => Promise<void>
}

/** An Error carrying a string `_tag` and a message: what `Data.TaggedError` makes. */
export const isTypedError = (e: unknown): boolean =>
  e instanceof Error &&
  typeof (e as { readonly _tag?: unknown })._tag === "string" &&
  e.message.length > 0

export const describeError = (e: unknown): string => {
  if (e instanceof Error) {
    const at = e.stack?.split("\n").find((l) => l.trim().startsWith("at "))
    return `${e.name}: ${e.message}${at === undefined ? "" : ` (${at.trim()})`}`
  }
  return `non-Error thrown: ${String(e)}`
}

/** A thrown value: typed errors are rejections, everything else a crash. */
export const verdictOfThrow = (e: unknown): Verdict =>
  isTypedError(e) ? REJECTED : crash(`untyped exception: ${describeError(e)}`)

/** An Effect's exit: success accepted, typed failures rejected, defects and the rest crashes. */
export const verdictOfExit = <A, E>(exit: Exit.Exit<A, E>): Verdict => {
  if (Exit.isSuccess(exit)) return ACCEPTED
  for (const reason of exit.cause.reasons) {
    if (Cause.isDieReason(reason)) return crash(`defect: ${describeError(reason.defect)}`)
    if (Cause.isInterruptReason(reason)) return crash("interrupted")
    if (Cause.isFailReason(reason) && !isTypedError(reason.error))
      return crash(`untyped failure: ${describeError(reason.error)}`)
  }
  return REJECTED
}

/** Runs a synchronous check: it returns its verdict or throws (judged by verdictOfThrow). */
export const judge = (check: () => Verdict): Verdict => {
  try {
    return check()
  } catch (e) {
    return verdictOfThrow(e)
  }
}

export const judgeEffect = <A, E>(effect: Effect.Effect<A, E>): Verdict =>
  verdictOfExit(Effect.runSyncExit(effect))

export const judgeEffectAsync = async <A, E>(effect: Effect.Effect<A, E>): Promise<Verdict> =>
  verdictOfExit(await Effect.runPromiseExit(effect))

export interface CrashReport {
  readonly target: string
  readonly index: number
  readonly seed: number
  readonly reason: string
  readonly input: string
}

export interface TargetReport {
  readonly name: string
  readonly iterations: number
  readonly accepted: number
  readonly rejected: number
  readonly crashes: number
  readonly seconds: number
  /** The first few crashes, with what reproduces them. */
  readonly examples: ReadonlyArray<CrashReport>
}

export interface RunOptions {
  readonly iterations: number
  readonly seed: number
  /** Only this case index (to reproduce a crash). */
  readonly only?: number
  /** A case taking longer counts as a hang (a crash). */
  readonly caseTimeoutMs?: number
  readonly maxExamples?: number
}

const timeout = (ms: number): { promise: Promise<Verdict>; cancel: () => void } => {
  let timer: NodeJS.Timeout | undefined
  const promise = new Promise<Verdict>((resolve) => {
    timer = setTimeout(() => resolve(crash(`hang: no verdict within ${ms} ms`)), ms)
  })
  return { promise, cancel: () => clearTimeout(timer) }
}

const runCase = async (c: FuzzCase, limitMs: number): Promise<Verdict> => {
  const started = performance.now()
  let verdict: Verdict
  try {
    const out = c.run()
    if (out instanceof Promise) {
      const limit = timeout(limitMs)
      verdict = await Promise.race([out.catch(verdictOfThrow), limit.promise])
      limit.cancel()
    } else verdict = out
  } catch (e) {
    verdict = verdictOfThrow(e)
  }
  const ms = performance.now() - started
  // A synchronous case cannot be stopped, only measured: a slow one is reported as a hang.
  if (verdict.kind !== "crash" && ms > limitMs)
    return crash(`hang: took ${Math.round(ms)} ms (limit ${limitMs} ms)`)
  return verdict
}

/** Runs `iterations` cases of one target. */
export const runTarget = async (target: FuzzTarget, options: RunOptions): Promise<TargetReport> => {
  const started = performance.now()
  const limitMs = options.caseTimeoutMs ?? 5000
  const maxExamples = options.maxExamples ?? 3
  let accepted = 0
  let rejected = 0
  let crashes = 0
  const examples: CrashReport[] = []
  await target.setup?.()
  try {
    const from = options.only ?? 0
    const to = options.only === undefined ? options.iterations : options.only + 1
    for (let index = from; index < to; index++) {
      const seed = caseSeed(options.seed, target.name, index)
      const c = target.make(new Random(seed))
      const verdict = await runCase(c, limitMs)
      if (verdict.kind === "accepted") accepted++
      else if (verdict.kind === "rejected") rejected++
      else {
        crashes++
        if (examples.length < maxExamples)
          examples.push({
            target: target.name,
            index,
            seed,
            reason: verdict.reason,
            input: c.input(),
          })
      }
    }
  } finally {
    await target.teardown?.()
  }
  return {
    name: target.name,
    iterations: accepted + rejected + crashes,
    accepted,
    rejected,
    crashes,
    seconds: (performance.now() - started) / 1000,
    examples,
  }
}
