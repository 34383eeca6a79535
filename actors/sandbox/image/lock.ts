import { closeSync, openSync, readFileSync, rmSync, writeSync } from "node:fs"
import { Effect } from "effect"

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

const tryAcquire = (path: string): boolean => {
  try {
    const fd = openSync(path, "wx")
    writeSync(fd, String(process.pid))
    closeSync(fd)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    // A lock whose process is gone was left by a crash: take it over.
    const holder = Number.parseInt(readFileSync(path, "utf8"), 10)
    if (Number.isInteger(holder) && holder > 0 && alive(holder)) return false
    rmSync(path, { force: true })
    return false
  }
}

/**
 * Runs `effect` holding an exclusive lock file, so that processes building the same image (test
 * files in parallel, CI and a developer) wait for one another instead of building twice.
 */
export const withFileLock = <A, E, R>(
  path: string,
  effect: Effect.Effect<A, E, R>,
  onWait: Effect.Effect<void> = Effect.void,
): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(
    Effect.gen(function* () {
      let waited = false
      while (!tryAcquire(path)) {
        if (!waited) yield* onWait
        waited = true
        yield* Effect.sleep("250 millis")
      }
    }),
    () => effect,
    () => Effect.sync(() => rmSync(path, { force: true })),
  )
