/**
 * `t1 serve --policy sglang` as a GPU user runs it, against two SGLang doubles launched on a
 * model directory (a TinyMoE exported as a Qwen3-MoE with the bundled tokenizer and its chat
 * template): one command, no hand-started actor, no job id on any command line. Two train jobs
 * submitted together through the gRPC client both run to SUCCEEDED on turns the doubles generate,
 * one after the other (serve's learner trains one job at a time, and the replicas hold one
 * policy): each version the learner publishes is written under --checkpoint-dir and loaded into
 * both replicas, the first job's versions in order, then the second's. (When train jobs do run at
 * once, the sampler refuses the second: actors/sampler/train-binding.test.ts.)
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { once } from "node:events"
import { appendFileSync, existsSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type SglangDouble,
  sglangDouble,
  type VllmDouble,
  vllmDouble,
} from "../../actors/sampler/policy/engine-double.ts"
import { startTestServer, type TestServer } from "../../actors/sampler/policy/test-server.ts"
import { ErrorCode, type JobEvent, JobState } from "../../proto/index.ts"
import { type JobServiceClient, jobServiceClient } from "../../services/gateway/client.ts"
import { VLLM_MODEL } from "../support/engine-replicas.ts"
import { type ModelDir, writeModelDir } from "../support/model-dir.ts"
import { freePort } from "../support/system.ts"
import { smallTrainSpec } from "../support/train-spec.ts"

const BIN = fileURLToPath(new URL("../../cli/bin/t1.js", import.meta.url))
const run = promisify(execFile)

/**
 * `t1 serve --policy sglang` on two SGLang doubles launched on an exported model directory,
 * started before the describe's tests and stopped after them.
 */
const useServeOnDoubles = (
  env: Readonly<Record<string, string>> = {},
  engine: "sglang" | "vllm" = "sglang",
) => {
  const state = {
    output: "",
    checkpointDir: "",
    client: undefined as unknown as JobServiceClient,
    serve: undefined as unknown as ChildProcess,
    replicas: [] as Array<{ double: SglangDouble; server: TestServer }>,
    vllm: [] as Array<{ double: VllmDouble; server: TestServer }>,
  }
  let stopping = false

  beforeAll(async () => {
    const model: ModelDir = writeModelDir(mkdtempSync(join(tmpdir(), "t1-serve-model-")))
    state.checkpointDir = mkdtempSync(join(tmpdir(), "t1-serve-ckpt-"))
    // Every turn one shell-block command ending at the template's eos_token.
    const turn = [...model.encode("```bash\necho hi\n```"), model.eosId]
    for (let i = 0; i < 2; i++) {
      if (engine === "vllm") {
        const double = vllmDouble(VLLM_MODEL, () => ({ tokens: turn }))
        state.vllm.push({ double, server: await startTestServer(double.handler) })
        continue
      }
      const double = sglangDouble(() => ({ tokens: turn }), { launchDir: model.dir, loadMs: 300 })
      state.replicas.push({ double, server: await startTestServer(double.handler) })
    }
    const servers = [...state.replicas, ...state.vllm].map((r) => r.server)
    const listen = `127.0.0.1:${await freePort()}`
    const serve = spawn(
      process.execPath,
      [
        BIN,
        "serve",
        "--driver",
        "local",
        "--policy",
        engine,
        ...(engine === "vllm" ? ["--engine-model", VLLM_MODEL] : []),
        "--engine-url",
        servers.map((s) => s.url).join(","),
        "--model-dir",
        model.dir,
        "--checkpoint-dir",
        state.checkpointDir,
        "--listen",
        listen,
        "--metrics-port",
        "0",
        "--concurrency",
        "2",
      ],
      {
        stdio: ["ignore", "pipe", "pipe"],
        env: {
          ...process.env,
          T1_LOG_FORMAT: "logfmt",
          T1_ACTION_FORMAT: "shell-block",
          T1_CONTEXT_LENGTH: "1024",
          ...env,
        },
      },
    )
    state.serve = serve
    const collect = (d: Buffer) => {
      state.output += d.toString()
      if (process.env.T1_SERVE_LOG) appendFileSync(process.env.T1_SERVE_LOG, d)
    }
    serve.stdout?.on("data", collect)
    serve.stderr?.on("data", collect)
    serve.once("exit", (code, signal) => {
      if (!stopping)
        process.stderr.write(
          `t1 serve exited (${code ?? signal}) during the tests:\n${state.output}\n`,
        )
    })
    const until = Date.now() + 120_000
    for (;;) {
      if (serve.exitCode !== null) throw new Error(`t1 serve exited:\n${state.output}`)
      if (/JobService on /.test(state.output)) break
      if (Date.now() > until) throw new Error(`t1 serve not up in 120 s:\n${state.output}`)
      await new Promise((r) => setTimeout(r, 200))
    }
    state.client = jobServiceClient(listen, { timeoutMs: 10_000 })
  }, 180_000)

  afterAll(async () => {
    stopping = true
    state.client?.close()
    if (state.serve !== undefined && state.serve.exitCode === null) {
      state.serve.kill("SIGKILL")
      await once(state.serve, "exit")
    }
    await Promise.all([...state.replicas, ...state.vllm].map((r) => r.server.close()))
  })

  const finish = async (jobId: string) => {
    const events: JobEvent[] = []
    for await (const e of state.client.watchJob({ jobId })) events.push(e)
    const { status } = await state.client.getJob({ jobId })
    return { status, events }
  }

  const submit = async (name: string) =>
    (
      await state.client.submitJob({
        spec: smallTrainSpec(`serve-engine ${name}`, { ppoSteps: 2, criticWarmupSteps: 0 }),
      })
    ).jobId

  return { state, finish, submit }
}

describe("t1 serve --policy sglang: one command, engines launched on a model directory", () => {
  const { state, finish, submit } = useServeOnDoubles()

  it("two train jobs: each trains on the engines' turns, one after the other, every version loaded into both replicas", async () => {
    const [first, second] = await Promise.all([submit("a"), submit("b")])
    const jobs = await Promise.all([finish(first), finish(second)])
    for (const [k, job] of jobs.entries()) {
      expect(job.status?.state, state.output.slice(-6000)).toBe(JobState.SUCCEEDED)
      const steps = job.events.flatMap((e) =>
        e.event.case === "learnerStep" ? [Number(e.event.value.step)] : [],
      )
      expect(steps, `job ${k}`).toEqual([1, 2])
    }

    // Every turn came from the doubles.
    const generated = state.replicas.map((r) => r.double.calls.length)
    console.log(`turns generated by the replicas: ${generated.join(", ")}`)
    expect(generated.reduce((x, y) => x + y, 0)).toBeGreaterThanOrEqual(8)
    // R3: the sampler asked for routed experts (geometry from --model-dir) and got them.
    const routed = state.replicas.map((r) => r.double.routedAnswers)
    expect(routed).toEqual(generated)

    const loaded = (d: SglangDouble) => d.loads.map((l) => l.path)
    const last = (job: string) => join(state.checkpointDir, job, "v2")
    for (let waited = 0; waited < 30_000; waited += 200) {
      if (
        state.replicas.every((r) =>
          [first, second].every((j) => loaded(r.double).includes(last(j))),
        )
      )
        break
      await new Promise((r) => setTimeout(r, 200))
    }
    // Each version was written as a model directory the engines read.
    for (const job of [first, second])
      for (const v of [0, 1, 2])
        expect(existsSync(join(state.checkpointDir, job, `v${v}`, "config.json"))).toBe(true)
    for (const [i, { double }] of state.replicas.entries()) {
      console.log(
        `replica ${i}: ${double.loads.map((l) => `${l.path.slice(state.checkpointDir.length + 1)} changed ${l.changed}/${l.served}`).join(", ")}`,
      )
      // One job's versions, in order, then the other's: the replicas hold one policy at a time.
      const order = double.loads.map((l) => l.path.slice(state.checkpointDir.length + 1))
      const firstRun = order[0]?.split("/")[0] ?? ""
      const other = firstRun === first ? second : first
      expect(order).toEqual([
        ...[0, 1, 2].map((v) => `${firstRun}/v${v}`),
        ...[0, 1, 2].map((v) => `${other}/v${v}`),
      ])
      // Every trained version changes the served model; v0 is the launch weights themselves.
      for (const load of double.loads.filter((l) => !l.path.endsWith("/v0")))
        expect(load.changed).toBe(load.served)
    }
  }, 400_000)

  it("stops cleanly on SIGTERM", async () => {
    const exited = once(state.serve, "exit")
    state.serve.kill("SIGTERM")
    const [code] = (await exited) as [number | null]
    expect(code, state.output.slice(-4000)).toBe(0)
  }, 60_000)
})

describe("t1 serve --policy sglang with two learners: train jobs at once", () => {
  // Two jobs trained at once get episodes at once; the replicas hold one policy.
  const { state, finish, submit } = useServeOnDoubles({ T1_MAX_JOBS: "2" })

  it("refuses the second train job with FAILED_PRECONDITION, naming the one the replicas follow; the first succeeds", async () => {
    const ids = await Promise.all([submit("x"), submit("y")])
    const jobs = await Promise.all(ids.map(finish))
    const k = jobs.findIndex((j) => j.status?.state === JobState.SUCCEEDED)
    expect(k, state.output.slice(-6000)).toBeGreaterThanOrEqual(0)
    const ran = ids[k] ?? ""
    const refused = jobs[1 - k]
    expect(refused?.status?.state).toBe(JobState.FAILED)
    expect(refused?.status?.error?.code).toBe(ErrorCode.FAILED_PRECONDITION)
    expect(refused?.status?.error?.message).toContain(`serve train job ${ran}'s policy`)
    console.log(`refused: ${refused?.status?.error?.message}`)
    // The replicas loaded the followed job's versions only.
    for (const { double } of state.replicas)
      for (const load of double.loads) expect(load.path).toContain(`/${ran}/`)
  }, 300_000)
})

describe("t1 serve --policy vllm --engine-model NAME: one command", () => {
  // The vLLM double answers routed_experts null (a vLLM release without the field): no R3.
  const { state, finish, submit } = useServeOnDoubles({ T1_ENGINE_ROUTING: "off" }, "vllm")

  it("a train job trains on the vLLM replicas' turns; every version is reloaded into both", async () => {
    const jobId = await submit("vllm")
    const { status } = await finish(jobId)
    expect(status?.state, state.output.slice(-6000)).toBe(JobState.SUCCEEDED)
    const reloaded = (d: VllmDouble) =>
      d.refits.includes(`reload ${join(state.checkpointDir, jobId, "v2")}`)
    for (
      let waited = 0;
      waited < 30_000 && !state.vllm.every((r) => reloaded(r.double));
      waited += 200
    )
      await new Promise((r) => setTimeout(r, 200))
    for (const { double } of state.vllm) {
      expect(double.calls.length).toBeGreaterThan(0)
      const versions = double.refits.filter((l) => l.startsWith("version ")).map((l) => l.slice(8))
      expect(versions).toEqual(["0", "1", "2"])
    }
  }, 300_000)
})

describe("t1 serve engine flags, bad input", () => {
  it("--engine-url without an engine policy is refused with exit 2", async () => {
    const result = await run(process.execPath, [
      BIN,
      "serve",
      "--engine-url",
      "http://127.0.0.1:1",
    ]).then(
      () => ({ code: 0, stderr: "" }),
      (e: { code: number; stderr: string }) => e,
    )
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/--engine-url applies to inference engines: add --policy sglang/)
  })
})
