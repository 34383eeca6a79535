import { Effect } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { GenerateRequest, PolicyBackendShape, PolicyError } from "./backend.ts"
import type { RoutingLayout } from "./routing.ts"
import {
  BadRequest,
  closedPort,
  countUp,
  expectField,
  fakeExperts,
  type Received,
  type Reply,
  startTestServer,
  type TestServer,
} from "./test-server.ts"
import { type VllmOptions, vllmBackend } from "./vllm.ts"

const layout: RoutingLayout = { layers: 2, topK: 2, numExperts: 8 }
const MODEL = "tiny-moe"

/** What `np.save` writes for a C-order array: magic, v1.0, header padded to 64 bytes, data. */
const npyBase64 = (
  descr: "|u1" | "<u2" | "<i4",
  shape: ReadonlyArray<number>,
  values: ReadonlyArray<number>,
): string => {
  const dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(", ")}${shape.length === 1 ? "," : ""}), }`
  const padded = `${dict.padEnd(Math.ceil((10 + dict.length + 1) / 64) * 64 - 10 - 1, " ")}\n`
  const header = Buffer.alloc(10)
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]).copy(header)
  header.writeUInt16LE(padded.length, 8)
  const data =
    descr === "|u1"
      ? Buffer.from(Uint8Array.from(values))
      : descr === "<u2"
        ? Buffer.from(Uint16Array.from(values).buffer)
        : Buffer.from(Int32Array.from(values).buffer)
  return Buffer.concat([header, Buffer.from(padded, "latin1"), data]).toString("base64")
}

type Choice = Record<string, unknown> & { logprobs: Record<string, unknown> }
type Answer = Record<string, unknown> & { choices: Choice[] }

/**
 * A fake vLLM `/v1/completions` for token prompts: checks the fields the adapter must send, then
 * answers like vLLM with a count-up continuation, "token_id:<n>" tokens, log-probs, token_ids and
 * (when `routing`) `.npy` routing of every position but the last. `edit` may spoil the answer.
 */
const fakeVllm =
  (options: { readonly routing?: boolean; readonly edit?: (answer: Answer) => void } = {}) =>
  (request: Received): Reply => {
    if (request.method !== "POST" || request.path !== "/v1/completions")
      return { status: 404, body: { detail: "Not Found" } }
    try {
      const body = request.body as Record<string, unknown>
      expectField(body, "model", MODEL)
      const ids = body.prompt
      if (!Array.isArray(ids) || !ids.every(Number.isInteger))
        throw new BadRequest("prompt must be token ids")
      for (const key of ["temperature", "top_p", "top_k", "max_tokens"])
        if (typeof body[key] !== "number") throw new BadRequest(`${key} must be a number`)
      expectField(body, "logprobs", 1)
      expectField(body, "return_tokens_as_token_ids", true)
      expectField(body, "skip_special_tokens", false)
      expectField(body, "include_stop_str_in_output", true)
      expectField(body, "stream", false)
      const { tokens, logprobs, stopped } = countUp(
        ids as number[],
        body.max_tokens as number,
        body.stop_token_ids as number[],
      )
      const seqLen = ids.length + tokens.length
      const from =
        typeof body.routed_experts_prompt_start === "number" ? body.routed_experts_prompt_start : 0
      const answer: Answer = {
        id: "cmpl-7d1e",
        object: "text_completion",
        created: 1_760_000_000,
        model: MODEL,
        choices: [
          {
            index: 0,
            text: "",
            logprobs: {
              text_offset: tokens.map((_, i) => i * 10),
              token_logprobs: logprobs,
              tokens: tokens.map((token) => `token_id:${token}`),
              top_logprobs: tokens.map((token, i) => ({ [`token_id:${token}`]: logprobs[i] })),
            },
            finish_reason: stopped === undefined ? "length" : "stop",
            stop_reason: stopped ?? null,
            prompt_logprobs: null,
            prompt_token_ids: null,
            token_ids: body.return_token_ids === true ? tokens : null,
            routed_experts:
              options.routing === true
                ? npyBase64(
                    "|u1",
                    [seqLen - 1 - from, layout.layers, layout.topK],
                    fakeExperts(from, seqLen - 1, layout.layers, layout.topK, layout.numExperts),
                  )
                : null,
          },
        ],
        usage: {
          prompt_tokens: ids.length,
          total_tokens: seqLen,
          completion_tokens: tokens.length,
        },
      }
      options.edit?.(answer)
      return { status: 200, body: answer }
    } catch (error) {
      if (error instanceof BadRequest)
        return {
          status: 400,
          body: {
            error: { message: error.message, type: "BadRequestError", param: null, code: 400 },
          },
        }
      throw error
    }
  }

let server: TestServer
beforeAll(async () => {
  server = await startTestServer(fakeVllm({ routing: true }))
})
afterAll(() => server.close())
beforeEach(() => server.reset(fakeVllm({ routing: true })))

const backend = (options: Partial<VllmOptions> = {}): PolicyBackendShape =>
  vllmBackend({ baseUrl: server.url, model: MODEL, contextLength: 64, routing: layout, ...options })

const turn = (
  ids: number[],
  overrides: Partial<GenerateRequest["sampling"]> = {},
  sessionId = "s1",
): GenerateRequest => ({
  sessionId,
  ids: Uint32Array.from(ids),
  sampling: { temperature: 1, topP: 1, maxTokens: 8, stopTokenIds: [15], ...overrides },
})

const generate = (policy: PolicyBackendShape, request: GenerateRequest) =>
  Effect.runPromise(policy.generate(request))
const failure = (policy: PolicyBackendShape, request: GenerateRequest): Promise<PolicyError> =>
  Effect.runPromise(Effect.flip(policy.generate(request)))

const first = (answer: Answer): Choice => {
  const choice = answer.choices[0]
  if (choice === undefined) throw new Error("no choice")
  return choice
}

describe("vllmBackend", () => {
  it("sends token ids as the prompt and reads tokens, log-probs and routing", async () => {
    const result = await generate(
      backend({ policyVersion: () => 3n }),
      turn([10, 11, 12], { seed: 7, topK: 40 }),
    )

    expect(server.received).toHaveLength(1)
    expect(server.received[0]?.body).toEqual({
      model: MODEL,
      prompt: [10, 11, 12],
      max_tokens: 8,
      temperature: 1,
      top_p: 1,
      top_k: 40,
      min_p: 0,
      repetition_penalty: 1,
      frequency_penalty: 0,
      presence_penalty: 0,
      seed: 7,
      stop_token_ids: [15],
      n: 1,
      stream: false,
      echo: false,
      logprobs: 1,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
      skip_special_tokens: false,
      include_stop_str_in_output: true,
    })
    expect(Array.from(result.tokens)).toEqual([13, 14, 15])
    expect(Array.from(result.logprobs)).toEqual([-0.125, -0.25, -0.375])
    expect(result.finishReason).toBe("stop_token")
    expect(result.policyVersion).toBe(3n)
    expect(result.routing).toMatchObject({ start: 0, layers: 2, topK: 2, numExperts: 8 })
    expect(Array.from(result.routing?.rows ?? [])).toEqual(fakeExperts(0, 5, 2, 2, 8))
  })

  it("keeps the stop token and reads token ids from logprobs.tokens when token_ids is absent", async () => {
    server.reset(
      fakeVllm({
        routing: true,
        edit: (answer) => {
          delete first(answer).token_ids
        },
      }),
    )
    const result = await generate(backend(), turn([1, 2], { stopTokenIds: [4] }))
    expect(Array.from(result.tokens)).toEqual([3, 4])
    expect(result.finishReason).toBe("stop_token")
  })

  it("decodes routing saved by numpy (uint8, uint16 and int32 .npy)", async () => {
    // Generated with np.save(io.BytesIO(), np.array(..., dtype=...)) and base64-encoded.
    const cases = [
      {
        npy: "k05VTVBZAQB2AHsnZGVzY3InOiAnfHUxJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsIDIsIDIpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoBAgMAAgMBAA==",
        layout: { layers: 2, topK: 2, numExperts: 4 },
        rows: Uint8Array.from([1, 2, 3, 0, 2, 3, 1, 0]),
      },
      {
        npy: "k05VTVBZAQB2AHsnZGVzY3InOiAnPHUyJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsIDEsIDIpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAosAQIABQArAQ==",
        layout: { layers: 1, topK: 2, numExperts: 512 },
        rows: Uint16Array.from([300, 2, 5, 299]),
      },
      {
        npy: "k05VTVBZAQB2AHsnZGVzY3InOiAnPGk0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsIDEsIDIpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoBAAAAAgAAAAMAAAAAAAAA",
        layout: { layers: 1, topK: 2, numExperts: 4 },
        rows: Uint8Array.from([1, 2, 3, 0]),
      },
    ]
    for (const example of cases) {
      // Prompt [5, 6] and one generated token: positions 0 and 1 carry routing.
      server.reset(
        fakeVllm({
          edit: (answer) => {
            first(answer).routed_experts = example.npy
          },
        }),
      )
      const result = await generate(
        backend({ routing: example.layout }),
        turn([5, 6], { maxTokens: 1 }),
      )
      expect(result.routing).toEqual({ start: 0, rows: example.rows, ...example.layout })
    }
  })

  it("maps length to max_tokens, or to context_full when the context is used up", async () => {
    const capped = await generate(backend(), turn([1, 2, 3], { maxTokens: 2, stopTokenIds: [] }))
    expect(capped.finishReason).toBe("max_tokens")

    const full = await generate(
      backend({ contextLength: 6 }),
      turn([1, 2, 3], { maxTokens: 100, stopTokenIds: [] }),
    )
    expect(server.sent(1).max_tokens).toBe(3)
    expect(full.finishReason).toBe("context_full")
  })

  it("rejects a context longer than contextLength before sending anything", async () => {
    const error = await failure(backend({ contextLength: 2 }), turn([1, 2, 3]))
    expect(error.retryable).toBe(false)
    expect(error.backend).toBe("vllm")
    expect(server.received).toHaveLength(0)
  })

  it("fails a 4xx without retry, with the server's message (current and older error bodies)", async () => {
    server.reset(() => ({
      status: 400,
      body: {
        error: {
          message:
            "This model's maximum context length is 64 tokens. However, you requested 70 tokens.",
          type: "BadRequestError",
          param: null,
          code: 400,
        },
      },
    }))
    const error = await failure(backend(), turn([1]))
    expect(error.retryable).toBe(false)
    expect(error.message).toContain("maximum context length is 64 tokens")

    server.reset(() => ({
      status: 404,
      body: {
        object: "error",
        message: "The model `other` does not exist.",
        type: "NotFoundError",
        code: 404,
      },
    }))
    const missing = await failure(backend(), turn([1]))
    expect(missing.retryable).toBe(false)
    expect(missing.message).toContain("does not exist")
  })

  it("fails 503 and 429 as retryable", async () => {
    server.reset(() => ({ status: 503, body: { error: { message: "engine is sleeping" } } }))
    expect((await failure(backend(), turn([1]))).retryable).toBe(true)
    server.reset(() => ({ status: 429, body: { error: { message: "rate limited" } } }))
    const busy = await failure(backend(), turn([1]))
    expect(busy.retryable).toBe(true)
    expect(busy.message).toContain("rate limited")
  })

  it("gives up after the request's timeout with a retryable error", async () => {
    server.reset(() => "hang")
    const error = await failure(backend(), { ...turn([1]), timeoutMs: 100 })
    expect(error.retryable).toBe(true)
    expect(error.message).toContain("timed out")
  })

  it("fails a refused connection as retryable", async () => {
    const port = await closedPort()
    const error = await failure(backend({ baseUrl: `http://127.0.0.1:${port}/` }), turn([1]))
    expect(error.retryable).toBe(true)
    expect(error.message).toContain("ECONNREFUSED")
  })

  it("fails an aborted completion as retryable", async () => {
    server.reset(
      fakeVllm({
        edit: (answer) => {
          first(answer).finish_reason = "abort"
        },
      }),
    )
    expect((await failure(backend({ routing: undefined }), turn([1]))).retryable).toBe(true)
  })

  describe("malformed answers fail without retry and name the field", () => {
    const spoiled = async (edit: (answer: Answer) => void): Promise<PolicyError> => {
      server.reset(fakeVllm({ routing: true, edit }))
      const error = await failure(backend(), turn([10, 11, 12]))
      expect(error.retryable).toBe(false)
      return error
    }

    it("no choices", async () => {
      const error = await spoiled((answer) => {
        delete (answer as Record<string, unknown>).choices
      })
      expect(error.message).toContain("choices: expected an array, got nothing")
    })

    it("tokens that are not token_id:<n>", async () => {
      const error = await spoiled((answer) => {
        first(answer).logprobs.tokens = ["token_id:13", "Hello", "token_id:15"]
      })
      expect(error.message).toContain('choices[0].logprobs.tokens[1]: expected "token_id:<n>"')
    })

    it("token_ids that disagree with logprobs.tokens", async () => {
      const error = await spoiled((answer) => {
        first(answer).token_ids = [13, 14, 16]
      })
      expect(error.message).toContain(
        "choices[0].logprobs.tokens[2]: token 15 but token_ids[2] is 16",
      )
    })

    it("a missing log-prob", async () => {
      const error = await spoiled((answer) => {
        first(answer).logprobs.token_logprobs = [-0.1, null, -0.3]
      })
      expect(error.message).toContain(
        "choices[0].logprobs.token_logprobs[1]: expected a number, got null",
      )
    })

    it("routed_experts with too few positions", async () => {
      const error = await spoiled((answer) => {
        first(answer).routed_experts = npyBase64("|u1", [4, 2, 2], fakeExperts(0, 4, 2, 2, 8))
      })
      expect(error.message).toContain("choices[0].routed_experts")
      expect(error.message).toContain("routing for 5 positions")
    })

    it("routed_experts of another layout", async () => {
      const error = await spoiled((answer) => {
        first(answer).routed_experts = npyBase64("|u1", [5, 4], fakeExperts(0, 5, 2, 2, 8))
      })
      expect(error.message).toContain("expected shape (positions, 2, 2), got (5, 4)")
    })

    it("an expert id out of range", async () => {
      const error = await spoiled((answer) => {
        const ids = fakeExperts(0, 5, 2, 2, 8)
        ids[19] = 200
        first(answer).routed_experts = npyBase64("|u1", [5, 2, 2], ids)
      })
      expect(error.message).toContain(
        "expert id 200 at position 4, layer 1, slot 1 is outside [0, 8)",
      )
    })

    it("routed_experts that are raw bytes, not .npy", async () => {
      const error = await spoiled((answer) => {
        first(answer).routed_experts = Buffer.from(
          Int32Array.from(fakeExperts(0, 5, 2, 2, 8)).buffer,
        ).toString("base64")
      })
      expect(error.message).toContain("choices[0].routed_experts: expected a .npy array")
    })

    it("routing asked for but missing", async () => {
      const error = await spoiled((answer) => {
        first(answer).routed_experts = null
      })
      expect(error.message).toContain("--enable-return-routed-experts")
    })

    it("a prompt the engine counted differently", async () => {
      const error = await spoiled((answer) => {
        answer.usage = { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 }
      })
      expect(error.message).toContain("usage.prompt_tokens")
    })
  })

  it("reports no routing when no layout is configured", async () => {
    server.reset(fakeVllm({ routing: false }))
    const result = await generate(backend({ routing: undefined }), turn([1, 2]))
    expect(result.routing).toBeUndefined()
    expect(result.policyVersion).toBe(0n)
  })

  it("with incrementalRouting asks a session only for positions it was not told yet", async () => {
    const policy = backend({ incrementalRouting: true })
    await generate(policy, turn([10, 11, 12], { stopTokenIds: [14] }))
    const second = await generate(policy, turn([10, 11, 12, 13, 14, 30], { stopTokenIds: [32] }))
    expect(server.sent(1).routed_experts_prompt_start).toBe(4)
    expect(second.routing?.start).toBe(4)
    expect(Array.from(second.routing?.rows ?? [])).toEqual(fakeExperts(4, 7, 2, 2, 8))
    // Another session starts from its own beginning.
    const other = await generate(policy, turn([10, 11, 12], {}, "s2"))
    expect(other.routing?.start).toBe(0)
  })
})
