import { readFile } from "node:fs/promises"
import type Dockerode from "dockerode"

/** Innermost-namespace process group of a host pid, from /proc/<pid>/status (NSpgid). */
const innerPgid = async (hostPid: number): Promise<number | undefined> => {
  try {
    const status = await readFile(`/proc/${hostPid}/status`, "utf8")
    const line = /^NSpgid:\s+(.+)$/m.exec(status)?.[1]
    const ids = line?.trim().split(/\s+/).map(Number)
    return ids?.at(-1)
  } catch {
    return undefined
  }
}

/**
 * Signals a container's process group from the host, for when nothing can run inside the
 * container (a fork bomb holds every pid of its limit, so even `docker exec kill` cannot start).
 * Lists the container's processes (host pids, from `docker top`), keeps those whose in-container
 * process group is `pgid` and signals them, repeating while new members appear. Works when this
 * process runs on the engine's host with access to its /proc (a local engine); returns false
 * when it could not see the processes.
 */
export const signalGroupFromHost = async (
  docker: Dockerode,
  containerId: string,
  pgid: number,
  signal: "INT" | "KILL",
): Promise<boolean> => {
  for (let pass = 0; pass < 50; pass++) {
    const top: { readonly Processes?: ReadonlyArray<ReadonlyArray<string>> } = await docker
      .getContainer(containerId)
      .top({ ps_args: "-o pid" })
    const pids = (top.Processes ?? [])
      .map((row: ReadonlyArray<string>) => Number(row[0]))
      .filter((p: number) => Number.isInteger(p) && p > 1)
    const members: number[] = []
    let visible = false
    for (const pid of pids) {
      const group = await innerPgid(pid)
      if (group === undefined) continue
      visible = true
      if (group === pgid) members.push(pid)
    }
    if (!visible) return pids.length === 0
    if (members.length === 0) return true
    for (const pid of members) {
      try {
        process.kill(pid, signal === "KILL" ? "SIGKILL" : "SIGINT")
      } catch {
        // Gone already.
      }
    }
    if (signal === "INT") return true
  }
  return true
}
