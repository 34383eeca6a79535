import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Bus, MemoryBusLive, subjectsFor } from "../../services/bus/index.ts"
import { resolvePolicyRef } from "../../services/weights/index.ts"
import { writeModelDir } from "../../test/support/model-dir.ts"
import { UsageError } from "../flags.ts"
import { MODEL_DIR_POLICY_REF, publishModelDir, serveEngineFrom } from "./serve-engine.ts"

const dir = mkdtempSync(join(tmpdir(), "t1-serve-engine-"))
const modelDir = join(dir, "model")
mkdirSync(modelDir)
writeFileSync(join(modelDir, "config.json"), "{}")
const ckpt = join(dir, "ckpt")
mkdirSync(ckpt)
const url = "http://127.0.0.1:30000"
const full = { "engine-url": url, "model-dir": modelDir, "checkpoint-dir": ckpt }

const refusal = (values: Record<string, string>): string => {
  try {
    serveEngineFrom(values, "usage")
  } catch (e) {
    if (e instanceof UsageError) return e.message
    throw e
  }
  return "accepted"
}

describe("t1 serve --policy: engine flags", () => {
  it("the embedded TinyMoE by default; engine flags without an engine policy are refused", () => {
    expect(serveEngineFrom({}, "usage")).toBeUndefined()
    expect(serveEngineFrom({ policy: "tinymoe" }, "usage")).toBeUndefined()
    for (const flag of ["engine-url", "engine-model", "model-dir", "checkpoint-dir"])
      expect(refusal({ [flag]: "x" })).toBe(
        `--${flag} applies to inference engines: add --policy sglang or --policy vllm`,
      )
  })

  it("names what an engine policy lacks, and refuses bad values", () => {
    expect(refusal({ policy: "tgi" })).toBe('--policy must be tinymoe, sglang or vllm, got "tgi"')
    expect(refusal({ policy: "sglang" })).toMatch(
      /^--policy sglang needs --engine-url, --model-dir, --checkpoint-dir: /,
    )
    expect(refusal({ policy: "sglang", ...full, "checkpoint-dir": "" })).toMatch(
      /^--policy sglang needs --checkpoint-dir/,
    )
    expect(refusal({ policy: "sglang", ...full, "engine-url": `${url},127.0.0.1:1` })).toBe(
      '--engine-url must be http(s)://HOST:PORT[,…], got "127.0.0.1:1"',
    )
    expect(refusal({ policy: "vllm", ...full })).toMatch(/^--policy vllm needs --engine-model/)
    expect(refusal({ policy: "sglang", ...full, "engine-model": "m" })).toMatch(
      /^--engine-model names vLLM's served model/,
    )
    expect(refusal({ policy: "sglang", ...full, "model-dir": join(dir, "none") })).toBe(
      `--model-dir ${join(dir, "none")}: not a directory`,
    )
    expect(refusal({ policy: "sglang", ...full, "model-dir": ckpt })).toBe(
      `--model-dir ${ckpt}: no config.json (a Hugging Face model directory)`,
    )
    expect(refusal({ policy: "sglang", ...full, "checkpoint-dir": join(dir, "none") })).toBe(
      `--checkpoint-dir ${join(dir, "none")}: not a directory`,
    )
  })

  it("hands the sampler its engine, model directory and checkpoint directory", () => {
    expect(
      serveEngineFrom({ policy: "sglang", ...full, "engine-url": `${url}, ${url}1` }, "u"),
    ).toEqual({
      policy: "sglang",
      modelDir,
      sampler: {
        policy: "sglang",
        "engine-url": `${url},${url}1`,
        "model-dir": modelDir,
        "checkpoint-dir": ckpt,
      },
    })
    expect(
      serveEngineFrom({ policy: "vllm", ...full, "engine-model": "qwen" }, "u")?.sampler,
    ).toMatchObject({ policy: "vllm", "engine-model": "qwen" })
  })
})

describe("t1 serve --model-dir: the learner's starting weights", () => {
  const subjects = subjectsFor("serve-engine")
  const withBus = <A, E>(effect: Effect.Effect<A, E, Bus>) =>
    Effect.runPromise(Effect.provide(effect, MemoryBusLive()))

  it("stores the directory's weights as the default policy_ref, the same model", async () => {
    const model = writeModelDir(mkdtempSync(join(tmpdir(), "t1-serve-md-")), 7)
    const { read, resolved } = await withBus(
      Effect.gen(function* () {
        const bus = yield* Bus
        const read = yield* publishModelDir(bus, subjects, model.dir)
        const resolved = yield* resolvePolicyRef(bus, subjects, MODEL_DIR_POLICY_REF, 1)
        return { read, resolved }
      }),
    )
    expect(resolved.version).toBe(0n)
    expect(resolved.model.config).toEqual(read.config)
    expect(Array.from(resolved.model.params.embed.slice(0, 8))).toEqual(
      Array.from(read.model.params.embed.slice(0, 8)),
    )
  })

  it("refuses a directory whose config.json is another architecture, naming the file", async () => {
    const other = mkdtempSync(join(tmpdir(), "t1-serve-md-"))
    writeFileSync(join(other, "config.json"), JSON.stringify({ model_type: "llama" }))
    const error = await withBus(
      Effect.flip(Effect.flatMap(Bus, (bus) => publishModelDir(bus, subjects, other))),
    )
    expect(error.message).toMatch(new RegExp(`^--model-dir ${other}: .*config.json`))
  })
})
