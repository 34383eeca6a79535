/**
 * What the load test reads off processes: resident memory from /proc, /metrics over HTTP without
 * keep-alive (a pooled socket would count as a handle the test left open), percentiles, and
 * polling until a figure settles.
 */
import { readFileSync } from "node:fs"
import { get } from "node:http"

export const MIB = 2 ** 20

/** Resident memory of a live process (VmRSS in /proc/<pid>/status), bytes; undefined once gone. */
export const residentBytes = (pid: number): number | undefined => {
  if (pid === process.pid) return process.memoryUsage().rss
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return match?.[1] === undefined ? undefined : Number(match[1]) * 1024
  } catch {
    return undefined
  }
}

/** CPU time (user + system) a live process has used, seconds; undefined once gone. */
export const cpuSeconds = (pid: number): number | undefined => {
  if (pid === process.pid) {
    const { user, system } = process.cpuUsage()
    return (user + system) / 1e6
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return undefined
  }
}

/** Linux's USER_HZ: /proc reports CPU times in these ticks. */
const CLOCK_TICKS = 100

/**
 * Samples the resident memory of named processes every `everyMs`, keeping each one's peak since
 * it was last reset (a phase's peak, not the start-up's).
 */
export class MemoryWatch {
  private readonly pids = new Map<string, number>()
  private readonly peaks = new Map<string, number>()
  private readonly timer: NodeJS.Timeout

  constructor(everyMs = 200) {
    this.timer = setInterval(() => this.sample(), everyMs)
    this.timer.unref()
  }

  track(name: string, pid: number): void {
    this.pids.set(name, pid)
    this.resetPeak(name)
  }

  resetPeak(name: string): void {
    this.peaks.delete(name)
    this.sample()
  }

  /** Peak since the last reset, bytes (NaN when never sampled). */
  peak(name: string): number {
    this.sample()
    return this.peaks.get(name) ?? Number.NaN
  }

  /** Resident memory now, bytes (NaN when the process is gone). */
  current(name: string): number {
    const pid = this.pids.get(name)
    return (pid === undefined ? undefined : residentBytes(pid)) ?? Number.NaN
  }

  stop(): void {
    clearInterval(this.timer)
  }

  private sample(): void {
    for (const [name, pid] of this.pids) {
      const rss = residentBytes(pid)
      if (rss !== undefined) this.peaks.set(name, Math.max(this.peaks.get(name) ?? 0, rss))
    }
  }
}

/** GET a URL's body on a fresh connection that is closed afterwards. */
export const httpText = (url: string, timeoutMs = 10_000): Promise<string> =>
  new Promise((resolve, reject) => {
    const request = get(url, { agent: false, timeout: timeoutMs }, (response) => {
      let body = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => {
        body += chunk
      })
      response.on("end", () =>
        response.statusCode === 200
          ? resolve(body)
          : reject(new Error(`GET ${url}: HTTP ${response.statusCode}`)),
      )
      response.on("error", reject)
    })
    request.on("timeout", () =>
      request.destroy(new Error(`GET ${url}: no answer in ${timeoutMs} ms`)),
    )
    request.on("error", reject)
  })

/** Nearest-rank percentile (p in [0, 100]) of unsorted values; NaN for none. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)))
  return sorted[rank - 1] as number
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

/**
 * Reads `read` until it returns `target` or `timeoutMs` passes; returns the last value read, so a
 * leak is reported with its size rather than as a timeout. A read that throws counts as NaN.
 */
export const settle = async (
  read: () => Promise<number>,
  timeoutMs: number,
  target = 0,
): Promise<number> => {
  const until = Date.now() + timeoutMs
  for (;;) {
    const value = await read().catch(() => Number.NaN)
    if (value === target || Date.now() > until) return value
    await sleep(250)
  }
}

/** Resources keeping this process's event loop alive, counted by type. */
export const activeResources = (): Map<string, number> => {
  const counts = new Map<string, number>()
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1)
  return counts
}

/** Resources now beyond a baseline, by type (a type below its baseline does not offset another). */
export const resourcesBeyond = (baseline: ReadonlyMap<string, number>): Map<string, number> => {
  const extra = new Map<string, number>()
  for (const [kind, n] of activeResources()) {
    const more = n - (baseline.get(kind) ?? 0)
    if (more > 0) extra.set(kind, more)
  }
  return extra
}

export const total = (counts: ReadonlyMap<string, number>): number =>
  [...counts.values()].reduce((a, b) => a + b, 0)
