import { readFile } from "node:fs/promises"
import type { SandboxSpec } from "../driver.ts"
import { InvalidSandboxSpec } from "../errors.ts"

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/** The checks every spec passes before anything is made on the host. */
export const validateSpec = (spec: SandboxSpec): InvalidSandboxSpec | undefined => {
  const invalid = (field: string, reason: string) => new InvalidSandboxSpec({ field, reason })
  if (!(Number.isInteger(spec.pidsLimit) && spec.pidsLimit >= 0))
    return invalid("pidsLimit", "must be an integer >= 0")
  if (!(Number.isFinite(spec.memoryMb) && spec.memoryMb >= 0))
    return invalid("memoryMb", "must be >= 0")
  if (!(Number.isFinite(spec.cpus) && spec.cpus >= 0)) return invalid("cpus", "must be >= 0")
  if (!(Number.isFinite(spec.ttlMs) && spec.ttlMs > 0)) return invalid("ttlMs", "must be > 0")
  for (const [name, value] of Object.entries(spec.env)) {
    if (!ENV_NAME.test(name))
      return invalid("env", `${JSON.stringify(name)} is not a variable name`)
    if (value.includes("\0")) return invalid("env", `${name} contains a NUL byte`)
  }
  return undefined
}

/** Another user the shell runs as (through setpriv, which needs root). */
export interface SandboxUser {
  readonly uid: number
  readonly gid: number
}

/**
 * spec.user ("name", "uid", "name:gid" or "uid:gid") as a uid and gid; undefined when it is ""
 * or this process's own user.
 */
export const resolveUser = async (
  user: string,
  canSwitch: boolean,
): Promise<SandboxUser | undefined | InvalidSandboxSpec> => {
  if (user === "") return undefined
  const invalid = (reason: string) => new InvalidSandboxSpec({ field: "user", reason })
  const [name = "", group] = user.split(":")
  const numeric = /^\d+$/.test(name)
  const passwd = await readFile("/etc/passwd", "utf8").catch(() => "")
  const row = passwd
    .split("\n")
    .map((line) => line.split(":"))
    .find((fields) => (numeric ? fields[2] === name : fields[0] === name))
  const uid = row !== undefined ? Number(row[2]) : numeric ? Number(name) : undefined
  if (uid === undefined) return invalid(`no user ${name} on this host`)
  const gid =
    group !== undefined && /^\d+$/.test(group) ? Number(group) : row ? Number(row[3]) : uid
  const self = process.getuid?.()
  if (uid === self) return undefined
  if (self !== 0 || !canSwitch)
    return invalid(`running as ${user} needs root and setpriv (this process is uid ${self})`)
  return { uid, gid }
}
