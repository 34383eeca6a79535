import { randomUUID } from "node:crypto"
import { basename } from "node:path"
import { create, toJson } from "@bufbuild/protobuf"
import { Effect } from "effect"
import {
  type EvaluationSummary,
  EvaluationSummarySchema,
  JobKind,
  type JobSpec,
  JobSpecSchema,
  TaskSplit,
} from "../../proto/index.ts"
import { validateJobSpec, validateRequestId } from "../../services/gateway/index.ts"
import { choiceFlag, intFlag, parseFlags, UsageError } from "../flags.ts"
import {
  gatewayFlagSpec,
  gatewayFlagsHelp,
  gatewayTargetFrom,
  type Output,
  stdio,
  withGateway,
} from "../gateway-flags.ts"
import { specToJson } from "../job-file.ts"
import { submitSpec } from "./submit.ts"
import {
  evaluationMissing,
  followJob,
  passAtK,
  requireSuccess,
  unverifiableNote,
  type WatchOutcome,
} from "./watch.ts"

export const evalUsage = () => `Usage: t1 eval --task-set DIR [options]

Submits an evaluation job (kind eval): samples-per-task episodes of every task of the split (or
of --task-ids) with a fixed policy; the coordinator reports the resolved rate and pass@k for
each k up to samples-per-task. Prints the job id; with --watch follows the job and then prints
the final resolved rate and pass@k per k (exit 0 only when the job SUCCEEDED).

Options:
  --task-set DIR[,DIR…]   task directories, as the coordinator's machine sees them (required)
  --policy REF            starting weights, e.g. tinymoe:init (default: the sampler's)
  --samples-per-task K    episodes per task, the k of pass@k (default 1)
  --split train|eval      which tasks of the set (default eval); ignored with --task-ids
  --task-ids a,b,…        exactly these tasks
  --max-turns N           turn limit per episode (default: the system's)
  --name NAME             job name (default "eval <last directory of the task set>")
  --request-id ID         idempotency key (default: a new one per run)
  --watch                 follow the job, then print the summary
  --json                  with --watch: events as JSON lines and the EvaluationSummary last
  --dry-run               print the job's spec as JSON instead of submitting it
${gatewayFlagsHelp}`

const spec = {
  ...gatewayFlagSpec,
  "task-set": { type: "string" },
  policy: { type: "string" },
  "samples-per-task": { type: "string" },
  split: { type: "string" },
  "task-ids": { type: "string" },
  "max-turns": { type: "string" },
  name: { type: "string" },
  "request-id": { type: "string" },
  watch: { type: "boolean" },
  json: { type: "boolean" },
  "dry-run": { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const

/** Which flag sets which spec field, to name it in a refusal. */
const FLAG_OF: ReadonlyArray<readonly [string, string]> = [
  ["spec.task_set", "--task-set"],
  ["spec.task_ids", "--task-ids"],
  ["spec.policy_ref", "--policy"],
  ["spec.samples_per_task", "--samples-per-task"],
  ["spec.limits.max_turns", "--max-turns"],
  ["spec.name", "--name"],
]

/**
 * The final resolved rate and pass@k lines of an eval job. Rates are over scored episodes; the
 * unverifiable ones (tests that need packages the sandbox lacks) are counted apart.
 */
export const evalSummary = (outcome: WatchOutcome): string[] => {
  const e: EvaluationSummary | undefined = outcome.evaluation
  if (e === undefined) {
    const s = outcome.status
    const finished = s?.counts?.episodesFinished ?? 0
    const unverifiable = s?.counts?.episodesUnverifiable ?? 0
    return [
      `resolved rate ${((s?.resolvedRate ?? 0) * 100).toFixed(1)}% (${finished} episodes)${
        unverifiable > 0 ? `, ${unverifiableNote(unverifiable, [])}` : ""
      }`,
    ]
  }
  const lines = [
    `resolved rate ${(e.resolvedRate * 100).toFixed(1)}% (${e.episodes} episodes over ${e.tasks} tasks, policy v${e.policyVersion})${
      e.unverifiable > 0 ? `, ${unverifiableNote(e.unverifiable, evaluationMissing(e))}` : ""
    }`,
  ]
  const k = passAtK(e)
  if (k !== "") lines.push(...k.split(", "))
  for (const t of e.perTask) {
    const excluded =
      t.unverifiable > 0 ? unverifiableNote(t.unverifiable, t.missingPackages) : undefined
    if (t.samples === 0 && excluded !== undefined) {
      lines.push(`  ${t.task}: ${excluded}, not scored`)
      continue
    }
    const byK = passAtK({ ...e, passAtK: t.passAtK })
    lines.push(
      `  ${t.task}: ${t.resolved}/${t.samples} resolved, reward ${Number(t.rewardMean.toPrecision(4))}${byK === "" ? "" : `, ${byK}`}${excluded === undefined ? "" : `, ${excluded}`}`,
    )
  }
  return lines
}

export const buildEvalSpec = (
  values: {
    readonly "task-set"?: string | undefined
    readonly policy?: string | undefined
    readonly "samples-per-task"?: string | undefined
    readonly split?: string | undefined
    readonly "task-ids"?: string | undefined
    readonly "max-turns"?: string | undefined
    readonly name?: string | undefined
  },
  usage: string,
): JobSpec => {
  const taskSet = values["task-set"]
  if (taskSet === undefined || taskSet === "") {
    throw new UsageError("t1 eval needs --task-set DIR", usage)
  }
  const split = choiceFlag("split", values.split, ["train", "eval"], "eval", usage)
  const taskIds =
    values["task-ids"] === undefined ? [] : values["task-ids"].split(",").map((t) => t.trim())
  if (taskIds.some((t) => t === "")) {
    throw new UsageError("--task-ids must be a comma-separated list of task ids", usage)
  }
  const samplesPerTask = intFlag("samples-per-task", values["samples-per-task"], 1, usage, 1)
  const maxTurns = intFlag("max-turns", values["max-turns"], 0, usage, 1)
  const firstDir = taskSet.split(",")[0]?.trim().replace(/\/+$/, "") ?? taskSet
  const jobSpec = create(JobSpecSchema, {
    name: values.name ?? `eval ${basename(firstDir) || firstDir}`,
    kind: JobKind.EVAL,
    taskSet,
    taskIds,
    split: split === "train" ? TaskSplit.TRAIN : TaskSplit.EVAL,
    policyRef: values.policy ?? "",
    samplesPerTask,
    ...(maxTurns > 0 ? { limits: { maxTurns } } : {}),
  })
  const violations = validateJobSpec(jobSpec)
  if (violations.length > 0) {
    throw new UsageError(
      violations
        .map((v) => {
          const flag = FLAG_OF.find(([path]) => v.fieldPath.startsWith(path))?.[1]
          return `${flag === undefined ? "" : `${flag}: `}${v.fieldPath}: ${v.reason}`
        })
        .join("\n"),
      usage,
    )
  }
  return jobSpec
}

export const evalCommand = (
  args: ReadonlyArray<string>,
  output: Output = stdio,
): Effect.Effect<void, unknown> | string => {
  const usage = evalUsage()
  const { values, positionals } = parseFlags(args, spec, usage)
  if (values.help === true) return usage
  if (positionals.length > 0) {
    throw new UsageError(`unexpected arguments: ${positionals.join(" ")}`, usage)
  }
  const jobSpec = buildEvalSpec(values, usage)
  const requestId = values["request-id"] ?? `eval-${randomUUID()}`
  const bad = validateRequestId(requestId)
  if (bad !== undefined || requestId === "") {
    throw new UsageError(`--request-id ${bad?.reason ?? "must not be empty"}`, usage)
  }
  if (values["dry-run"] === true) {
    if (values.watch === true)
      throw new UsageError("--dry-run and --watch do not go together", usage)
    return JSON.stringify(specToJson(jobSpec), null, 2)
  }
  const target = gatewayTargetFrom(values, usage)
  const json = values.json === true
  return withGateway(target, (client) =>
    Effect.gen(function* () {
      const { jobId } = yield* submitSpec(client, jobSpec, requestId, { output })
      if (values.watch !== true) return
      const outcome = yield* followJob(client, jobId, { output, json }).pipe(
        Effect.flatMap((o) => requireSuccess(jobId, o)),
      )
      if (json) {
        if (outcome.evaluation !== undefined) {
          output.out(
            JSON.stringify(
              toJson(EvaluationSummarySchema, outcome.evaluation, { useProtoFieldName: true }),
            ),
          )
        }
        return
      }
      for (const line of evalSummary(outcome)) output.out(line)
    }),
  )
}
