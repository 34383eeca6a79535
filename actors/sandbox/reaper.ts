import { Clock, Effect, Schedule, type Scope } from "effect"
import { LABELS, type SandboxDriverShape, type SandboxInfo } from "./driver.ts"

export type ReapReason = "orphan" | "expired"

export interface ReaperOptions {
  /** This host's owner label: at start-up, what it owns belongs to a previous, dead incarnation. */
  readonly owner: string
  readonly intervalMs: number
  /** Sandboxes in use or ready here: never reaped, whatever their labels say. */
  readonly inUse: () => ReadonlySet<string>
  readonly onReaped?: (info: SandboxInfo, reason: ReapReason) => void
  /**
   * Another host's expired sandboxes are left to it this much longer (its own idle timer and
   * restart reap them); past that they are abandoned and removed here. Default 6 hours.
   */
  readonly foreignGraceMs?: number
}

const reasonFor = (
  info: SandboxInfo,
  options: ReaperOptions,
  startup: boolean,
  now: number,
): ReapReason | undefined => {
  if (options.inUse().has(info.id)) return undefined
  // Its shell sessions died with the old process: nothing can use these sandboxes any more.
  if (startup && info.labels[LABELS.owner] === options.owner) return "orphan"
  const own = info.labels[LABELS.owner] === options.owner
  const grace = own ? 0 : (options.foreignGraceMs ?? 6 * 3600_000)
  if (info.expiresAtMs > 0 && info.expiresAtMs + grace < now) return "expired"
  return undefined
}

/** One pass: removes orphans (at start-up) and expired sandboxes of any owner. */
export const reapOnce = (
  driver: SandboxDriverShape,
  options: ReaperOptions,
  startup: boolean,
): Effect.Effect<ReadonlyArray<{ readonly id: string; readonly reason: ReapReason }>> =>
  Effect.gen(function* () {
    const all = yield* driver.list
    const now = yield* Clock.currentTimeMillis
    const doomed = all.flatMap((info) => {
      const reason = reasonFor(info, options, startup, now)
      return reason === undefined ? [] : [{ info, reason }]
    })
    yield* Effect.forEach(
      doomed,
      ({ info, reason }) =>
        driver.destroy(info.id).pipe(
          Effect.tap(() => Effect.sync(() => options.onReaped?.(info, reason))),
          Effect.tap(() => Effect.logInfo(`reaper: removed ${reason} sandbox ${info.id}`)),
          Effect.ignore,
        ),
      { concurrency: 4, discard: true },
    )
    return doomed.map(({ info, reason }) => ({ id: info.id, reason }))
  }).pipe(
    Effect.catch((e) =>
      Effect.as(Effect.logWarning(`reaper: listing sandboxes failed: ${e.message}`), []),
    ),
  )

/** Reaps once now (orphans included, unless already done), then expired sandboxes every intervalMs. */
export const startReaper = (
  driver: SandboxDriverShape,
  options: ReaperOptions,
  { startup = true }: { readonly startup?: boolean } = {},
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    if (startup) yield* reapOnce(driver, options, true)
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.delay(reapOnce(driver, options, false), `${options.intervalMs} millis`),
        Schedule.forever,
      ),
    )
  })
