import { InvalidSandboxSpec } from "./errors.ts"

/**
 * Pristine path patterns (SealOptions.pristinePaths): absolute directories whose components may
 * hold `*` (any characters but `/`). Shared by every driver that seals and by the bus host, which
 * refuses a bad pattern before it reaches a driver.
 */

const components = (path: string): ReadonlyArray<string> => path.split("/").filter((c) => c !== "")

/** The first pattern that is not an absolute, `..`-free path, as the error naming the field. */
export const pristinePathsProblem = (
  patterns: ReadonlyArray<string>,
): InvalidSandboxSpec | undefined => {
  for (const pattern of patterns) {
    const why =
      typeof pattern !== "string" || !pattern.startsWith("/")
        ? "is not an absolute path"
        : /[\0\n\r]/.test(pattern)
          ? "contains NUL or a line break"
          : components(pattern).some((c) => c === ".." || c === ".")
            ? "contains '.' or '..' components"
            : components(pattern).length === 0
              ? "is the root directory (the whole file system cannot be restored)"
              : undefined
    if (why !== undefined)
      return new InvalidSandboxSpec({
        field: "pristinePaths",
        reason: `${JSON.stringify(pattern)} ${why}`,
      })
  }
  return undefined
}

const componentMatcher = (pattern: string): RegExp =>
  new RegExp(
    `^${pattern
      .split("*")
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join("[^/]*")}$`,
  )

/**
 * Where `path` lies relative to the patterns: "under" one (the directory itself or anything
 * inside it), an "ancestor" of one (a directory a pristine one may lie in, whose replacement by a
 * link would move the pristine one elsewhere), or neither (undefined).
 */
export type PristinePlace = "under" | "ancestor" | undefined

export const pristineMatcher = (patterns: ReadonlyArray<string>) => {
  const compiled = patterns.map((p) => components(p).map(componentMatcher))
  return (path: string): PristinePlace => {
    const parts = components(path)
    let place: PristinePlace
    for (const pattern of compiled) {
      const n = Math.min(parts.length, pattern.length)
      let matches = true
      for (let i = 0; i < n && matches; i++) matches = pattern[i]?.test(parts[i] ?? "") === true
      if (!matches) continue
      if (parts.length >= pattern.length) return "under"
      place = "ancestor"
    }
    return place
  }
}
