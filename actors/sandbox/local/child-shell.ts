import { readdir, readFile } from "node:fs/promises"
import type { ShellProcess } from "../shell/index.ts"
import { type SpawnMode, type Started, startProcess } from "./spawner.ts"

const STDERR_KEPT = 4096

/** Rounds of a SIGKILL that only sleep before /proc is read (see signalGroup). */
const CHEAP_ROUNDS = 3

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Whether process group `pgid` has a member that is not a zombie. (kill(-pgid) succeeds while
 * only zombies are left, and orphans' zombies may wait long for a busy init to reap them.)
 */
const groupHasLiveMembers = async (pgid: number): Promise<boolean> => {
  // The cheap answer first: no member at all (zombies included). Only a group that still has
  // one is looked for in /proc, a read of every process's stat.
  try {
    process.kill(-pgid, 0)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ESRCH") return false
  }
  const entries = await readdir("/proc").catch(() => [])
  const stats = await Promise.all(
    entries
      .filter((e) => /^\d+$/.test(e))
      .map((e) => readFile(`/proc/${e}/stat`, "latin1").catch(() => "")),
  )
  return stats.some((stat) => {
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return fields[2] === String(pgid) && fields[0] !== "Z" && fields[0] !== "X"
  })
}

/**
 * Sends `signal` to process group `pgid`. For SIGKILL it repeats until no live member is left,
 * so a fork bomb's late children are caught too (bounded: a group stuck in the kernel is given
 * up on after about a second).
 */
export const signalGroup = async (pgid: number, signal: "INT" | "KILL"): Promise<void> => {
  const rounds = signal === "KILL" ? 50 : 1
  for (let i = 0; i < rounds; i++) {
    try {
      process.kill(-pgid, `SIG${signal}`)
    } catch {
      return // ESRCH: nothing left in the group
    }
    if (i + 1 === rounds) return
    // The first rounds only sleep: killed members are usually reaped within milliseconds, and
    // the next kill's ESRCH says so for free. A group that stays is looked for in /proc (a read
    // of every process's stat: at every session's end it cost ~6% of an RL run's event loop).
    if (i >= CHEAP_ROUNDS && !(await groupHasLiveMembers(pgid))) return
    await sleep(i < 5 ? 2 : 20)
  }
}

const describeExit = (code: number | null, signal: string | null, stderr: string) => {
  const how = signal !== null ? `killed by ${signal}` : `exited with status ${code}`
  const said = stderr.trim()
  return said === "" ? how : `${how}: ${said}`
}

/**
 * A ShellProcess over a local child process: stdin and stdout are pipes, stderr is kept (its
 * last few KiB) only to explain an early exit. Output that arrives before a listener is attached
 * is held for it, and an exit that happened before onExit is reported on registration.
 */
export const spawnShellProcess = async (
  file: string,
  args: ReadonlyArray<string>,
  options: {
    readonly cwd: string
    readonly env: Readonly<Record<string, string>>
    /** How the process is started (spawner.ts); default "helper". */
    readonly spawn?: SpawnMode
  },
): Promise<ShellProcess> => wrap(await startProcess(options.spawn ?? "helper", file, args, options))

const wrap = (child: Started): ShellProcess => {
  const { stdin, stdout, stderr } = child
  let stderrTail = ""
  stderr.setEncoding("utf8")
  stderr.on("data", (s: string) => {
    stderrTail = (stderrTail + s).slice(-STDERR_KEPT)
  })
  // EPIPE after the shell died surfaces through write()'s callback; never as an uncaught error.
  stdin.on("error", () => undefined)
  stdout.on("error", () => undefined)
  stderr.on("error", () => undefined)

  const held: Uint8Array[] = []
  let outputListener: ((chunk: Uint8Array) => void) | undefined
  stdout.on("data", (chunk: Buffer) => {
    if (outputListener === undefined) held.push(chunk)
    else outputListener(chunk)
  })

  let exitReason: string | undefined
  const exitListeners: Array<(reason: string) => void> = []
  const reportExit = (reason: string) => {
    if (exitReason !== undefined) return
    exitReason = reason
    for (const listener of exitListeners.splice(0)) listener(reason)
  }
  // 'close' waits for stdout to end, which a background job holding the pipe can delay forever;
  // so the exit counts once stdout has ended or shortly after the process is gone.
  child.onExit((code, signal) => {
    const reason = describeExit(code, signal, stderrTail)
    setTimeout(() => reportExit(reason), 50).unref()
    const ended = () => reportExit(describeExit(code, signal, stderrTail))
    if (stdout.readableEnded || stdout.destroyed) ended()
    else stdout.once("close", ended)
  })

  let closed = false
  return {
    write: (data) =>
      new Promise((resolve, reject) => {
        if (stdin.destroyed || !stdin.writable) {
          reject(new Error("the shell's stdin is closed"))
          return
        }
        stdin.write(data, (error) => (error ? reject(error) : resolve()))
      }),
    onOutput: (listener) => {
      outputListener = listener
      for (const chunk of held.splice(0)) listener(chunk)
    },
    onExit: (listener) => {
      if (exitReason !== undefined) listener(exitReason)
      else exitListeners.push(listener)
    },
    signal: (pgid, signal) => signalGroup(pgid, signal),
    close: async () => {
      if (closed) return
      closed = true
      child.kill("SIGKILL")
      stdin.destroy()
      stdout.destroy()
      stderr.destroy()
    },
  }
}
