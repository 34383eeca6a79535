/**
 * Sums an engine-call profile (T1_DOCKER_PROFILE, actors/sandbox/docker/profile.ts): per route,
 * the calls, calls per sandbox, total, p50 and p99 time, and the most calls in flight at once.
 *
 *   npx tsx test/load/profile.ts FILE [--json]
 */
import { readFileSync } from "node:fs"

interface Line {
  readonly at: number
  readonly ms: number
  readonly op: string
  readonly id: string
}

const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted.length === 0
    ? Number.NaN
    : (sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN)

export interface RouteFigures {
  readonly op: string
  readonly calls: number
  readonly per_sandbox: number
  readonly total_s: number
  readonly p50_ms: number
  readonly p99_ms: number
}

export const summarize = (
  lines: ReadonlyArray<Line>,
): {
  sandboxes: number
  calls: number
  peak_in_flight: number
  routes: RouteFigures[]
} => {
  const sandboxes = new Set(
    lines.filter((l) => l.op === "POST /containers/:id/start").map((l) => l.id),
  ).size
  const byOp = new Map<string, number[]>()
  for (const l of lines) byOp.set(l.op, [...(byOp.get(l.op) ?? []), l.ms])
  const routes = [...byOp.entries()]
    .map(([op, times]) => {
      const sorted = [...times].sort((a, b) => a - b)
      return {
        op,
        calls: times.length,
        per_sandbox: Math.round((times.length / Math.max(1, sandboxes)) * 100) / 100,
        total_s: Math.round(times.reduce((a, b) => a + b, 0) / 100) / 10,
        p50_ms: Math.round(percentile(sorted, 50)),
        p99_ms: Math.round(percentile(sorted, 99)),
      }
    })
    .sort((a, b) => b.total_s - a.total_s)
  const edges = lines.flatMap((l) => [
    [l.at, 1],
    [l.at + l.ms, -1],
  ])
  edges.sort((a, b) => (a[0] ?? 0) - (b[0] ?? 0) || (a[1] ?? 0) - (b[1] ?? 0))
  let now = 0
  let peak = 0
  for (const [, d] of edges) {
    now += d ?? 0
    peak = Math.max(peak, now)
  }
  return { sandboxes, calls: lines.length, peak_in_flight: peak, routes }
}

const main = () => {
  const [file, flag] = process.argv.slice(2)
  if (file === undefined) {
    process.stderr.write("usage: npx tsx test/load/profile.ts FILE [--json]\n")
    return 2
  }
  const lines = readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Line)
  const s = summarize(lines)
  if (flag === "--json") {
    process.stdout.write(`${JSON.stringify(s)}\n`)
    return 0
  }
  process.stdout.write(
    `sandboxes ${s.sandboxes}, engine calls ${s.calls}, peak in flight ${s.peak_in_flight}\n`,
  )
  process.stdout.write(
    "| route | calls | per sandbox | total s | p50 ms | p99 ms |\n|---|---|---|---|---|---|\n",
  )
  for (const r of s.routes)
    process.stdout.write(
      `| ${r.op} | ${r.calls} | ${r.per_sandbox} | ${r.total_s} | ${r.p50_ms} | ${r.p99_ms} |\n`,
    )
  return 0
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = main()
