import { existsSync, statSync } from "node:fs"
import { posix } from "node:path"
import { InvalidSandboxSpec } from "../errors.ts"

/**
 * Where a sandbox's workdir is, seen from inside. "" and "." mean the sandbox directory itself
 * (a host path such as /tmp/t1-sandboxes/local-AbC123/work). An absolute path such as /app is the
 * sandbox directory bind-mounted there in the sandbox's private mount namespace; the mount point
 * must be a directory that exists or whose parent exists (then an empty directory is created on
 * the host to mount over, and left there: it is only ever a mount point).
 */
export type Workdir =
  | { readonly kind: "sandbox" }
  | { readonly kind: "mounted"; readonly path: string }

/** System directories a workdir may not cover: the shell itself needs them. */
const RESERVED = new Set([
  "bin",
  "boot",
  "dev",
  "etc",
  "lib",
  "lib32",
  "lib64",
  "libx32",
  "proc",
  "run",
  "sbin",
  "sys",
  "usr",
])

const isWithin = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`)

export const planWorkdir = (
  workdir: string,
  options: { readonly mountNamespace: boolean; readonly sandboxesRoot: string },
): Workdir | InvalidSandboxSpec => {
  if (workdir === "" || workdir === ".") return { kind: "sandbox" }
  const invalid = (reason: string) => new InvalidSandboxSpec({ field: "workdir", reason })
  if (!workdir.startsWith("/"))
    return invalid(`${workdir}: must be absolute, or "" for the sandbox directory`)
  if (!options.mountNamespace)
    return invalid(
      `${workdir}: the local driver maps task paths only through a private mount namespace, ` +
        `which needs root and unshare; use "" (the sandbox directory) on this host`,
    )
  const path = posix.normalize(workdir).replace(/\/+$/, "")
  const top = path.split("/")[1] ?? ""
  if (path === "" || RESERVED.has(top))
    return invalid(`${workdir}: a system directory cannot be a workdir`)
  if (isWithin(options.sandboxesRoot, path) || isWithin(path, options.sandboxesRoot))
    return invalid(`${workdir}: overlaps the sandboxes' own directory ${options.sandboxesRoot}`)
  if (existsSync(path)) {
    if (!statSync(path).isDirectory()) return invalid(`${workdir}: exists and is not a directory`)
  } else if (!existsSync(posix.dirname(path))) {
    return invalid(`${workdir}: its parent directory does not exist on this host`)
  }
  return { kind: "mounted", path }
}

/** The workdir as the sandbox's shell sees it. */
export const insidePath = (workdir: Workdir, hostWork: string): string =>
  workdir.kind === "mounted" ? workdir.path : hostWork

/**
 * Maps a path as the sandbox sees it (absolute, or relative to the workdir) to path parts below
 * the sandbox directory, or undefined when it lies outside the workdir: the local driver only
 * transfers files there.
 */
export const workdirParts = (
  sandboxPath: string,
  workdir: Workdir,
  hostWork: string,
): ReadonlyArray<string> | undefined => {
  const inside = insidePath(workdir, hostWork)
  const path = posix.normalize(
    posix.isAbsolute(sandboxPath) ? sandboxPath : posix.join(inside, sandboxPath),
  )
  const clean = path.length > 1 ? path.replace(/\/+$/, "") : path
  if (!isWithin(clean, inside)) return undefined
  return clean.slice(inside.length).split("/").filter(Boolean)
}
