import { readFileSync } from "node:fs"
import type { Started } from "../local/spawner.ts"
import { CappedOutput } from "../shell/capped-output.ts"
import type { ShellProcess } from "../shell/process.ts"

/** The keeper's source (keeper.py), run in the sandbox by the toolchain's Python. */
export const KEEPER_SOURCE = readFileSync(new URL("./keeper.py", import.meta.url), "utf8")

const SPAWN = 1
const INPUT = 2
const CLOSE = 3
const SIGNAL = 4
const PING = 5
const STARTED = 101
const OUTPUT = 102
const EOF = 103
const EXIT = 104
const PONG = 105
const SIGNALED = 106

const HEADER = 9

const frame = (kind: number, id: number, payload: Uint8Array = new Uint8Array()) => {
  const bytes = Buffer.allocUnsafe(HEADER + payload.byteLength)
  bytes.writeUInt8(kind, 0)
  bytes.writeUInt32LE(id, 1)
  bytes.writeUInt32LE(payload.byteLength, 5)
  bytes.set(payload, HEADER)
  return bytes
}

const NUL = "\0"

export interface ChildExit {
  readonly code: number | null
  readonly signal: string | null
}

/** A process the keeper started in the sandbox. */
export interface KeeperChild {
  /** Its pid inside the sandbox (also its process group: it leads a session of its own). */
  readonly pid: number
  readonly write: (data: Uint8Array) => Promise<void>
  readonly closeStdin: () => void
  readonly onOutput: (listener: (chunk: Uint8Array) => void) => void
  /** Called once the output pipe has ended (every holder of it closed or gone). */
  readonly onEof: (listener: () => void) => void
  /** Called once with its exit; with `{ code: null, signal: null }` when the keeper died. */
  readonly onExit: (listener: (exit: ChildExit) => void) => void
}

interface Entry {
  output: Uint8Array[] | ((chunk: Uint8Array) => void)
  eof: boolean
  eofListeners: Array<() => void>
  exit: ChildExit | undefined
  exitListeners: Array<(exit: ChildExit) => void>
  started?: (reply: { pid?: number; error?: string }) => void
}

/** The driver's end of a sandbox's keeper (keeper.py), over its stdin and stdout. */
export class Keeper {
  private nextId = 1
  private readonly entries = new Map<number, Entry>()
  private readonly waiting = new Map<number, () => void>()
  private buffered: Buffer = Buffer.alloc(0)
  private deadReason: string | undefined
  private readonly deathListeners: Array<(reason: string) => void> = []
  private stderr = ""
  /** Resolves once the keeper has said it runs. */
  readonly ready: Promise<void>

  constructor(readonly process: Started) {
    let readyResolve: () => void = () => undefined
    let readyReject: (e: Error) => void = () => undefined
    this.ready = new Promise((resolve, reject) => {
      readyResolve = resolve
      readyReject = reject
    })
    this.ready.catch(() => undefined)
    this.waiting.set(0, readyResolve)
    this.deathListeners.push((reason) => readyReject(new Error(reason)))
    process.stdin.on("error", () => undefined)
    process.stdout.on("error", () => undefined)
    process.stderr.on("error", () => undefined)
    process.stderr.on("data", (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-2000)
    })
    process.stdout.on("data", (chunk: Buffer) => this.receive(chunk))
    process.onExit((code, signal) => {
      const said = this.stderr.trim()
      this.die(
        `the sandbox's processes ended (${signal ?? `exit ${code}`})${said ? `: ${said}` : ""}`,
      )
    })
  }

  get alive(): boolean {
    return this.deadReason === undefined
  }

  get deathReason(): string | undefined {
    return this.deadReason
  }

  onDeath(listener: (reason: string) => void): void {
    if (this.deadReason !== undefined) listener(this.deadReason)
    else this.deathListeners.push(listener)
  }

  private die(reason: string) {
    if (this.deadReason !== undefined) return
    this.deadReason = reason
    for (const listener of this.deathListeners.splice(0)) listener(reason)
    for (const [id, entry] of this.entries) {
      entry.started?.({ error: reason })
      this.eofOf(entry)
      this.exitOf(entry, { code: null, signal: null })
      this.entries.delete(id)
    }
    for (const resolve of this.waiting.values()) resolve()
    this.waiting.clear()
  }

  private eofOf(entry: Entry) {
    if (entry.eof) return
    entry.eof = true
    for (const listener of entry.eofListeners.splice(0)) listener()
  }

  private exitOf(entry: Entry, exit: ChildExit) {
    if (entry.exit !== undefined) return
    entry.exit = exit
    for (const listener of entry.exitListeners.splice(0)) listener(exit)
  }

  private receive(chunk: Buffer) {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk])
    while (this.buffered.length >= HEADER) {
      const kind = this.buffered.readUInt8(0)
      const id = this.buffered.readUInt32LE(1)
      const length = this.buffered.readUInt32LE(5)
      if (this.buffered.length < HEADER + length) break
      const payload = this.buffered.subarray(HEADER, HEADER + length)
      this.buffered = this.buffered.subarray(HEADER + length)
      this.handle(kind, id, payload)
    }
  }

  private handle(kind: number, id: number, payload: Buffer) {
    if (kind === PONG || kind === SIGNALED) {
      const resolve = this.waiting.get(id)
      this.waiting.delete(id)
      resolve?.()
      return
    }
    const entry = this.entries.get(id)
    if (entry === undefined) return
    if (kind === STARTED) {
      const said = payload.toString()
      const reply = said.startsWith("!") ? { error: said.slice(1) } : { pid: Number(said) }
      const started = entry.started
      entry.started = undefined
      if (reply.error !== undefined) this.entries.delete(id)
      started?.(reply)
    } else if (kind === OUTPUT) {
      // Copied: the frame's buffer is reused for the next frames.
      const copy = new Uint8Array(payload)
      if (typeof entry.output === "function") entry.output(copy)
      else entry.output.push(copy)
    } else if (kind === EOF) {
      this.eofOf(entry)
      if (entry.exit !== undefined) this.entries.delete(id)
    } else if (kind === EXIT) {
      const said = payload.toString()
      this.exitOf(
        entry,
        said.startsWith("s ")
          ? { code: null, signal: said.slice(2) }
          : { code: Number(said.slice(2)), signal: null },
      )
      if (entry.eof) this.entries.delete(id)
    }
  }

  private send(bytes: Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.deadReason !== undefined) {
        reject(new Error(this.deadReason))
        return
      }
      this.process.stdin.write(bytes, (error) => (error ? reject(error) : resolve()))
    })
  }

  /** Waits for the keeper's answer to request `id` (or its death). */
  private request(kind: number, payload?: Uint8Array): Promise<void> {
    const id = this.nextId++
    const answered = new Promise<void>((resolve) => this.waiting.set(id, resolve))
    return this.send(frame(kind, id, payload)).then(() => answered)
  }

  /** Resolves when the keeper answers (it is not stuck). */
  ping(): Promise<void> {
    return this.request(PING)
  }

  /** Sends `signal` (2 or 9) to process group `pgid`; with `repeat`, until the group is empty. */
  signal(pgid: number, signal: number, repeat: boolean): Promise<void> {
    if (!Number.isInteger(pgid) || pgid <= 1)
      return Promise.reject(new Error(`refusing to signal group ${pgid}`))
    return this.request(SIGNAL, Buffer.from(`${pgid} ${signal} ${repeat ? 1 : 0}`))
  }

  /** Starts `argv` in the sandbox, in a session of its own; stdout and stderr come merged. */
  async spawn(
    argv: ReadonlyArray<string>,
    options: {
      readonly cwd: string
      readonly env: Readonly<Record<string, string>>
      readonly stdin: boolean
    },
  ): Promise<KeeperChild> {
    const id = this.nextId++
    const entry: Entry = {
      output: [],
      eof: false,
      eofListeners: [],
      exit: undefined,
      exitListeners: [],
    }
    const reply = new Promise<{ pid?: number; error?: string }>((resolve) => {
      entry.started = resolve
    })
    this.entries.set(id, entry)
    const fields = [
      options.cwd,
      options.stdin ? "1" : "0",
      String(argv.length),
      ...argv,
      ...Object.entries(options.env).map(([name, value]) => `${name}=${value}`),
    ]
    await this.send(frame(SPAWN, id, Buffer.from(fields.join(NUL))))
    const { pid, error } = await reply
    if (pid === undefined) throw new Error(`starting ${argv[0]} in the sandbox: ${error}`)
    return {
      pid,
      write: (data) => this.send(frame(INPUT, id, data)),
      closeStdin: () => void this.send(frame(CLOSE, id)).catch(() => undefined),
      onOutput: (listener) => {
        const held = entry.output
        entry.output = listener
        if (Array.isArray(held)) for (const chunk of held) listener(chunk)
      },
      onEof: (listener) => {
        if (entry.eof) listener()
        else entry.eofListeners.push(listener)
      },
      onExit: (listener) => {
        if (entry.exit !== undefined) listener(entry.exit)
        else entry.exitListeners.push(listener)
      },
    }
  }

  /** Ends the keeper, and with it the sandbox's processes. */
  kill(): void {
    this.process.kill("SIGKILL")
    this.process.stdin.destroy()
  }
}

const describeExit = (exit: ChildExit) =>
  exit.signal !== null
    ? `killed by ${exit.signal}`
    : exit.code !== null
      ? `exited with status ${exit.code}`
      : "its sandbox's processes ended"

/** A ShellProcess over a keeper's child (the session's bash). */
export const keeperShell = (keeper: Keeper, child: KeeperChild): ShellProcess => {
  let exitReason: string | undefined
  const exitListeners: Array<(reason: string) => void> = []
  const report = (reason: string) => {
    if (exitReason !== undefined) return
    exitReason = reason
    for (const listener of exitListeners.splice(0)) listener(reason)
  }
  // As for a local shell: the exit counts once the output has ended, or shortly after the
  // process is gone (a background job may hold the output open for ever).
  child.onExit((exit) => {
    const reason = describeExit(exit)
    setTimeout(() => report(reason), 50).unref()
    child.onEof(() => report(reason))
  })
  let closed = false
  return {
    write: (data) =>
      closed ? Promise.reject(new Error("the shell's stdin is closed")) : child.write(data),
    onOutput: (listener) => child.onOutput(listener),
    onExit: (listener) => {
      if (exitReason !== undefined) listener(exitReason)
      else exitListeners.push(listener)
    },
    signal: (pgid, signal) => keeper.signal(pgid, signal === "INT" ? 2 : 9, signal === "KILL"),
    close: async () => {
      if (closed) return
      closed = true
      child.closeStdin()
      if (keeper.alive) await keeper.signal(child.pid, 9, true).catch(() => undefined)
    },
  }
}

export interface ArgvResult {
  readonly output: Uint8Array
  readonly exitCode: number
  readonly timedOut: boolean
  readonly truncated: boolean
  readonly totalBytes: number
}

/**
 * Runs argv through the keeper and collects its output (head and tail within maxOutputBytes)
 * until it exits and its output ends; at timeoutMs its whole process group is killed.
 */
export const runThroughKeeper = async (
  keeper: Keeper,
  argv: ReadonlyArray<string>,
  options: {
    readonly env: Readonly<Record<string, string>>
    readonly timeoutMs: number
    readonly maxOutputBytes: number
  },
): Promise<ArgvResult> => {
  const child = await keeper.spawn(argv, { cwd: "/", env: options.env, stdin: false })
  const output = new CappedOutput(options.maxOutputBytes)
  child.onOutput((chunk) => output.append(chunk))
  const done = new Promise<ChildExit>((resolve) =>
    child.onExit((exit) => child.onEof(() => resolve(exit))),
  )
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), options.timeoutMs)
  })
  const finished = await Promise.race([done, late])
  clearTimeout(timer)
  if (finished === "late") {
    await keeper.signal(child.pid, 9, true).catch(() => undefined)
    return {
      output: output.bytes(),
      exitCode: -1,
      timedOut: true,
      truncated: output.truncated,
      totalBytes: output.totalBytes,
    }
  }
  if (finished.code === null && finished.signal === null && !keeper.alive)
    throw new Error(keeper.deathReason ?? "the sandbox's processes ended")
  return {
    output: output.bytes(),
    exitCode: finished.code ?? 128 + signalNumber(finished.signal),
    timedOut: false,
    truncated: output.truncated,
    totalBytes: output.totalBytes,
  }
}

const SIGNALS: Readonly<Record<string, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGABRT: 6,
  SIGKILL: 9,
  SIGSEGV: 11,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
}
const signalNumber = (name: string | null) => (name === null ? 0 : (SIGNALS[name] ?? 0))
