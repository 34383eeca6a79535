import { toJson } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { JobKind, JobState, type JobStatus, JobStatusSchema } from "../../proto/index.ts"
import type { GatewayCallError, JobServiceClient } from "../../services/gateway/index.ts"
import { choiceFlag, intFlag, parseFlags, UsageError } from "../flags.ts"
import {
  gatewayFlagSpec,
  gatewayFlagsHelp,
  gatewayTargetFrom,
  type Output,
  stdio,
  withGateway,
} from "../gateway-flags.ts"

export const jobsUsage = () => `Usage: t1 jobs [options]

Lists jobs, newest first, as a table: id, name, kind, state, episodes finished/total (with the
failed and unverifiable ones), resolved rate over scored episodes, learner step and age. Pages through ListJobs until --limit jobs are listed.

Options:
  --state S          only jobs in this state: pending, running, succeeded, failed, cancelled
  --limit N          at most N jobs (default 50)
  --json             one JobStatus per line, as protobuf JSON (proto field names)
${gatewayFlagsHelp}`

const spec = {
  ...gatewayFlagSpec,
  state: { type: "string" },
  limit: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const

const STATES = {
  pending: JobState.PENDING,
  running: JobState.RUNNING,
  succeeded: JobState.SUCCEEDED,
  failed: JobState.FAILED,
  cancelled: JobState.CANCELLED,
} as const

/** `42s`, `5m`, `3h`, `2d` since `unixMs`. */
export const age = (unixMs: bigint, now = Date.now()): string => {
  if (unixMs === 0n) return "-"
  const s = Math.max(0, Math.floor((now - Number(unixMs)) / 1000))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m`
  if (s < 86_400) return `${Math.floor(s / 3600)}h`
  return `${Math.floor(s / 86_400)}d`
}

const HEADER = ["ID", "NAME", "KIND", "STATE", "EPISODES", "RESOLVED", "STEP", "AGE"] as const

const row = (job: JobStatus, now: number): string[] => {
  const c = job.counts
  const finished = c?.episodesFinished ?? 0
  const total = c?.episodesTotal ?? 0
  const failed = c?.episodesFailed ?? 0
  const unverifiable = c?.episodesUnverifiable ?? 0
  const excluded = [
    ...(failed > 0 ? [`${failed} failed`] : []),
    ...(unverifiable > 0 ? [`${unverifiable} unverifiable`] : []),
  ]
  const kind = job.spec?.kind ?? JobKind.UNSPECIFIED
  return [
    job.jobId,
    job.spec?.name || "-",
    (JobKind[kind] ?? String(kind)).toLowerCase(),
    JobState[job.state] ?? String(job.state),
    `${finished}/${total}${excluded.length > 0 ? ` (${excluded.join(", ")})` : ""}`,
    finished > 0 ? `${(job.resolvedRate * 100).toFixed(1)}%` : "-",
    kind === JobKind.TRAIN ? String(job.learnerStep) : "-",
    age(job.createdUnixMs, now),
  ]
}

/** Left-aligned columns two spaces apart. */
export const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string[] => {
  const widths: number[] = []
  for (const r of rows)
    r.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length)
    })
  return rows.map((r) =>
    r
      .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd(),
  )
}

export const jobsTable = (jobs: ReadonlyArray<JobStatus>, now = Date.now()): string[] =>
  table([[...HEADER], ...jobs.map((j) => row(j, now))])

/** Up to `limit` jobs, newest first, paging through ListJobs (`pageSize` per call, <= 1000). */
export const listJobs = (
  client: JobServiceClient,
  options: { readonly state: JobState; readonly limit: number; readonly pageSize?: number },
): Effect.Effect<JobStatus[], GatewayCallError> =>
  Effect.gen(function* () {
    const jobs: JobStatus[] = []
    let pageToken = ""
    while (jobs.length < options.limit) {
      const page = yield* client.effect.listJobs({
        pageSize: Math.min(options.pageSize ?? 1000, options.limit - jobs.length),
        pageToken,
        state: options.state,
      })
      jobs.push(...page.jobs.slice(0, options.limit - jobs.length))
      if (page.nextPageToken === "" || page.jobs.length === 0) break
      pageToken = page.nextPageToken
    }
    return jobs
  })

export const jobsCommand = (
  args: ReadonlyArray<string>,
  output: Output = stdio,
): Effect.Effect<void, unknown> | string => {
  const usage = jobsUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  if (positionals.length > 0) {
    throw new UsageError(`unexpected arguments: ${positionals.join(" ")}`, usage)
  }
  const stateName =
    values.state === undefined
      ? undefined
      : choiceFlag(
          "state",
          values.state.toLowerCase(),
          Object.keys(STATES) as ReadonlyArray<keyof typeof STATES>,
          "pending",
          usage,
        )
  const state = stateName === undefined ? JobState.UNSPECIFIED : STATES[stateName]
  const limit = intFlag("limit", values.limit, 50, usage, 1)
  const target = gatewayTargetFrom(values, usage)
  return withGateway(target, (client) =>
    Effect.gen(function* () {
      const jobs = yield* listJobs(client, { state, limit })
      if (values.json === true) {
        for (const job of jobs) {
          output.out(JSON.stringify(toJson(JobStatusSchema, job, { useProtoFieldName: true })))
        }
        return
      }
      if (jobs.length === 0) {
        output.err(`no ${stateName === undefined ? "" : `${stateName} `}jobs`)
        return
      }
      for (const line of jobsTable(jobs)) output.out(line)
    }),
  )
}
