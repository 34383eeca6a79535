/**
 * Weights from any trainer, over the real gateway (TrainerService and JobService on one gRPC
 * server, in-memory bus): a plain Hugging Face safetensors file streamed (no t1 metadata) and a
 * sharded Hugging Face checkpoint directory by reference are checked against the job's model,
 * stored and served; NaN/Inf, version and step jumps or steps back, and checkpoints that do not
 * match the job's model (names, shapes, dtypes, another architecture, no index) are refused with
 * a typed error naming the file or tensor, and nothing is announced. Every version stays
 * readable: old ones through FetchWeights, and after the job ended through
 * JobService/FetchJobWeights and `t1 weights fetch`, which writes a checkpoint directory the
 * model layer reads back to the same weights.
 */
import { execFile } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Cause, Effect, Exit, Option } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import {
  type TrainerServiceClient,
  trainerService,
  trainerServiceClient,
} from "../../actors/trainer/index.ts"
import { weightsCommand } from "../../cli/commands/weights.ts"
import { UsageError } from "../../cli/flags.ts"
import type { Output } from "../../cli/gateway-flags.ts"
import { BUNDLED_TOKENIZER } from "../../model/bundled/bundled.ts"
import {
  decodeSafetensors,
  decodeWeights,
  encodeSafetensors,
  encodeWeights,
  hfCheckpointFiles,
  loadHfModelTokenizer,
  readHfCheckpoint,
  type Tensor,
  type TinyMoe,
} from "../../model/index.ts"
import { Bus, subjectsFor } from "../../services/bus/index.ts"
import {
  type GatewayCallError,
  type JobServiceClient,
  jobServiceClient,
  serveGateway,
} from "../../services/gateway/index.ts"
import { latestAnnouncement } from "../../services/weights/index.ts"
import { runInProcess } from "../support/in-process.ts"
import { smallTrainSpec } from "../support/train-spec.ts"

const BIN = fileURLToPath(new URL("../../cli/bin/t1.js", import.meta.url))
const root = mkdtempSync(join(tmpdir(), "t1-trainer-weights-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

let dirs = 0
const writeDir = (files: ReadonlyArray<{ readonly name: string; readonly bytes: Uint8Array }>) => {
  const dir = join(root, `ckpt-${dirs++}`)
  for (const f of files) {
    mkdirSync(dirname(join(dir, f.name)), { recursive: true })
    writeFileSync(join(dir, f.name), f.bytes)
  }
  return dir
}

/** A training step as far as this test's trainer goes: every weight nudged. */
const nudged = (bytes: Uint8Array, by: number): TinyMoe => {
  const model = decodeWeights(bytes).model
  for (const entry of model.entries())
    for (let i = 0; i < entry.data.length; i += 5) entry.data[i] = (entry.data[i] ?? 0) + by
  return model
}

const CRITIC = new Set(["valueHead", "valueBias"])

/** The same policy weights, bit for bit; the critic too unless `critic` is false. */
const sameParams = (a: TinyMoe, b: TinyMoe, critic = true) =>
  a
    .entries()
    .every(
      (e, k) =>
        (!critic && CRITIC.has(e.name)) || e.data.every((v, i) => v === b.entries()[k]?.data[i]),
    )

/** A checkpoint without the critic: its value head reads as zeros. */
const zeroCritic = (m: TinyMoe) =>
  m
    .entries()
    .filter((e) => CRITIC.has(e.name))
    .every((e) => e.data.every((v) => v === 0))

/** The model's Hugging Face state dict (no critic), as another trainer holds it. */
const hfTensors = (model: TinyMoe): Map<string, Tensor> => {
  const { tensors } = decodeSafetensors(encodeWeights(model))
  tensors.delete("value_head.weight")
  tensors.delete("value_head.bias")
  return tensors
}

/** A plain `model.safetensors` of another trainer: HF names, no t1 metadata. */
const plainFile = (tensors: ReadonlyMap<string, Tensor>) =>
  encodeSafetensors(tensors, { format: "pt" })

/** The checkpoint directory an HF trainer saves: sharded, with an index and config.json. */
const hfFiles = (model: TinyMoe) =>
  hfCheckpointFiles(encodeWeights(model), { maxShardBytes: 256 * 1024 }).filter(
    (f) => !f.name.startsWith("critic/"),
  )

const f32 = (t: Tensor | undefined): Float32Array => {
  if (t === undefined || !(t.data instanceof Float32Array)) throw new Error("not an F32 tensor")
  return t.data
}

const refusal = async (p: Promise<unknown>): Promise<{ code: string; details: string }> => {
  try {
    await p
    return { code: "OK", details: "" }
  } catch (e) {
    const err = e as GatewayCallError
    return { code: err.codeName, details: err.details }
  }
}

/** Runs a CLI command as `t1` would: exit 0, 1 (its message on err) or 2 (usage). */
const runCli = async (args: ReadonlyArray<string>) => {
  const out: string[] = []
  const err: string[] = []
  const output: Output = { out: (l) => out.push(l), err: (l) => err.push(l) }
  try {
    const result = weightsCommand(args, output)
    if (typeof result === "string") return { code: 0, out: [result], err }
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

const t1Bin = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { timeout: 120_000, env: { ...process.env, T1_GATEWAY: "", T1_TOKEN: "" } },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr }),
    )
  })

describe("TrainerService: weights from any trainer", () => {
  it("HF file and HF directory published, bad weights and jumps refused, every version served during and after the job", async () => {
    const subjects = subjectsFor(`trw${Math.random().toString(36).slice(2, 7)}`)
    const r = await runInProcess(
      subjects,
      Effect.gen(function* () {
        const bus = yield* Bus
        const gateway = yield* serveGateway({
          subjects,
          port: 0,
          // Room for one weights file (1.45 MB), not for three.
          services: [yield* trainerService({ subjects, maxWeightsBytes: 4_000_000 })],
        })
        const jobs: JobServiceClient = jobServiceClient(gateway.address)
        const trainer: TrainerServiceClient = trainerServiceClient(gateway.address)
        const latest = (jobId: string) =>
          Effect.runPromise(
            Effect.map(latestAnnouncement(bus, subjects, jobId), (a) => a?.policyVersion),
          )
        const stored = (name: string) =>
          Effect.runPromise(
            Effect.flatMap(bus.objectStore(subjects.weightsBucket), (s) =>
              Effect.map(s.get(name), Option.isSome),
            ),
          )
        return yield* Effect.promise(async () => {
          // No coordinator here: the job stays PENDING, which is all the Trainer API needs.
          const { jobId } = await jobs.submitJob({
            spec: smallTrainSpec("hf weights", { ppoSteps: 5, external: true }),
          })
          const claim = await trainer.claimJob({ jobId, trainerId: "hf-trainer" })
          const leaseId = claim.lease?.leaseId ?? ""
          const start = await trainer.fetchWeights({ jobId, leaseId })
          const config = decodeWeights(start.bytes).model.config

          // v1: a plain HF safetensors file, streamed.
          const model1 = nudged(start.bytes, 1e-3)
          const plain1 = plainFile(hfTensors(model1))
          const pub1 = await trainer.publishWeights(
            { jobId, leaseId, policyVersion: 1n, step: 1n },
            plain1,
          )
          const served1 = await trainer.fetchWeights({ jobId, leaseId })

          // v2: a sharded HF checkpoint directory, by reference.
          const model2 = nudged(served1.bytes, 2e-3)
          const files2 = hfFiles(model2)
          const dir2 = writeDir(files2)
          const pub2 = await trainer.publishWeightsRef({
            jobId,
            leaseId,
            policyVersion: 2n,
            step: 2n,
            format: "safetensors",
            path: dir2,
          })
          const served2 = await trainer.fetchWeights({ jobId, leaseId })

          // Refused, each with nothing announced.
          const next = { jobId, leaseId, policyVersion: 3n, step: 3n }
          const byRef = (path: string) =>
            refusal(trainer.publishWeightsRef({ ...next, format: "safetensors", path }))
          const model3 = nudged(served2.bytes, 3e-3)
          const withNaN = hfTensors(model3)
          f32(withNaN.get("model.layers.1.mlp.experts.2.up_proj.weight"))[7] = Number.NaN
          const withInf = hfTensors(model3)
          f32(withInf.get("lm_head.weight"))[3] = Number.POSITIVE_INFINITY
          const infDir = writeDir([
            { name: "model.safetensors", bytes: plainFile(withInf) },
            ...files2.filter((f) => f.name === "config.json"),
          ])
          const renamed = hfTensors(model3)
          const q = renamed.get("model.layers.0.self_attn.q_proj.weight")
          renamed.delete("model.layers.0.self_attn.q_proj.weight")
          if (q !== undefined) renamed.set("model.layers.0.self_attn.query.weight", q)
          const reshaped = hfTensors(model3)
          const norm = f32(reshaped.get("model.norm.weight"))
          reshaped.set("model.norm.weight", {
            dtype: "F32",
            shape: [norm.length - 1],
            data: norm.slice(1),
          })
          const integer = hfTensors(model3)
          const kNorm = f32(integer.get("model.layers.1.self_attn.k_norm.weight"))
          integer.set("model.layers.1.self_attn.k_norm.weight", {
            dtype: "I32",
            shape: [kNorm.length],
            data: Int32Array.from(kNorm, Math.round),
          })
          const files3 = hfFiles(model3)
          const noIndex = writeDir(files3.filter((f) => f.name !== "model.safetensors.index.json"))
          const configOf = (patch: Record<string, unknown>) => {
            const json = JSON.parse(
              new TextDecoder().decode(files3.find((f) => f.name === "config.json")?.bytes),
            ) as Record<string, unknown>
            return files3.map((f) =>
              f.name === "config.json"
                ? {
                    name: f.name,
                    bytes: new TextEncoder().encode(JSON.stringify({ ...json, ...patch })),
                  }
                : f,
            )
          }
          const llama = writeDir(
            configOf({ model_type: "llama", architectures: ["LlamaForCausalLM"] }),
          )
          const wider = writeDir(configOf({ hidden_size: config.dModel * 2 }))
          const oversized = writeDir([
            ...files3,
            ...[1, 2].map((i) => ({
              name: `extra-${i}.safetensors`,
              bytes: encodeWeights(model3),
            })),
          ])
          const refused = {
            oversized: await byRef(oversized),
            nanBytes: await refusal(trainer.publishWeights(next, plainFile(withNaN))),
            infDir: await byRef(infDir),
            renamed: await refusal(trainer.publishWeights(next, plainFile(renamed))),
            reshaped: await refusal(trainer.publishWeights(next, plainFile(reshaped))),
            integer: await refusal(trainer.publishWeights(next, plainFile(integer))),
            noIndex: await byRef(noIndex),
            llama: await byRef(llama),
            wider: await byRef(wider),
            versionJump: await refusal(
              trainer.publishWeights({ ...next, policyVersion: 4n }, encodeWeights(model3)),
            ),
            stepJump: await refusal(
              trainer.publishWeights({ ...next, step: 4n }, encodeWeights(model3)),
            ),
            back: await refusal(
              trainer.publishWeights(
                { ...next, policyVersion: 2n, step: 2n },
                encodeWeights(model3),
              ),
            ),
            backByRef: await refusal(
              trainer.publishWeightsRef({
                ...next,
                policyVersion: 1n,
                step: 1n,
                format: "safetensors",
                path: dir2,
              }),
            ),
            version0: await refusal(
              trainer.publishWeights({ ...next, policyVersion: 0n }, encodeWeights(model3)),
            ),
            step0: await refusal(
              trainer.publishWeights({ ...next, step: 0n }, encodeWeights(model3)),
            ),
          }
          const afterRefusals = {
            latest: await latest(jobId),
            claimed: (await trainer.claimJob({ jobId, trainerId: "hf-trainer" })).policyVersion,
            v3Stored: await stored(`${jobId}/v3.safetensors`),
          }

          // v3: t1's own weights file, kept byte for byte.
          const t1File = encodeWeights(model3, "F32", { version: 3n })
          const pub3 = await trainer.publishWeights(next, t1File)

          // Any version the job published, while it runs.
          const old1 = await trainer.fetchWeights({ jobId, leaseId, policyVersion: 1n })
          const old0 = await trainer.fetchWeights({ jobId, leaseId, policyVersion: 0n })
          const never = await refusal(trainer.fetchWeights({ jobId, leaseId, policyVersion: 9n }))

          // A job publishing every 2 steps of 3: v2 at step 2, then the budget's last, v3 at 3.
          const { jobId: every2 } = await jobs.submitJob({
            spec: smallTrainSpec("every 2", { ppoSteps: 3, publishEverySteps: 2, external: true }),
          })
          const lease2 =
            (await trainer.claimJob({ jobId: every2, trainerId: "hf-trainer" })).lease?.leaseId ??
            ""
          const at = (policyVersion: bigint, step: bigint) =>
            refusal(
              trainer.publishWeights(
                { jobId: every2, leaseId: lease2, policyVersion, step },
                plainFile(hfTensors(model3)),
              ),
            )
          const cadence = {
            everyStep: await at(1n, 1n),
            second: await at(2n, 2n),
            pastBudget: await at(4n, 4n),
            last: await at(3n, 3n),
          }

          // The job ends; its weights stay readable through JobService and the CLI.
          await jobs.cancelJob({ jobId, reason: "trained enough" })
          const trainerAfterEnd = await refusal(trainer.fetchWeights({ jobId, leaseId }))
          const final = await jobs.fetchJobWeights({ jobId })
          const final1 = await jobs.fetchJobWeights({ jobId, policyVersion: 1n })
          const jobsNever = await refusal(jobs.fetchJobWeights({ jobId, policyVersion: 7n }))
          const noJob = await refusal(jobs.fetchJobWeights({ jobId: "no-such-job" }))
          const gw = ["--gateway", gateway.address]
          const out2 = join(root, "fetched-v2")
          const cli2 = await runCli(["fetch", jobId, "--version", "2", "--out", out2, ...gw])
          const cliNotEmpty = await runCli(["fetch", jobId, "--out", out2, ...gw])
          const cliNoOut = await runCli(["fetch", jobId, ...gw])
          const cliBadVersion = await runCli([
            "fetch",
            jobId,
            "--version",
            "-1",
            "--out",
            join(root, "x"),
            ...gw,
          ])
          const cliNever = await runCli([
            "fetch",
            jobId,
            "--version",
            "7",
            "--out",
            join(root, "never"),
            ...gw,
          ])
          const outBundled = join(root, "fetched-bundled")
          const cliBundled = await runCli([
            "fetch",
            jobId,
            "--tokenizer",
            "bundled",
            "--out",
            outBundled,
            ...gw,
          ])
          const cliNoTokenizer = await runCli([
            "fetch",
            jobId,
            "--tokenizer",
            root,
            "--out",
            join(root, "no-tokenizer"),
            ...gw,
          ])
          // A tokenizer naming ids past the model's 1024 rows (another model's).
          const bigTokenizer = join(root, "big-tokenizer")
          const tokJson = JSON.parse(readFileSync(BUNDLED_TOKENIZER, "utf8")) as {
            added_tokens: Array<Record<string, unknown>>
          }
          tokJson.added_tokens.push({
            id: 5000,
            content: "<|far|>",
            single_word: false,
            lstrip: false,
            rstrip: false,
            normalized: false,
            special: true,
          })
          mkdirSync(bigTokenizer, { recursive: true })
          writeFileSync(join(bigTokenizer, "tokenizer.json"), JSON.stringify(tokJson))
          const cliBigTokenizer = await runCli([
            "fetch",
            jobId,
            "--tokenizer",
            bigTokenizer,
            "--out",
            join(root, "big"),
            ...gw,
          ])
          const outLatest = join(root, "fetched-latest")
          const bin = await t1Bin(["weights", "fetch", jobId, "--out", outLatest, ...gw])
          trainer.close()
          jobs.close()
          return {
            jobId,
            config,
            model1,
            model2,
            model3,
            plain1Sha: createHash("sha256").update(plain1).digest("hex"),
            pub1: pub1.announcement,
            served1,
            pub2: pub2.announcement,
            served2,
            refused,
            cadence,
            afterRefusals,
            t1FileSha: createHash("sha256").update(t1File).digest("hex"),
            pub3: pub3.announcement,
            old1,
            old0,
            startBytes: start.bytes,
            never,
            trainerAfterEnd,
            final,
            final1,
            jobsNever,
            noJob,
            cli2,
            out2,
            cliNotEmpty,
            cliNoOut,
            cliBadVersion,
            cliNever,
            bin,
            outLatest,
            cliBundled,
            outBundled,
            cliNoTokenizer,
            cliBigTokenizer,
          }
        })
      }),
    )
    const { refused } = r
    // v1 (plain HF bytes) re-encoded as t1's file; what is served is the trainer's weights.
    expect(r.pub1?.policyVersion).toBe(1n)
    expect(r.pub1?.step).toBe(1n)
    expect(r.pub1?.sha256).not.toBe(r.plain1Sha)
    expect(r.served1.head.sha256).toBe(r.pub1?.sha256)
    const served1 = decodeWeights(r.served1.bytes).model
    expect(sameParams(served1, r.model1, false)).toBe(true)
    expect(zeroCritic(served1)).toBe(true)
    // v2 (a sharded HF directory by reference) served as the trainer saved it.
    expect(r.pub2?.policyVersion).toBe(2n)
    expect(sameParams(decodeWeights(r.served2.bytes).model, r.model2, false)).toBe(true)
    // Each refusal typed, naming the file or tensor; version and step rules name both values.
    const codes = Object.fromEntries(Object.entries(refused).map(([k, v]) => [k, v.code]))
    expect(codes).toEqual({
      oversized: "INVALID_ARGUMENT",
      nanBytes: "INVALID_ARGUMENT",
      infDir: "INVALID_ARGUMENT",
      renamed: "INVALID_ARGUMENT",
      reshaped: "INVALID_ARGUMENT",
      integer: "INVALID_ARGUMENT",
      noIndex: "INVALID_ARGUMENT",
      llama: "INVALID_ARGUMENT",
      wider: "INVALID_ARGUMENT",
      versionJump: "FAILED_PRECONDITION",
      stepJump: "FAILED_PRECONDITION",
      back: "FAILED_PRECONDITION",
      backByRef: "FAILED_PRECONDITION",
      version0: "INVALID_ARGUMENT",
      step0: "INVALID_ARGUMENT",
    })
    expect(refused.oversized.details).toMatch(/safetensors files hold \d+ bytes, at most 4000000/)
    expect(refused.nanBytes.details).toMatch(
      /model\.layers\.1\.mlp\.experts\.2\.up_proj\.weight.*not finite/,
    )
    expect(refused.infDir.details).toContain("model.safetensors")
    expect(refused.infDir.details).toMatch(/lm_head\.weight.*Infinity.*not finite/)
    expect(refused.renamed.details).toMatch(/model\.layers\.0\.self_attn\.q_proj\.weight.*missing/)
    expect(refused.reshaped.details).toMatch(/model\.norm\.weight.*shape/)
    expect(refused.integer.details).toMatch(/model\.layers\.1\.self_attn\.k_norm\.weight.*I32/)
    expect(refused.noIndex.details).toMatch(/model\.safetensors\.index\.json.*model\.safetensors/)
    expect(refused.llama.details).toMatch(/config\.json.*model_type.*llama/)
    expect(refused.wider.details).toMatch(/config\.json.*dModel/)
    expect(refused.versionJump.details).toContain("policy_version 4 at step 3")
    expect(refused.versionJump.details).toContain("version 3 at step 3")
    expect(refused.stepJump.details).toContain("policy_version 3 at step 4")
    expect(refused.back.details).toContain("latest is version 2 at step 2")
    expect(refused.version0.details).toContain("policy_version")
    expect(refused.step0.details).toContain("step")
    // With publish_every_steps 2 and 3 steps: steps 2 and 3 only.
    expect(Object.fromEntries(Object.entries(r.cadence).map(([k, v]) => [k, v.code]))).toEqual({
      everyStep: "FAILED_PRECONDITION",
      second: "OK",
      pastBudget: "FAILED_PRECONDITION",
      last: "OK",
    })
    expect(r.cadence.everyStep.details).toContain("version 2 at step 2")
    expect(r.cadence.pastBudget.details).toContain("version 3 at step 3")
    // Nothing of it announced or stored.
    expect(r.afterRefusals).toEqual({ latest: 2n, claimed: 2n, v3Stored: false })
    // v3 (t1's file) is stored byte for byte.
    expect(r.pub3?.sha256).toBe(r.t1FileSha)
    // Old versions, while the job runs.
    expect([r.old1.head.policyVersion, r.old1.head.step]).toEqual([1n, 1n])
    expect(r.old1.head.sha256).toBe(r.pub1?.sha256)
    expect(sameParams(decodeWeights(r.old1.bytes).model, r.model1, false)).toBe(true)
    expect(r.old0.head.policyVersion).toBe(0n)
    expect(Buffer.compare(r.old0.bytes, r.startBytes)).toBe(0)
    expect(r.never.code).toBe("NOT_FOUND")
    // After the job ended: the Trainer API is closed, JobService serves every version.
    expect(r.trainerAfterEnd.code).toBe("FAILED_PRECONDITION")
    expect([r.final.head.policyVersion, r.final.head.step, r.final.head.sha256]).toEqual([
      3n,
      3n,
      r.t1FileSha,
    ])
    expect(sameParams(decodeWeights(r.final.bytes).model, r.model3)).toBe(true)
    expect(sameParams(decodeWeights(r.final1.bytes).model, r.model1, false)).toBe(true)
    expect(r.jobsNever.code).toBe("NOT_FOUND")
    expect(r.jobsNever.details).toContain("never published version 7")
    expect(r.noJob.code).toBe("NOT_FOUND")
    // `t1 weights fetch`: an HF checkpoint directory of the version asked for.
    expect(r.cli2.code).toBe(0)
    expect(r.cli2.err.join("\n")).toContain("version 2 (step 2")
    const back2 = readHfCheckpoint(r.out2, { expected: r.config })
    expect(sameParams(back2.model, r.model2, false)).toBe(true)
    expect(readdirSync(r.out2).sort()).toContain("model.safetensors.index.json")
    const config2 = JSON.parse(readFileSync(join(r.out2, "config.json"), "utf8")) as {
      model_type: string
    }
    expect(config2.model_type).toBe("qwen3_moe")
    expect([r.cliNotEmpty.code, r.cliNoOut.code, r.cliBadVersion.code]).toEqual([2, 2, 2])
    expect(r.cliNotEmpty.err.join("\n")).toContain("is not empty")
    expect(r.cliNever.code).toBe(1)
    expect(r.cliNever.err.join("\n")).toContain("NOT_FOUND")
    // --tokenizer bundled: a directory an engine can be launched on (tokenizer, chat template).
    expect(r.cliBundled.code).toBe(0)
    const launchable = loadHfModelTokenizer(r.outBundled)
    expect(launchable.tokenizer.vocabSize).toBe(r.config.vocabSize)
    expect(readdirSync(r.outBundled)).toEqual(
      expect.arrayContaining(["tokenizer.json", "tokenizer_config.json", "generation_config.json"]),
    )
    const bundledConfig = JSON.parse(readFileSync(join(r.outBundled, "config.json"), "utf8")) as {
      eos_token_id: number
    }
    expect(bundledConfig.eos_token_id).toBe(launchable.eosId)
    expect(sameParams(readHfCheckpoint(r.outBundled).model, r.model3)).toBe(true)
    expect(r.cliNoTokenizer.code).toBe(2)
    expect(r.cliNoTokenizer.err.join("\n")).toContain("no tokenizer.json")
    expect(r.cliBigTokenizer.code).toBe(1)
    expect(r.cliBigTokenizer.err.join("\n")).toContain(
      "tokenizer.json has 5001 ids, more than the model's vocab_size 1024",
    )
    // The real binary, after the job ended: the latest version.
    expect(r.bin.stderr).toContain(`job ${r.jobId}: version 3 (step 3`)
    expect(r.bin.code).toBe(0)
    const latestBack = readHfCheckpoint(r.outLatest, { expected: r.config })
    expect(latestBack.critic).toBe(true)
    expect(sameParams(latestBack.model, r.model3)).toBe(true)
  }, 180_000)
})
