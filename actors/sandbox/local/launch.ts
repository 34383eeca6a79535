import { readdir, readFile } from "node:fs/promises"
import { join } from "node:path"
import { inCgroups } from "./holder.ts"
import type { Tools } from "./isolation.ts"
import type { SandboxUser } from "./spec.ts"

export interface ShellLaunch {
  readonly tools: Tools
  /** The holder whose namespaces the shell enters; undefined when the sandbox has none. */
  readonly holderPid: number | undefined
  readonly mountNamespace: boolean
  readonly networkNamespace: boolean
  /** The workdir as the sandbox sees it; the shell starts there. */
  readonly workdir: string
  readonly user: SandboxUser | undefined
  /** The sandbox's cgroup directories; empty when cgroups are not available. */
  readonly cgroups: ReadonlyArray<string>
  /** Used only without cgroups, as rlimits (best effort). */
  readonly pidsLimit: number
  readonly memoryBytes: number
}

/** How many processes `uid` has now (RLIMIT_NPROC counts them all, not just the sandbox's). */
export const processesOf = async (uid: number): Promise<number> => {
  let count = 0
  for (const entry of await readdir("/proc").catch(() => [])) {
    if (!/^\d+$/.test(entry)) continue
    const status = await readFile(`/proc/${entry}/status`, "latin1").catch(() => "")
    if (new RegExp(`^Uid:\\s+${uid}\\s`, "m").test(status)) count++
  }
  return count
}

/**
 * The argv that starts the sandbox's `setsid bash --noprofile --norc`: it joins the sandbox's
 * cgroups, enters the holder's namespaces, changes to the workdir, takes rlimits where there are
 * no cgroups, and drops to the sandbox's user.
 */
export const shellArgv = async (launch: ShellLaunch): Promise<ReadonlyArray<string>> => {
  const { tools } = launch
  const bash = [tools.setsid, tools.bash, "--noprofile", "--norc"]
  const asUser =
    launch.user === undefined || tools.setpriv === undefined
      ? bash
      : [
          tools.setpriv,
          `--reuid=${launch.user.uid}`,
          `--regid=${launch.user.gid}`,
          "--clear-groups",
          "--",
          ...bash,
        ]
  const limits: string[] = []
  if (launch.cgroups.length === 0 && tools.prlimit !== undefined) {
    // RLIMIT_NPROC counts the user's processes everywhere and root ignores it: allow the
    // sandbox's share on top of what the user already runs.
    const uid = launch.user?.uid ?? process.getuid?.() ?? 0
    if (uid !== 0) limits.push(`--nproc=${(await processesOf(uid)) + launch.pidsLimit}`)
    if (launch.memoryBytes > 0) limits.push(`--as=${launch.memoryBytes}`)
  }
  const limited =
    limits.length > 0 && tools.prlimit !== undefined
      ? [tools.prlimit, ...limits, "--", ...asUser]
      : asUser
  const nsFlags = [
    ...(launch.mountNamespace ? ["-m"] : []),
    ...(launch.networkNamespace ? ["-n"] : []),
  ]
  const entered =
    launch.holderPid !== undefined && nsFlags.length > 0 && tools.nsenter !== undefined
      ? [
          tools.nsenter,
          "-t",
          String(launch.holderPid),
          ...nsFlags,
          "--",
          // Not nsenter --wd: it opens the directory before entering the mount namespace, which
          // gives the mount point underneath the bind mount instead of the workdir.
          tools.sh,
          "-c",
          'cd -- "$0" && exec "$@"',
          launch.workdir,
          ...limited,
        ]
      : limited
  return inCgroups(
    tools,
    launch.cgroups.map((dir) => join(dir, "cgroup.procs")),
    entered,
  )
}
