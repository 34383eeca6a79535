/**
 * Puts the image's files back under a stopped bwrap sandbox's pristine directories (restore.py
 * does the work, on the host, while nothing of the sandbox runs and its overlay is unmounted).
 */
import { execFile } from "node:child_process"
import { readdir } from "node:fs/promises"
import { fileURLToPath } from "node:url"
import { DEFAULT_PATH } from "../local/isolation.ts"

const RESTORE_SCRIPT = fileURLToPath(new URL("./restore.py", import.meta.url))

export interface Restored {
  /** Paths the agent changed or deleted that the image has. */
  readonly restored: ReadonlyArray<string>
  /** Paths the agent added. */
  readonly removed: ReadonlyArray<string>
}

/** A pattern's path component as restore.py matches it: `*` is any run of non-slashes. */
const componentPattern = (component: string) =>
  new RegExp(`^${component.split("*").map(escapeRegExp).join("[^/]*")}$`)

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/**
 * Whether the upper layer has an entry where a pattern's first directory is (`usr` for the
 * Python site directories). None: the agent changed nothing at or below any of them (not even
 * an ancestor made opaque or replaced, which would have put that name in the upper layer), so
 * there is nothing to restore. The verifier seals every episode, and most never write under
 * /usr: this spares them a Python start and a walk (~60 ms on 2 cores).
 */
export const upperTouchesPatterns = async (
  upper: string,
  patterns: ReadonlyArray<string>,
): Promise<boolean> => {
  const firsts = patterns.flatMap((p) => {
    const first = p.split("/").find((c) => c !== "")
    return first === undefined ? [] : [componentPattern(first)]
  })
  const names = await readdir(upper)
  return names.some((name) => firsts.some((first) => first.test(name)))
}

/** Runs restore.py with `python` over `upper` (the agent's changes) and `lower` (the image). */
export const restorePristine = async (
  python: string,
  upper: string,
  lower: string,
  patterns: ReadonlyArray<string>,
): Promise<Restored> => {
  if (patterns.length === 0 || !(await upperTouchesPatterns(upper, patterns)))
    return { restored: [], removed: [] }
  return new Promise<Restored>((resolve, reject) => {
    execFile(
      python,
      ["-I", "-S", RESTORE_SCRIPT, upper, lower, JSON.stringify(patterns)],
      { timeout: 60_000, maxBuffer: 64 * 1024 * 1024, env: { PATH: DEFAULT_PATH } },
      (error, stdout, stderr) => {
        if (error !== null) {
          reject(
            new Error(
              `restoring the pristine paths failed: ${String(stderr).trim().slice(-500) || error.message}`,
            ),
          )
          return
        }
        try {
          resolve(JSON.parse(String(stdout)) as Restored)
        } catch (e) {
          reject(
            new Error(
              `restoring the pristine paths said nothing readable: ${e instanceof Error ? e.message : String(e)}`,
            ),
          )
        }
      },
    )
  })
}
