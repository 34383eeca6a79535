import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { create } from "@bufbuild/protobuf"
import { Cause, Effect, Exit } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  ErrorCode,
  EvaluationSummarySchema,
  JobEventSchema,
  JobKind,
  JobState,
  JobStatusSchema,
  TaskSplit,
} from "../../proto/index.ts"
import { MemoryBusLive } from "../../services/bus/index.ts"
import {
  type GatewayHarness,
  gatewayHarness,
  opensslAvailable,
  type RunningGateway,
  selfSignedCertificate,
} from "../../services/gateway/gateway.fixture.ts"
import type { GatewayCallError } from "../../services/gateway/index.ts"
import type { JobEventInit } from "../../services/jobs/index.ts"
import { UsageError } from "../flags.ts"
import { describeCallError, type Output } from "../gateway-flags.ts"
import { cancelCommand } from "./cancel.ts"
import { evalCommand, evalSummary } from "./eval.ts"
import { age, jobsCommand, jobsTable, listJobs } from "./jobs.ts"
import { submitCommand } from "./submit.ts"
import { describeEvent, watchCommand } from "./watch.ts"

const BIN = fileURLToPath(new URL("../bin/t1.js", import.meta.url))
const EVAL_YAML = fileURLToPath(new URL("../examples/eval.yaml", import.meta.url))
const TRAIN_YAML = fileURLToPath(new URL("../examples/train.yaml", import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), "t1-job-cli-"))

type Command = (
  args: ReadonlyArray<string>,
  output: Output,
) => Effect.Effect<void, unknown> | string

interface Ran {
  readonly code: number
  readonly out: string[]
  readonly err: string[]
}

/** Runs a command as `t1` would: 0 success, 1 failure (its message on err), 2 usage error. */
const run = async (
  command: Command,
  args: ReadonlyArray<string>,
  onOut?: (line: string) => void,
): Promise<Ran> => {
  const out: string[] = []
  const err: string[] = []
  const output: Output = {
    out: (line) => {
      out.push(line)
      onOut?.(line)
    },
    err: (line) => {
      err.push(line)
    },
  }
  try {
    const result = command(args, output)
    if (typeof result === "string") return { code: 0, out: result.split("\n"), err }
    const exit = await Effect.runPromiseExit(result)
    if (Exit.isSuccess(exit)) return { code: 0, out, err }
    const error = Cause.squash(exit.cause)
    err.push(error instanceof Error ? error.message : String(error))
    return { code: 1, out, err }
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    err.push(error.message)
    return { code: 2, out, err }
  }
}

const t1 = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { timeout: 140_000, env: { ...process.env, T1_GATEWAY: "", T1_TOKEN: "" } },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr }),
    )
  })

let h: GatewayHarness
let gw: RunningGateway
let gateway: string[]
beforeAll(async () => {
  h = await gatewayHarness(MemoryBusLive())
  gw = await h.start()
  gateway = ["--gateway", gw.endpoint.address]
})
afterAll(async () => {
  await h.close()
  rmSync(scratch, { recursive: true, force: true })
})

const append = async (jobId: string, events: ReadonlyArray<JobEventInit["event"]>) => {
  const store = await h.store()
  for (const event of events) await h.run(store.appendEvent(jobId, { event }))
}
const transition = async (
  jobId: string,
  state: JobState,
  error?: { code: ErrorCode; message: string },
) => {
  const store = await h.store()
  await h.run(store.transition(jobId, state, error === undefined ? {} : { error }))
}

/** What an eval job of 1 task × 2 samples reports, as the coordinator would. */
const evalRun = async (jobId: string) => {
  await transition(jobId, JobState.RUNNING)
  await append(jobId, [
    { case: "admitted", value: { episodesTotal: 2, tasks: 1 } },
    {
      case: "episodeFinished",
      value: {
        episodeId: "ep-1",
        taskId: "task-a",
        reward: 2,
        resolved: true,
        turns: 5,
        attempt: 1,
      },
    },
    {
      case: "episodeFinished",
      value: { episodeId: "ep-2", taskId: "task-a", attempt: 3, infraFailed: true },
    },
    {
      case: "evaluation",
      value: {
        policyVersion: 0n,
        resolvedRate: 0.5,
        passAtK: { 1: 0.5, 2: 1 },
        rewardMean: 1,
        tasks: 1,
        episodes: 2,
      },
    },
  ])
  const store = await h.store()
  await h.run(
    store.update(jobId, (s) => ({
      ...s,
      counts: {
        $typeName: "t1.v1.JobCounts",
        episodesTotal: 2,
        episodesFinished: 1,
        episodesFailed: 1,
        episodesInfraRetried: 2,
        episodesRunning: 0,
        episodesUnverifiable: 0,
      },
      resolvedRate: 0.5,
    })),
  )
  await transition(jobId, JobState.SUCCEEDED)
}

describe("t1 submit, jobs, watch, cancel, eval (in-memory gateway)", () => {
  it.each([EVAL_YAML, TRAIN_YAML])("accepts the example %s with --dry-run", async (file) => {
    const ran = await run(submitCommand, [file, "--dry-run"])
    expect(ran.code).toBe(0)
    const spec = JSON.parse(ran.out.join("\n")) as Record<string, unknown>
    expect(spec.kind).toBe(file === EVAL_YAML ? "JOB_KIND_EVAL" : "JOB_KIND_TRAIN")
  })

  it("submits a job file, lists it, watches it to the end and cancels another", async () => {
    const submitted = await run(submitCommand, [EVAL_YAML, ...gateway])
    expect(submitted).toMatchObject({ code: 0, err: [] })
    const [a] = submitted.out
    expect(a).toMatch(/^job-/)
    if (a === undefined) throw new Error("no job id")
    // The default request id is the file's hash: a retried submit is the same job.
    expect((await run(submitCommand, [EVAL_YAML, ...gateway])).out).toEqual([a])
    const again = await run(submitCommand, [EVAL_YAML, "--request-id", "second-run", ...gateway])
    const b = again.out[0] ?? ""
    expect(b).not.toBe(a)
    const stored = (await gw.client().getJob({ jobId: a })).status?.spec
    expect(stored).toMatchObject({
      name: "bundled-eval",
      kind: JobKind.EVAL,
      taskSet: "tasks/bundled/eval",
      split: TaskSplit.EVAL,
      samplesPerTask: 2,
      limits: { maxTurns: 8, wallClockSec: 600, commandTimeoutMs: 30_000 },
    })

    await evalRun(a)

    const table = await run(jobsCommand, gateway)
    expect(table.code).toBe(0)
    expect(table.out[0]).toMatch(/^ID\s+NAME\s+KIND\s+STATE\s+EPISODES\s+RESOLVED\s+STEP\s+AGE$/)
    const rowA = table.out.find((l) => l.startsWith(a))
    expect(rowA).toMatch(/bundled-eval\s+eval\s+SUCCEEDED\s+1\/2 \(1 failed\)\s+50\.0%\s+-\s+\d+s$/)
    expect(table.out.find((l) => l.startsWith(b))).toMatch(/PENDING\s+0\/0\s+-\s+-/)

    const succeeded = await run(jobsCommand, ["--state", "succeeded", ...gateway])
    expect(succeeded.out.slice(1).map((l) => l.split(/\s+/)[0])).toEqual([a])
    const limited = await run(jobsCommand, ["--limit", "1", "--state", "PENDING", ...gateway])
    expect(limited.out).toHaveLength(2)
    const json = await run(jobsCommand, ["--json", "--state", "succeeded", ...gateway])
    expect(json.out.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ job_id: a, state: "JOB_STATE_SUCCEEDED", resolved_rate: 0.5 }),
    ])
    expect((await run(jobsCommand, ["--state", "failed", ...gateway])).err).toEqual([
      "no failed jobs",
    ])

    const watched = await run(watchCommand, [a, ...gateway])
    expect(watched.code).toBe(0)
    expect(watched.out.map((l) => l.replace(/^#(\d+) \d\d:\d\d:\d\d /, "#$1 "))).toEqual([
      "#1 state PENDING",
      "#2 state PENDING → RUNNING",
      "#3 admitted: 2 episodes over 1 tasks",
      "#4 episode ep-1 (task-a): reward 2, resolved, 5 turns",
      "#5 episode ep-2 (task-a): failed, infra failure on each of 3 attempts",
      "#6 evaluation of v0: resolved 50.0% over 2 episodes (1 tasks), pass@1 50.0%, pass@2 100.0%, reward 1",
      "#7 state RUNNING → SUCCEEDED",
    ])
    const fromFive = await run(watchCommand, [a, "--from-seq", "5", "--json", ...gateway])
    const events = fromFive.out.map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(events.map((e) => e.seq)).toEqual(["5", "6", "7"])
    expect(events[1]).toMatchObject({
      job_id: a,
      evaluation: { resolved_rate: 0.5, pass_at_k: { 1: 0.5, 2: 1 } },
    })
    // Past the last event: nothing to print, and the job's end decides the exit code.
    expect(await run(watchCommand, [a, "--from-seq", "100", ...gateway])).toMatchObject({
      code: 0,
      out: [],
    })

    expect(await run(cancelCommand, [b, "--reason", "not needed", ...gateway])).toMatchObject({
      code: 0,
      out: [`${b} CANCELLED`],
    })
    const watchB = await run(watchCommand, [b, ...gateway])
    expect(watchB.code).toBe(1)
    expect(watchB.out.at(-1)).toMatch(/state PENDING → CANCELLED: not needed$/)
    expect(watchB.err).toEqual([`job ${b} CANCELLED: not needed`])
    const twice = await run(cancelCommand, [b, ...gateway])
    expect(twice.code).toBe(1)
    expect(twice.err[0]).toBe(`FAILED_PRECONDITION: job ${b} is already JOB_STATE_CANCELLED`)

    const c = (await run(submitCommand, [EVAL_YAML, "--request-id", "third", ...gateway])).out[0]
    if (c === undefined) throw new Error("no job id")
    await transition(c, JobState.RUNNING)
    expect((await run(cancelCommand, [c, ...gateway])).out).toEqual([
      `${c} cancel requested (RUNNING); the coordinator stops it`,
    ])
  })

  it("submit --watch follows the job and exits 1 when it fails", async () => {
    const file = join(scratch, "train.json")
    writeFileSync(
      file,
      JSON.stringify({ name: "json-train", kind: "train", task_set: "t", learner: { lr: 0.001 } }),
    )
    const driven: Promise<void>[] = []
    const ran = await run(submitCommand, [file, "--watch", ...gateway], (line) => {
      if (!line.startsWith("job-")) return
      driven.push(
        (async () => {
          await transition(line, JobState.RUNNING)
          await append(line, [
            {
              case: "learnerStep",
              value: {
                step: 1n,
                policyVersion: 1n,
                phase: 3,
                rewardMean: 0.25,
                resolvedRate: 0.5,
                policyLoss: 0.0123456,
                trajectories: 8,
              },
            },
          ])
          await transition(line, JobState.FAILED, {
            code: ErrorCode.INTERNAL,
            message: "learner crashed",
          })
        })(),
      )
    })
    await Promise.all(driven)
    expect(ran.code).toBe(1)
    const jobId = ran.out[0]
    expect(ran.out.slice(1).map((l) => l.replace(/^#(\d+) \S+ /, "#$1 "))).toEqual([
      "#1 state PENDING",
      "#2 state PENDING → RUNNING",
      "#3 learner step 1 ppo → v1: reward 0.25, resolved 50.0%, policy loss 0.01235, value loss 0, entropy 0, clipfrac 0, |Δlogp| 0, 8 trajectories",
      "#4 state RUNNING → FAILED: learner crashed",
    ])
    expect(ran.err).toEqual([`job ${jobId} FAILED: learner crashed`])
  })

  it("eval builds an eval job and, with --watch, prints the resolved rate and pass@k", async () => {
    const dry = await run(evalCommand, [
      "--task-set",
      "tasks/bundled/eval",
      "--samples-per-task",
      "2",
      "--task-ids",
      "a, b",
      "--max-turns",
      "12",
      "--policy",
      "tinymoe:seed:3",
      "--dry-run",
    ])
    expect(JSON.parse(dry.out.join("\n"))).toEqual({
      name: "eval eval",
      kind: "JOB_KIND_EVAL",
      task_set: "tasks/bundled/eval",
      task_ids: ["a", "b"],
      split: "TASK_SPLIT_EVAL",
      policy_ref: "tinymoe:seed:3",
      limits: { max_turns: 12 },
      samples_per_task: 2,
    })

    const driven: Promise<void>[] = []
    const ran = await run(
      evalCommand,
      ["--task-set", "tasks/bundled/eval", "--samples-per-task", "2", "--watch", ...gateway],
      (line) => {
        if (line.startsWith("job-")) driven.push(evalRun(line))
      },
    )
    await Promise.all(driven)
    expect(ran.code).toBe(0)
    expect(ran.out.slice(-3)).toEqual([
      "resolved rate 50.0% (2 episodes over 1 tasks, policy v0)",
      "pass@1 50.0%",
      "pass@2 100.0%",
    ])
    const jobId = ran.out[0] ?? ""
    expect((await gw.client().getJob({ jobId })).status?.spec).toMatchObject({
      kind: JobKind.EVAL,
      taskSet: "tasks/bundled/eval",
      split: TaskSplit.EVAL,
      samplesPerTask: 2,
    })
  })

  it("resumes a watch from the last event after the gateway restarts", async () => {
    const first = await h.start()
    const { jobId } = await first.client().submitJob({
      spec: { kind: JobKind.EVAL, taskSet: "x" },
    })
    const address = ["--gateway", first.endpoint.address]
    let restarted: Promise<RunningGateway> | undefined
    const ran = await run(watchCommand, [jobId, ...address], (line) => {
      if (!line.startsWith("#1 ")) return
      restarted = (async () => {
        await first.stop()
        await append(jobId, [{ case: "admitted", value: { episodesTotal: 1, tasks: 1 } }])
        const second = await h.start({ port: first.endpoint.port })
        await transition(jobId, JobState.CANCELLED, {
          code: ErrorCode.CANCELLED,
          message: "stop",
        })
        return second
      })()
    })
    await (await restarted)?.stop()
    expect(ran.code).toBe(1)
    expect(ran.out.map((l) => l.slice(0, 2))).toEqual(["#1", "#2", "#3"])
    expect(ran.err[0]).toMatch(/UNAVAILABLE: .*; resuming from event 2 in \d+ ms \(retry 1 of 10\)/)
    expect(ran.err.at(-1)).toBe(`job ${jobId} CANCELLED: stop`)
  }, 60_000)

  it("pages through ListJobs", async () => {
    const client = gw.client()
    for (let i = 0; i < 3; i++) {
      await client.submitJob({ spec: { kind: JobKind.EVAL, taskSet: "x", name: `p${i}` } })
    }
    const paged = await Effect.runPromise(
      listJobs(client, { state: JobState.UNSPECIFIED, limit: 3, pageSize: 1 }),
    )
    const whole = await Effect.runPromise(
      listJobs(client, { state: JobState.UNSPECIFIED, limit: 3 }),
    )
    expect(paged.map((j) => j.jobId)).toEqual(whole.map((j) => j.jobId))
    expect(paged.map((j) => j.spec?.name)).toEqual(["p2", "p1", "p0"])
    expect(age(BigInt(Date.now() - 90_000))).toBe("1m")
    expect(age(BigInt(Date.now() - 3 * 86_400_000))).toBe("3d")
  })

  it("refuses bad input: usage errors exit 2, refused or failed calls exit 1", async () => {
    const missing = join(scratch, "missing.yaml")
    const usage: Array<[Command, string[], RegExp]> = [
      [watchCommand, [], /needs a job id/],
      [watchCommand, ["a.b"], /job id must be 1 to 128 characters/],
      [watchCommand, ["job-1", "--from-seq", "x"], /--from-seq must be an integer/],
      [jobsCommand, ["--state", "done"], /--state must be one of pending, running/],
      [jobsCommand, ["--limit", "0"], /--limit must be an integer >= 1/],
      [jobsCommand, ["--gateway", "localhost"], /--gateway must be HOST:PORT/],
      [jobsCommand, ["--tls-ca", missing], /--tls-ca: cannot read/],
      [jobsCommand, ["--tls-server-name", "x"], /needs --tls-ca or --tls/],
      [submitCommand, [], /needs a job file/],
      [submitCommand, [missing], /cannot read .*missing\.yaml/],
      [submitCommand, [EVAL_YAML, "--request-id", "has space"], /--request-id must be printable/],
      [submitCommand, [EVAL_YAML, "--dry-run", "--watch"], /do not go together/],
      [submitCommand, [EVAL_YAML, "--frobnicate"], /Unknown option '--frobnicate'/],
      [cancelCommand, ["job-1", "job-2"], /unexpected arguments: job-2/],
      [evalCommand, [], /needs --task-set DIR/],
      [evalCommand, ["--task-set", "x", "--split", "test"], /--split must be one of train, eval/],
      [evalCommand, ["--task-set", "x", "--task-ids", "a,,b"], /--task-ids must be/],
      [
        evalCommand,
        ["--task-set", "a b"],
        /--task-set: spec\.task_set: must not contain whitespace/,
      ],
      [
        evalCommand,
        ["--task-set", "x", "--samples-per-task", "2000"],
        /spec\.samples_per_task: must be <= 1024/,
      ],
    ]
    for (const [command, args, message] of usage) {
      const ran = await run(command, args)
      expect([ran.code, ran.err.join("\n")], args.join(" ")).toEqual([
        2,
        expect.stringMatching(message),
      ])
    }

    const bad = join(scratch, "bad.yaml")
    writeFileSync(bad, "name: x\nkind: train\ntask_set: a\nsplit: tst\nlearner: { lr: 2 }\n")
    const refused = await run(submitCommand, [bad, ...gateway])
    expect(refused.code).toBe(1)
    expect(refused.err[0]).toBe(
      `invalid job file ${bad} (2 problems):\n` +
        `  ${bad}:4:8: spec.split: must be one of train, eval, got string "tst"\n` +
        `  ${bad}:5:16: spec.learner.lr: must be in (0, 1), got 2`,
    )
    const dryRefused = await run(submitCommand, [bad, "--dry-run"])
    expect(dryRefused.code).toBe(1)

    const notFound = await run(watchCommand, ["job-nope", ...gateway])
    expect([notFound.code, notFound.err[0]]).toEqual([1, "NOT_FOUND: job job-nope not found"])

    const secured = await h.start({
      tokens: new Map([
        ["admin-secret", { role: "admin" as const }],
        ["reader-secret", { role: "reader" as const }],
      ]),
    })
    const at = ["--gateway", secured.endpoint.address]
    const anonymous = await run(jobsCommand, at)
    expect(anonymous.code).toBe(1)
    expect(anonymous.err[0]).toMatch(
      /^UNAUTHENTICATED: .*\n {2}hint: pass a bearer token with --token or T1_TOKEN$/,
    )
    const reader = await run(submitCommand, [EVAL_YAML, "--token", "reader-secret", ...at])
    expect(reader.err[0]).toMatch(/^PERMISSION_DENIED: .*\n {2}hint: .*admin token$/)
    expect((await run(jobsCommand, ["--token", "reader-secret", ...at])).code).toBe(0)
    await secured.stop()

    const unreachable = await run(jobsCommand, ["--gateway", "127.0.0.1:1", "--timeout-ms", "2000"])
    expect(unreachable.code).toBe(1)
    expect(unreachable.err[0]).toMatch(
      /^UNAVAILABLE: [^\n]*\n {2}hint: is a gateway serving at 127\.0\.0\.1:1\?/,
    )
  })

  it.skipIf(!opensslAvailable)("talks TLS with --tls-ca", async () => {
    const { certFile, keyFile } = selfSignedCertificate(scratch, "DNS:localhost")
    const secure = await h.start({ tls: { certFile, keyFile } })
    const at = ["--gateway", secure.endpoint.address, "--timeout-ms", "5000"]
    const tls = [...at, "--tls-ca", certFile, "--tls-server-name", "localhost"]
    const submitted = await run(submitCommand, [EVAL_YAML, "--request-id", "over-tls", ...tls])
    expect(submitted).toMatchObject({ code: 0, out: [expect.stringMatching(/^job-/)] })
    const listed = await run(jobsCommand, tls)
    expect(listed.code).toBe(0)
    expect(listed.out.some((l) => l.startsWith(submitted.out[0] ?? "?"))).toBe(true)
    const plain = await run(jobsCommand, at)
    expect([plain.code, plain.err[0]]).toEqual([1, expect.stringMatching(/^UNAVAILABLE: /)])
    await secure.stop()
  })

  it("reports INVALID_ARGUMENT with the t1-field-path trailer", async () => {
    const error = await gw
      .client()
      .submitJob({
        spec: {
          kind: JobKind.TRAIN,
          taskSet: "",
          learner: { clipEps: 1.5 },
        },
      })
      .catch((e: GatewayCallError) => e)
    if (!("code" in error)) throw new Error("expected a refusal")
    expect(describeCallError(error, gw.endpoint.address)).toBe(
      "INVALID_ARGUMENT: spec.task_set: required; spec.learner.clip_eps: must be in (0, 1), got 1.5\n" +
        "  field spec.task_set\n" +
        "  field spec.learner.clip_eps",
    )
  })

  it("runs as t1 <command> with the documented exit codes", async () => {
    const { jobId } = await gw.client().submitJob({ spec: { kind: JobKind.EVAL, taskSet: "x" } })
    await gw.client().cancelJob({ jobId, reason: "spawned" })
    // Three processes at once: each starts tsx, several seconds on a loaded machine.
    const [dry, watched, unknown] = await Promise.all([
      t1(["submit", "--dry-run", TRAIN_YAML]),
      t1(["watch", jobId, "--gateway", gw.endpoint.address]),
      t1(["jobz"]),
    ])
    expect(dry.code).toBe(0)
    expect(JSON.parse(dry.stdout)).toMatchObject({
      kind: "JOB_KIND_TRAIN",
      task_set: "tasks/bundled/train",
      learner: { clip_eps: 0.2, r3: true, tito: true },
    })
    expect(watched.code).toBe(1)
    expect(watched.stdout).toMatch(/state PENDING → CANCELLED: spawned\n$/)
    expect(watched.stderr).toBe(`t1: job ${jobId} CANCELLED: spawned\n`)
    expect(unknown.code).toBe(2)
    for (const command of ["submit", "watch", "jobs", "cancel", "eval"]) {
      expect(unknown.stderr).toMatch(new RegExp(`^ {2}${command} `, "m"))
    }
  }, 150_000)
})

describe("unverifiable episodes in what the CLI prints", () => {
  const evaluation = create(EvaluationSummarySchema, {
    policyVersion: 2n,
    resolvedRate: 0.5,
    passAtK: { 1: 0.5 },
    rewardMean: 1.5,
    tasks: 1,
    episodes: 2,
    unverifiable: 3,
    perTask: [
      { task: "set/ok", samples: 2, resolved: 1, passAtK: { 1: 0.5 }, rewardMean: 1.5 },
      { task: "set/numpy", unverifiable: 2, missingPackages: ["numpy"] },
      {
        task: "set/mixed",
        samples: 1,
        rewardMean: 0,
        passAtK: { 1: 0 },
        unverifiable: 1,
        missingPackages: ["requests"],
      },
    ],
  })

  it("watch: an unverifiable episode and the evaluation's count", () => {
    const finished = create(JobEventSchema, {
      seq: 4n,
      event: {
        case: "episodeFinished",
        value: {
          episodeId: "ep-3",
          taskId: "numpy",
          attempt: 0,
          turns: 6,
          unverifiable: true,
          missingPackages: ["numpy", "scipy"],
        },
      },
    })
    expect(describeEvent(finished)).toBe(
      "#4 --:--:-- episode ep-3 (numpy): unverifiable (missing: numpy, scipy), not scored, 6 turns",
    )
    const summary = create(JobEventSchema, {
      seq: 9n,
      event: { case: "evaluation", value: evaluation },
    })
    expect(describeEvent(summary)).toBe(
      "#9 --:--:-- evaluation of v2: resolved 50.0% over 2 episodes (1 tasks), pass@1 50.0%, reward 1.5, 3 unverifiable (missing: numpy, requests)",
    )
  })

  it("jobs: the count beside the failed ones", () => {
    const job = create(JobStatusSchema, {
      jobId: "job-1",
      spec: { name: "tb2", kind: JobKind.EVAL },
      state: JobState.SUCCEEDED,
      counts: {
        episodesTotal: 10,
        episodesFinished: 6,
        episodesFailed: 1,
        episodesUnverifiable: 3,
      },
      resolvedRate: 0.5,
    })
    expect(jobsTable([job])[1]).toMatch(/SUCCEEDED\s+6\/10 \(1 failed, 3 unverifiable\)\s+50\.0%/)
  })

  it("eval: per task, with the missing packages; rates over scored episodes", () => {
    const outcome = {
      state: JobState.SUCCEEDED,
      error: undefined,
      evaluation,
      status: undefined,
      lastSeq: 9n,
    }
    expect(evalSummary(outcome)).toEqual([
      "resolved rate 50.0% (2 episodes over 1 tasks, policy v2), 3 unverifiable (missing: numpy, requests)",
      "pass@1 50.0%",
      "  set/ok: 1/2 resolved, reward 1.5, pass@1 50.0%",
      "  set/numpy: 2 unverifiable (missing: numpy), not scored",
      "  set/mixed: 0/1 resolved, reward 0, pass@1 0.0%, 1 unverifiable (missing: requests)",
    ])
    const noEvaluation = {
      ...outcome,
      evaluation: undefined,
      status: create(JobStatusSchema, {
        counts: { episodesFinished: 4, episodesUnverifiable: 2 },
        resolvedRate: 0.25,
      }),
    }
    expect(evalSummary(noEvaluation)).toEqual(["resolved rate 25.0% (4 episodes), 2 unverifiable"])
  })
})
