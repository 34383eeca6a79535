import { Effect } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { GenerateRequest, PolicyBackendShape, PolicyError } from "./backend.ts"
import type { RoutingLayout } from "./routing.ts"
import { type SglangOptions, sglangBackend } from "./sglang.ts"
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

const layout: RoutingLayout = { layers: 2, topK: 2, numExperts: 8 }

const int32Base64 = (values: ReadonlyArray<number>): string =>
  Buffer.from(new Int32Array(values).buffer).toString("base64")

type Answer = { output_ids?: unknown; meta_info: Record<string, unknown>; text?: string }

/**
 * A fake SGLang `/generate`: checks the request fields the adapter must send, then answers like
 * SGLang with a count-up continuation, its log-probs and int32 routing of every position but the
 * last. `edit` may spoil the answer.
 */
const fakeSglang =
  (edit: (answer: Answer) => void = () => {}) =>
  (request: Received): Reply => {
    if (request.method !== "POST" || request.path !== "/generate")
      return { status: 404, body: { detail: "Not Found" } }
    try {
      const body = request.body as Record<string, unknown>
      const ids = body.input_ids
      if (!Array.isArray(ids) || !ids.every(Number.isInteger))
        throw new BadRequest("input_ids must be ints")
      const params = body.sampling_params as Record<string, unknown>
      for (const key of ["temperature", "top_p", "top_k", "max_new_tokens"])
        if (typeof params[key] !== "number")
          throw new BadRequest(`sampling_params.${key} must be a number`)
      expectField(params, "skip_special_tokens", false)
      expectField(params, "no_stop_trim", true)
      expectField(body, "return_logprob", true)
      expectField(body, "logprob_start_len", -1)
      const stopIds = params.stop_token_ids as number[]
      const { tokens, logprobs, stopped } = countUp(
        ids as number[],
        params.max_new_tokens as number,
        stopIds,
      )
      const seqLen = ids.length + tokens.length
      const from =
        typeof body.routed_experts_start_len === "number" ? body.routed_experts_start_len : 0
      const answer: Answer = {
        text: "",
        output_ids: tokens,
        meta_info: {
          id: "0f3c",
          finish_reason:
            stopped === undefined
              ? { type: "length", length: tokens.length }
              : { type: "stop", matched: stopped },
          prompt_tokens: ids.length,
          weight_version: "default",
          output_token_logprobs: tokens.map((token, i) => [logprobs[i], token, null]),
          completion_tokens: tokens.length,
          cached_tokens: 0,
          ...(body.return_routed_experts === true
            ? {
                routed_experts: int32Base64(
                  fakeExperts(from, seqLen - 1, layout.layers, layout.topK, layout.numExperts),
                ),
              }
            : {}),
          e2e_latency: 0.01,
        },
      }
      edit(answer)
      return { status: 200, body: answer }
    } catch (error) {
      if (error instanceof BadRequest)
        return { status: 400, body: { error: { message: error.message } } }
      throw error
    }
  }

let server: TestServer
beforeAll(async () => {
  server = await startTestServer(fakeSglang())
})
afterAll(() => server.close())
beforeEach(() => server.reset(fakeSglang()))

const backend = (options: Partial<SglangOptions> = {}): PolicyBackendShape =>
  sglangBackend({ baseUrl: server.url, contextLength: 64, routing: layout, ...options })

const turn = (
  ids: number[],
  overrides: Partial<GenerateRequest["sampling"]> = {},
  sessionId = "s1",
): GenerateRequest => ({
  sessionId,
  ids: Uint32Array.from(ids),
  sampling: { temperature: 0.7, topP: 0.9, maxTokens: 8, stopTokenIds: [15], ...overrides },
})

const samplingParams = (index: number) =>
  server.sent(index).sampling_params as Record<string, unknown>

const generate = (policy: PolicyBackendShape, request: GenerateRequest) =>
  Effect.runPromise(policy.generate(request))
const failure = (policy: PolicyBackendShape, request: GenerateRequest): Promise<PolicyError> =>
  Effect.runPromise(Effect.flip(policy.generate(request)))

describe("sglangBackend", () => {
  it("sends the context as input_ids with the turn's sampling and reads tokens, log-probs and routing", async () => {
    const result = await generate(backend(), turn([10, 11, 12], { seed: 42, topK: 20 }))

    expect(server.received).toHaveLength(1)
    const sent = server.received[0]?.body
    expect(sent).toEqual({
      input_ids: [10, 11, 12],
      sampling_params: {
        temperature: 0.7,
        top_p: 0.9,
        top_k: 20,
        min_p: 0,
        repetition_penalty: 1,
        frequency_penalty: 0,
        presence_penalty: 0,
        max_new_tokens: 8,
        stop_token_ids: [15],
        sampling_seed: 42,
        skip_special_tokens: false,
        no_stop_trim: true,
      },
      return_logprob: true,
      logprob_start_len: -1,
      return_routed_experts: true,
      stream: false,
    })
    expect(Array.from(result.tokens)).toEqual([13, 14, 15])
    expect(Array.from(result.logprobs)).toEqual([-0.125, -0.25, -0.375])
    expect(result.finishReason).toBe("stop_token")
    expect(result.policyVersion).toBe(0n)
    // 3 prompt + 3 generated positions, the last generated one not routed.
    expect(result.routing).toMatchObject({ start: 0, layers: 2, topK: 2, numExperts: 8 })
    expect(result.routing?.rows).toBeInstanceOf(Uint8Array)
    expect(Array.from(result.routing?.rows ?? [])).toEqual(fakeExperts(0, 5, 2, 2, 8))
  })

  it("keeps the stop token as the last generated token", async () => {
    const result = await generate(backend(), turn([1, 2], { stopTokenIds: [4, 99] }))
    expect(Array.from(result.tokens)).toEqual([3, 4])
    expect(result.finishReason).toBe("stop_token")
  })

  it("sends top_k -1 and no seed when the turn leaves them unset", async () => {
    await generate(backend(), turn([1]))
    const params = samplingParams(0)
    expect(params.top_k).toBe(-1)
    expect("sampling_seed" in params).toBe(false)
  })

  it("decodes a hand-built base64 int32 routing payload into [positions, layers, topK] rows", async () => {
    // Prompt [5, 6] and one generated token: positions 0 and 1 are routed, 1 layer × top-2.
    // int32 LE [1, 2, 3, 0] = 01000000 02000000 03000000 00000000.
    server.reset(() => ({
      status: 200,
      body: {
        text: "",
        output_ids: [7],
        meta_info: {
          finish_reason: { type: "length", length: 1 },
          prompt_tokens: 2,
          completion_tokens: 1,
          output_token_logprobs: [[-0.5, 7, null]],
          routed_experts: "AQAAAAIAAAADAAAAAAAAAA==",
        },
      },
    }))
    const policy = backend({ routing: { layers: 1, topK: 2, numExperts: 4 } })
    const result = await generate(policy, turn([5, 6], { maxTokens: 1 }))
    expect(result.routing).toEqual({
      start: 0,
      rows: Uint8Array.from([1, 2, 3, 0]),
      layers: 1,
      topK: 2,
      numExperts: 4,
    })
    expect(result.finishReason).toBe("max_tokens")
  })

  it("keeps the MoE layers' rows of a model with dense layers (DeepSeek-V3: 3 dense of 61) and drops the dense ones'", async () => {
    const withDense: RoutingLayout = { layers: 3, topK: 2, numExperts: 8, moeLayers: [1, 2] }
    server.reset(
      fakeSglang((answer) => {
        const seq =
          (answer.meta_info.prompt_tokens as number) +
          (answer.meta_info.completion_tokens as number)
        const ids: number[] = []
        // Every decoder layer, as SGLang captures them; the dense layer 0 holds a placeholder.
        for (let p = 0; p < seq - 1; p++)
          for (let l = 0; l < 3; l++)
            for (let k = 0; k < 2; k++) ids.push(l === 0 ? -1 : (p + 3 * l + k) % 8)
        answer.meta_info.routed_experts = int32Base64(ids)
      }),
    )
    const r = await generate(backend({ routing: withDense }), turn([1, 2, 3]))
    const routing = r.routing
    if (routing === undefined) throw new Error("no routing")
    expect([routing.layers, routing.topK, routing.start]).toEqual([2, 2, 0])
    // Position 0: layer 1 → experts 3, 4; layer 2 → 6, 7.
    expect([...routing.rows.subarray(0, 4)]).toEqual([3, 4, 6, 7])
    expect(routing.rows.length).toBe((3 + r.tokens.length - 1) * 2 * 2)
    expect(() => backend({ routing: { ...withDense, moeLayers: [2, 1] } })).toThrow(
      /routing.moeLayers must ascend within \[0, 3\)/,
    )
  })

  it("reads uint16 routing named by routed_experts_dtype and keeps it uint16 above 256 experts", async () => {
    // uint16 LE [300, 2, 5, 299] for 2 positions × 2 layers × top-1.
    server.reset(() => ({
      status: 200,
      body: {
        output_ids: [7],
        meta_info: {
          finish_reason: { type: "length", length: 1 },
          output_token_logprobs: [[-0.5, 7, null]],
          routed_experts: "LAECAAUAKwE=",
          routed_experts_dtype: "uint16",
        },
      },
    }))
    const policy = backend({ routing: { layers: 2, topK: 1, numExperts: 320 } })
    const result = await generate(policy, turn([5, 6], { maxTokens: 1 }))
    expect(result.routing?.rows).toEqual(Uint16Array.from([300, 2, 5, 299]))
  })

  it("maps a length stop to max_tokens, or to context_full when the context is used up", async () => {
    const capped = await generate(backend(), turn([1, 2, 3], { maxTokens: 2, stopTokenIds: [] }))
    expect(capped.finishReason).toBe("max_tokens")

    const small = backend({ contextLength: 5 })
    const full = await generate(small, turn([1, 2, 3], { maxTokens: 10, stopTokenIds: [] }))
    const params = samplingParams(1)
    expect(params.max_new_tokens).toBe(2)
    expect(Array.from(full.tokens)).toEqual([4, 5])
    expect(full.finishReason).toBe("context_full")
  })

  it("rejects a context longer than contextLength before sending anything", async () => {
    const error = await failure(backend({ contextLength: 4 }), turn([1, 2, 3, 4, 5]))
    expect(error.retryable).toBe(false)
    expect(error.message).toContain("5 tokens")
    expect(server.received).toHaveLength(0)
  })

  it("answers a context that is exactly full with an empty context_full turn, without a request", async () => {
    const result = await generate(backend({ contextLength: 3 }), turn([1, 2, 3]))
    expect(result.tokens).toHaveLength(0)
    expect(result.finishReason).toBe("context_full")
    expect(server.received).toHaveLength(0)
  })

  it("fails a 4xx without retry, with the server's message", async () => {
    server.reset(() => ({
      status: 400,
      body: {
        error: {
          message: "The input (70 tokens) is longer than the model's context length (64 tokens).",
        },
      },
    }))
    const error = await failure(backend(), turn([1, 2]))
    expect(error.retryable).toBe(false)
    expect(error.backend).toBe("sglang")
    expect(error.message).toContain("400")
    expect(error.message).toContain("longer than the model's context length")
  })

  it("reads the message of FastAPI detail and bare message error bodies", async () => {
    server.reset(() => ({
      status: 422,
      body: { detail: [{ loc: ["body", "input_ids"], msg: "field required" }] },
    }))
    expect((await failure(backend(), turn([1]))).message).toContain(
      "body.input_ids: field required",
    )
    server.reset(() => ({
      status: 400,
      body: { message: "sampling_seed requires --enable-deterministic-inference" },
    }))
    expect((await failure(backend(), turn([1]))).message).toContain("sampling_seed requires")
  })

  it("fails 503 and 429 as retryable", async () => {
    server.reset(() => ({ status: 503, body: { error: { message: "server is restarting" } } }))
    const unavailable = await failure(backend(), turn([1]))
    expect(unavailable.retryable).toBe(true)
    expect(unavailable.message).toContain("server is restarting")
    server.reset(() => ({ status: 429, body: "Too Many Requests" }))
    const busy = await failure(backend(), turn([1]))
    expect(busy.retryable).toBe(true)
    expect(busy.message).toContain("Too Many Requests")
  })

  it("gives up after the request's timeout with a retryable error", async () => {
    server.reset(() => "hang")
    const started = Date.now()
    const error = await failure(backend(), { ...turn([1]), timeoutMs: 100 })
    expect(error.retryable).toBe(true)
    expect(error.message).toContain("timed out after 100 ms")
    expect(Date.now() - started).toBeLessThan(2_000)
  })

  it("fails a refused connection as retryable", async () => {
    const port = await closedPort()
    const error = await failure(backend({ baseUrl: `http://127.0.0.1:${port}` }), turn([1]))
    expect(error.retryable).toBe(true)
    expect(error.message).toContain("ECONNREFUSED")
  })

  it("fails an aborted request: retryable unless SGLang blamed the request", async () => {
    server.reset(
      fakeSglang((answer) => {
        answer.meta_info.finish_reason = { type: "abort", message: "Abort before prefill" }
      }),
    )
    const aborted = await failure(backend(), turn([1]))
    expect(aborted.retryable).toBe(true)
    expect(aborted.message).toContain("Abort before prefill")

    server.reset(
      fakeSglang((answer) => {
        answer.meta_info.finish_reason = {
          type: "abort",
          message: "input too long",
          status_code: 400,
        }
      }),
    )
    expect((await failure(backend(), turn([1]))).retryable).toBe(false)
  })

  describe("malformed answers fail without retry and name the field", () => {
    const spoiled = async (edit: (answer: Answer) => void): Promise<PolicyError> => {
      server.reset(fakeSglang(edit))
      const error = await failure(backend(), turn([10, 11, 12]))
      expect(error.retryable).toBe(false)
      return error
    }

    it("missing output_ids", async () => {
      const error = await spoiled((answer) => {
        delete answer.output_ids
      })
      expect(error.message).toContain("output_ids: expected an array, got nothing")
    })

    it("routed_experts of the wrong length", async () => {
      const error = await spoiled((answer) => {
        answer.meta_info.routed_experts = int32Base64(fakeExperts(0, 4, 2, 2, 8))
      })
      expect(error.message).toContain("meta_info.routed_experts")
      expect(error.message).toContain("5 positions")
    })

    it("an expert id out of range", async () => {
      const error = await spoiled((answer) => {
        const ids = fakeExperts(0, 5, 2, 2, 8)
        ids[6] = 8
        answer.meta_info.routed_experts = int32Base64(ids)
      })
      expect(error.message).toContain(
        "expert id 8 at position 1, layer 1, slot 0 is outside [0, 8)",
      )
    })

    it("routed_experts that are not base64", async () => {
      const error = await spoiled((answer) => {
        answer.meta_info.routed_experts = "not base64!"
      })
      expect(error.message).toContain("meta_info.routed_experts: expected standard base64")
    })

    it("routing asked for but missing", async () => {
      const error = await spoiled((answer) => {
        delete answer.meta_info.routed_experts
      })
      expect(error.message).toContain("--enable-return-routed-experts")
    })

    it("log-probs out of step with the output ids", async () => {
      const error = await spoiled((answer) => {
        answer.meta_info.output_token_logprobs = [
          [-0.1, 13, null],
          [-0.2, 99, null],
          [-0.3, 15, null],
        ]
      })
      expect(error.message).toContain(
        "meta_info.output_token_logprobs[1][1]: token 99 but output_ids[1] is 14",
      )
    })

    it("a null log-prob", async () => {
      const error = await spoiled((answer) => {
        answer.meta_info.output_token_logprobs = [
          [null, 13, null],
          [-0.2, 14, null],
          [-0.3, 15, null],
        ]
      })
      expect(error.message).toContain(
        "meta_info.output_token_logprobs[0][0]: expected a number, got null",
      )
    })

    it("an unknown finish reason", async () => {
      const error = await spoiled((answer) => {
        answer.meta_info.finish_reason = { type: "eos" }
      })
      expect(error.message).toContain("meta_info.finish_reason.type")
    })

    it("a prompt the engine counted differently", async () => {
      const error = await spoiled((answer) => {
        answer.meta_info.prompt_tokens = 2
      })
      expect(error.message).toContain("the engine saw 2 prompt tokens, 3 were sent")
    })

    it("a body that is not JSON", async () => {
      server.reset(() => ({ status: 200, body: "<html>gateway</html>" }))
      const error = await failure(backend(), turn([1]))
      expect(error.retryable).toBe(false)
      expect(error.message).toContain("not JSON")
    })
  })

  it("takes the weight version from meta_info when it is an integer, else from policyVersion", async () => {
    const policy = backend({ policyVersion: () => 5n })
    expect((await generate(policy, turn([1]))).policyVersion).toBe(5n)
    server.reset(
      fakeSglang((answer) => {
        answer.meta_info.weight_version = "12"
      }),
    )
    expect((await generate(policy, turn([1]))).policyVersion).toBe(12n)
  })

  it("takes the oldest run of meta_info.weight_versions as the turn's version (a turn resumed on newer weights)", async () => {
    server.reset(
      fakeSglang((answer) => {
        answer.meta_info.weight_version = "4"
        answer.meta_info.weight_versions = [
          { version: "3", start: 0, end: 2 },
          { version: "4", start: 2, end: 8 },
        ]
      }),
    )
    expect((await generate(backend(), turn([1]))).policyVersion).toBe(3n)
  })

  it("without weight_versions, holds a bridged turn to the version loaded when it was sent", async () => {
    server.reset(
      fakeSglang((answer) => {
        answer.meta_info.weight_version = "3"
      }),
    )
    const bridged = backend({
      policyVersion: () => 2n,
      confirmWeights: { loaded: () => 2n, onMismatch: () => {} },
    })
    expect((await generate(bridged, turn([1]))).policyVersion).toBe(2n)
    expect((await generate(backend(), turn([1]))).policyVersion).toBe(3n)
  })

  it('after a load, refuses a turn generated on the launch weights ("default") as retryable and reports it; before any load they are the fallback version', async () => {
    server.reset(
      fakeSglang((answer) => {
        answer.meta_info.weight_version = "default"
        answer.meta_info.weight_versions = [{ version: "default", start: 0, end: 8 }]
      }),
    )
    const reported: string[] = []
    let loaded: bigint | undefined
    const bridged = backend({
      policyVersion: () => loaded ?? 0n,
      confirmWeights: { loaded: () => loaded, onMismatch: (r) => reported.push(r) },
    })
    expect((await generate(bridged, turn([1]))).policyVersion).toBe(0n)
    loaded = 2n
    const error = await failure(bridged, turn([1]))
    expect(error.retryable).toBe(true)
    expect(error.message).toMatch(/weights "default" where v2 was loaded/)
    expect(reported).toEqual(["default"])
  })

  it("fails weight_versions runs that do not tile the output, naming the field", async () => {
    server.reset(
      fakeSglang((answer) => {
        answer.meta_info.weight_versions = [{ version: "3", start: 0, end: 5 }]
      }),
    )
    const error = await failure(backend(), turn([1]))
    expect(error.retryable).toBe(false)
    expect(error.message).toMatch(
      /meta_info\.weight_versions: the runs cover 5 tokens, output_ids holds 8/,
    )
  })

  it("neither asks for nor reports routing without a routing layout", async () => {
    const result = await generate(backend({ routing: undefined }), turn([1, 2]))
    expect(result.routing).toBeUndefined()
    expect("return_routed_experts" in server.sent(0)).toBe(false)
  })

  it("with incrementalRouting asks a session only for positions it was not told yet", async () => {
    const policy = backend({ incrementalRouting: true })
    const first = await generate(policy, turn([10, 11, 12], { stopTokenIds: [14] }))
    expect(first.routing?.start).toBe(0)
    // The next turn extends the context with an observation; positions 0..3 were reported.
    const second = await generate(
      policy,
      turn([10, 11, 12, 13, 14, 20, 21], { stopTokenIds: [23] }),
    )
    expect(server.sent(1).routed_experts_start_len).toBe(4)
    expect(second.routing?.start).toBe(4)
    expect(Array.from(second.routing?.rows ?? [])).toEqual(fakeExperts(4, 8, 2, 2, 8))

    await Effect.runPromise(policy.release("s1"))
    const fresh = await generate(policy, turn([10, 11, 12]))
    expect("routed_experts_start_len" in server.sent(2)).toBe(false)
    expect(fresh.routing?.start).toBe(0)
  })

  it("accepts full routing from a server that ignores routed_experts_start_len", async () => {
    server.reset((request) => {
      const { routed_experts_start_len: _, ...rest } = request.body as Record<string, unknown>
      return fakeSglang()({ ...request, body: rest })
    })
    const policy = backend({ incrementalRouting: true })
    await generate(policy, turn([10, 11, 12], { stopTokenIds: [14] }))
    const second = await generate(policy, turn([10, 11, 12, 13, 14, 20], { stopTokenIds: [22] }))
    expect(second.routing?.start).toBe(0)
    expect(second.routing?.rows).toHaveLength(7 * 2 * 2)
  })

  it("sends the configured headers", async () => {
    await generate(backend({ headers: { authorization: "Bearer t0k" } }), turn([1]))
    expect(server.received[0]?.headers.authorization).toBe("Bearer t0k")
  })
})
