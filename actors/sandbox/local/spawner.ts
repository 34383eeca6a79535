import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, rmSync } from "node:fs"
import { connect, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Readable, Writable } from "node:stream"
import { fileURLToPath } from "node:url"

/**
 * A process the local driver started: its stdio are streams, its end is reported once.
 * `onExit` sees the exit status as soon as it is known (before stdout has necessarily ended).
 */
export interface Started {
  readonly pid: number
  readonly stdin: Writable
  readonly stdout: Readable
  readonly stderr: Readable
  readonly onExit: (listener: (code: number | null, signal: string | null) => void) => void
  readonly exited: () => boolean
  readonly kill: (signal: NodeJS.Signals) => void
}

export interface StartOptions {
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
}

/**
 * How the local driver starts processes. `helper` (the default where python3 is found): a small
 * helper process forks them (spawner.py), so this process never forks — from a process holding a
 * model each fork blocked the event loop ~35 ms (node's spawn forks the whole process) and its
 * memory writes page-faulted after. `direct`: node's own spawn.
 */
export type SpawnMode = "helper" | "direct"

const exitOf = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null

/** node's own spawn, as a Started once the process runs. */
const startDirect = (
  file: string,
  args: ReadonlyArray<string>,
  options: StartOptions,
): Promise<Started> =>
  new Promise((resolve, reject) => {
    const child = spawn(file, [...args], {
      cwd: options.cwd,
      env: { ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    })
    child.once("error", reject)
    child.once("spawn", () => {
      child.off("error", reject)
      const { stdin, stdout, stderr, pid } = child
      if (stdin === null || stdout === null || stderr === null || pid === undefined) {
        reject(new Error("stdio must be pipes"))
        return
      }
      child.on("error", () => undefined)
      resolve({
        pid,
        stdin,
        stdout,
        stderr,
        onExit: (listener) => {
          if (exitOf(child)) listener(child.exitCode, child.signalCode)
          else child.once("exit", (code, signal) => listener(code, signal))
        },
        exited: () => exitOf(child),
        kill: (signal) => {
          if (!exitOf(child)) child.kill(signal)
        },
      })
    })
  })

interface Pending {
  readonly resolve: (child: { readonly pid: number; readonly watch: ExitWatch }) => void
  readonly reject: (e: Error) => void
}

interface Exit {
  readonly code: number | null
  readonly signal: string | null
}

type Reply =
  | { readonly ready: true }
  | { readonly id: number; readonly pid: number }
  | { readonly id: number; readonly error: string; readonly code: string }
  | { readonly exit: number; readonly code: number | null; readonly signal: string | null }

/**
 * Who waits for the exit of each of a helper's children, by pid. Pids are reused (pid_max is
 * often 32768 and an RL run starts ~35 processes an episode), so a pid names one child from the
 * helper's report of it to the report of its exit (one ordered stream), and only then.
 */
export class ChildExits {
  private readonly waiting = new Map<number, (exit: Exit) => void>()

  started(pid: number, onExit: (exit: Exit) => void): void {
    this.waiting.set(pid, onExit)
  }

  exited(pid: number, exit: Exit): void {
    const onExit = this.waiting.get(pid)
    this.waiting.delete(pid)
    onExit?.(exit)
  }

  /** Every child still waited for (the helper died: their ends must be looked for). */
  drain(): Array<[number, (exit: Exit) => void]> {
    const all = [...this.waiting]
    this.waiting.clear()
    return all
  }
}

/** One child's end: known once, told to every listener. */
class ExitWatch {
  exit: Exit | undefined
  private readonly listeners: Array<(exit: Exit) => void> = []
  readonly end = (exit: Exit) => {
    if (this.exit !== undefined) return
    this.exit = exit
    for (const listener of this.listeners.splice(0)) listener(exit)
  }
  on(listener: (exit: Exit) => void) {
    if (this.exit !== undefined) listener(this.exit)
    else this.listeners.push(listener)
  }
}

const HELPER_SOURCE = fileURLToPath(new URL("./spawner.py", import.meta.url))

/** How often a child whose helper died is looked for (its end is then seen only this way). */
const ORPHAN_POLL_MS = 100

const pidAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** One helper process (spawner.py) and the children it started for this process. */
class Helper {
  private nextId = 1
  private readonly pending = new Map<number, Pending>()
  private readonly exits = new ChildExits()
  private buffered = ""
  private dead: Error | undefined
  readonly ready: Promise<void>

  constructor(
    python: string,
    private readonly socketPath: string,
  ) {
    const child = spawn(python, ["-I", "-S", "-B", HELPER_SOURCE, socketPath], {
      stdio: ["pipe", "pipe", "pipe"],
      detached: false,
    })
    this.child = child
    let stderr = ""
    child.stderr?.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-2000)
    })
    child.stdin?.on("error", () => undefined)
    child.on("error", (e) => this.die(e))
    child.once("exit", (code, signal) =>
      this.die(new Error(`the process helper exited (${signal ?? code}): ${stderr.trim()}`)),
    )
    child.stdout?.setEncoding("utf8")
    child.stdout?.on("data", (s: string) => this.receive(s))
    // Never what keeps this process alive, once it answers: until then its stdout does, or a
    // process whose only work is a first start (a CLI's first sandbox) would end while waiting.
    child.unref()
    for (const s of [child.stdin, child.stderr]) (s as Socket | null)?.unref()
    const settled = () => (child.stdout as Socket | null)?.unref()
    this.ready = new Promise((resolve, reject) => {
      this.onReady = () => {
        settled()
        resolve()
      }
      this.onDead = (e) => {
        settled()
        reject(e)
      }
    })
    // A helper that never starts fails the starts waiting for it, not the process.
    this.ready.catch(() => undefined)
  }

  private onReady: () => void = () => undefined
  private onDead: (e: Error) => void = () => undefined

  private readonly child: ChildProcess

  get alive(): boolean {
    return this.dead === undefined
  }

  private receive(text: string) {
    this.buffered += text
    const lines = this.buffered.split("\n")
    this.buffered = lines.pop() ?? ""
    for (const line of lines) {
      if (line.trim() === "") continue
      const reply = JSON.parse(line) as Reply
      if ("ready" in reply) this.onReady()
      else if ("exit" in reply)
        this.exits.exited(reply.exit, { code: reply.code, signal: reply.signal })
      else {
        const waiting = this.pending.get(reply.id)
        this.pending.delete(reply.id)
        if ("pid" in reply) {
          const watch = new ExitWatch()
          this.exits.started(reply.pid, watch.end)
          waiting?.resolve({ pid: reply.pid, watch })
        } else {
          const e: NodeJS.ErrnoException = new Error(`spawn: ${reply.error}`)
          e.code = reply.code
          waiting?.reject(e)
        }
      }
    }
  }

  private die(e: Error) {
    if (this.dead !== undefined) return
    this.dead = e
    this.onDead(e)
    rmSync(this.socketPath, { force: true })
    for (const waiting of this.pending.values()) waiting.reject(e)
    this.pending.clear()
    // Its children live on, orphaned: their end is now seen by looking for them.
    for (const [pid, onExit] of this.exits.drain()) {
      const poll = setInterval(() => {
        if (pidAlive(pid)) return
        clearInterval(poll)
        onExit({ code: null, signal: null })
      }, ORPHAN_POLL_MS)
      poll.unref()
    }
  }

  close() {
    this.child.kill("SIGKILL")
  }

  async start(file: string, args: ReadonlyArray<string>, options: StartOptions): Promise<Started> {
    await this.ready
    if (this.dead !== undefined) throw this.dead
    const id = this.nextId++
    const started = new Promise<{ readonly pid: number; readonly watch: ExitWatch }>(
      (resolve, reject) => this.pending.set(id, { resolve, reject }),
    )
    const request = { id, file, args: [file, ...args], cwd: options.cwd, env: options.env }
    this.child.stdin?.write(`${JSON.stringify(request)}\n`)
    const sockets = [0, 1, 2].map((k) => {
      const socket = connect(this.socketPath)
      socket.on("error", () => undefined)
      socket.write(`${id} ${k}\n`)
      return socket
    })
    const [stdin, stdout, stderr] = sockets as [Socket, Socket, Socket]
    // Each end is one-way: the child never writes to its stdin, nor reads its output.
    stdout.end()
    stderr.end()
    let child: { readonly pid: number; readonly watch: ExitWatch }
    try {
      child = await started
    } catch (e) {
      for (const s of sockets) s.destroy()
      throw e
    }
    const { pid, watch } = child
    return {
      pid,
      stdin,
      stdout,
      stderr,
      onExit: (listener) => watch.on((exit) => listener(exit.code, exit.signal)),
      exited: () => watch.exit !== undefined,
      // Never after its end: the pid may be another process's by then.
      kill: (signal) => {
        if (watch.exit !== undefined) return
        try {
          process.kill(pid, signal)
        } catch {}
      },
    }
  }
}

let helper: Helper | undefined

const findPython = (): string | undefined =>
  ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"].find((p) => existsSync(p))

/** Whether `helper` mode can run here (a python3 at a system path). */
export const helperAvailable = (): boolean => findPython() !== undefined

const currentHelper = (): Helper => {
  if (helper?.alive) return helper
  const python = findPython()
  if (python === undefined) throw new Error("no python3 for the process helper")
  const path = join(tmpdir(), `t1-spawner-${process.pid}-${randomBytes(4).toString("hex")}.sock`)
  process.once("exit", () => rmSync(path, { force: true }))
  helper = new Helper(python, path)
  return helper
}

/** Starts `file` with `args` as `mode` says (helper: falls back to direct without python3). */
export const startProcess = (
  mode: SpawnMode,
  file: string,
  args: ReadonlyArray<string>,
  options: StartOptions,
): Promise<Started> =>
  mode === "helper" && helperAvailable()
    ? currentHelper().start(file, args, options)
    : startDirect(file, args, options)

/** Ends the helper (tests; it never keeps a process alive and ends with it). */
export const closeProcessHelper = (): void => {
  helper?.close()
  helper = undefined
}
