import { readFileSync } from "node:fs"
import { readdir, readFile } from "node:fs/promises"
import type { Tools } from "./isolation.ts"
import { type SpawnMode, type Started, startProcess } from "./spawner.ts"

/**
 * The holder is a sandbox's anchor process, the local stand-in for a container: it creates the
 * sandbox's namespaces (when the host allows them), sets up its mounts, then waits on its stdin.
 * Every shell of the sandbox enters its namespaces (nsenter), so a restarted shell finds the
 * same mounts, network and background jobs. The sandbox is alive while its holder is: when the
 * holder is gone (killed from outside, or its driver process died and closed the pipe), the
 * sandbox is dead.
 */
export interface Holder {
  readonly pid: number
  /** From /proc/<pid>/stat, to tell this process from a later one with the same pid. */
  readonly startTime: string
  readonly alive: () => boolean
  readonly kill: () => void
}

export interface HolderPlan {
  readonly mountNamespace: boolean
  readonly networkNamespace: boolean
  /** The sandbox directory on the host, and where it is bind-mounted inside ("" = nowhere). */
  readonly hostWork: string
  readonly mountAt: string
  /** cgroup.procs files the holder joins before anything else (its children inherit them). */
  readonly cgroupProcs: ReadonlyArray<string>
}

/** Joins cgroups (argument count, then the files), then execs the rest of the arguments. */
const ENTER_CGROUPS = `n=$1; shift
while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n - 1)); done
exec "$@"`

/**
 * Runs inside the fresh namespaces. /run becomes an empty tmpfs (hiding docker.sock and the
 * host's daemons' sockets), keeping resolv.conf when it lives there, so DNS still works for
 * sandboxes with network. /tests and /logs, where the verifier unpacks a task's tests and the
 * tests write their reports, become private tmpfs too: on the host they are one directory that
 * concurrent sandboxes would share (one episode's verification emptying or reading another's).
 */
const HOLDER_SCRIPT = `set -e
work=$1 mount_at=$2 hide_run=$3 ip=$4
if [ -n "$mount_at" ]; then
  [ -d "$mount_at" ] || mkdir "$mount_at"
  mount --bind "$work" "$mount_at"
fi
if [ -n "$hide_run" ] && [ -d /run ]; then
  resolv=$(readlink -f /etc/resolv.conf 2>/dev/null || true)
  saved=
  case "$resolv" in /run/*) saved=$(cat "$resolv" 2>/dev/null || true) ;; esac
  mount -t tmpfs -o mode=755,size=16m t1-run /run
  if [ -n "$saved" ]; then mkdir -p "\${resolv%/*}"; printf '%s\\n' "$saved" > "$resolv"; fi
  if [ -d /var/run ] && [ ! -L /var/run ]; then mount -t tmpfs -o mode=755,size=1m t1-run /var/run; fi
fi
if [ -n "$hide_run" ]; then
  for private in /tests /logs; do
    [ -d "$private" ] || mkdir "$private"
    mount -t tmpfs -o mode=755,size=256m t1-private "$private"
  done
fi
if [ -n "$ip" ]; then "$ip" link set lo up; fi
echo ready
exec cat >/dev/null`

/** Wraps a command so its process first joins the given cgroups. */
export const inCgroups = (
  tools: Tools,
  procsFiles: ReadonlyArray<string>,
  command: ReadonlyArray<string>,
): ReadonlyArray<string> =>
  procsFiles.length === 0
    ? command
    : [
        tools.sh,
        "-c",
        ENTER_CGROUPS,
        "t1-enter",
        String(procsFiles.length),
        ...procsFiles,
        ...command,
      ]

/** Field 22 of /proc/<pid>/stat (start time in clock ticks), or undefined if there is no such process. */
export const processStartTime = (pid: number): string | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    if (fields[0] === "Z" || fields[0] === "X") return undefined
    return fields[19]
  } catch {
    return undefined
  }
}

export const startHolder = (
  tools: Tools,
  plan: HolderPlan,
  env: Readonly<Record<string, string>>,
  timeoutMs: number,
  spawnMode: SpawnMode = "helper",
): Promise<Holder> => {
  const unshareFlags = [
    ...(plan.mountNamespace ? ["--mount", "--propagation", "private"] : []),
    ...(plan.networkNamespace ? ["--net"] : []),
  ]
  const script =
    unshareFlags.length === 0 || tools.unshare === undefined
      ? [tools.sh, "-c", "echo ready; exec cat >/dev/null"]
      : [
          tools.unshare,
          ...unshareFlags,
          "--",
          tools.sh,
          "-c",
          HOLDER_SCRIPT,
          "t1-holder",
          plan.hostWork,
          plan.mountAt,
          plan.mountNamespace ? "1" : "",
          plan.networkNamespace && tools.ip !== undefined ? tools.ip : "",
        ]
  const [file, ...args] = inCgroups(tools, plan.cgroupProcs, script)
  return new Promise((resolve, reject) => {
    let settled = false
    let started: Started | undefined
    const fail = (e: Error) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      reject(e)
    }
    // One deadline for the start and the "ready": past it the holder is killed, if it ever runs.
    const timer = setTimeout(() => {
      started?.kill("SIGKILL")
      fail(new Error(`the sandbox's holder did not start within ${timeoutMs} ms`))
    }, timeoutMs)
    startProcess(spawnMode, file as string, args, { cwd: plan.hostWork, env: { ...env } }).then(
      (child) => {
        if (settled) {
          child.kill("SIGKILL")
          return
        }
        started = child
        let said = ""
        let stderr = ""
        child.stderr.on("data", (d: Buffer) => {
          stderr = (stderr + d.toString()).slice(-2000)
        })
        for (const s of [child.stdin, child.stdout, child.stderr]) s.on("error", () => undefined)
        child.onExit((code, signal) =>
          fail(new Error(`the sandbox's holder exited (${signal ?? code}): ${stderr.trim()}`)),
        )
        child.stdout.on("data", (d: Buffer) => {
          said += d.toString()
          if (!said.includes("ready\n") || settled) return
          const pid = child.pid
          const startTime = processStartTime(pid)
          if (startTime === undefined) {
            fail(new Error("the sandbox's holder vanished"))
            return
          }
          settled = true
          clearTimeout(timer)
          child.stdout.removeAllListeners("data")
          child.stdout.resume()
          resolve({
            pid,
            startTime,
            alive: () => !child.exited() && processStartTime(pid) === startTime,
            kill: () => {
              child.kill("SIGKILL")
              child.stdin.destroy()
            },
          })
        })
      },
      (e: unknown) => fail(e instanceof Error ? e : new Error(String(e))),
    )
  })
}

/** Kills the holder recorded for a sandbox left by another process, if it is still that process. */
export const killRecordedHolder = (holder: { pid: number; startTime: string } | null): void => {
  if (holder === null || processStartTime(holder.pid) !== holder.startTime) return
  try {
    process.kill(holder.pid, "SIGKILL")
  } catch {}
}

/**
 * SIGKILLs every process whose environment names this sandbox (T1_SANDBOX_ID), for hosts
 * without cgroups. Processes that scrubbed their environment are missed.
 */
export const killByEnvironment = async (id: string): Promise<void> => {
  const needle = Buffer.from(`T1_SANDBOX_ID=${id}\0`)
  for (let round = 0; round < 5; round++) {
    let found = 0
    for (const entry of await readdir("/proc").catch(() => [])) {
      if (!/^\d+$/.test(entry)) continue
      const environ = await readFile(`/proc/${entry}/environ`).catch(() => undefined)
      if (environ === undefined) continue
      const at = environ.indexOf(needle)
      if (at === -1 || (at > 0 && environ[at - 1] !== 0)) continue
      found++
      try {
        process.kill(Number(entry), "SIGKILL")
      } catch {}
    }
    if (found === 0) return
    await new Promise((r) => setTimeout(r, 20))
  }
}
