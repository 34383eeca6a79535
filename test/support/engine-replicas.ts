/**
 * Two engine replicas for the weight-sync tests: SGLang or vLLM doubles (actors/sampler/policy/
 * engine-double.ts) on loopback HTTP servers, every turn one shell-block command in the bundled
 * tokenizer ending with the end-of-turn token, so TinyMoE can train on what they sample.
 */
import { afterAll, beforeAll } from "vitest"
import {
  type SglangDouble,
  sglangDouble,
  type VllmDouble,
  vllmDouble,
} from "../../actors/sampler/policy/engine-double.ts"
import { startTestServer, type TestServer } from "../../actors/sampler/policy/test-server.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate } from "../../model/index.ts"

export interface EngineReplica<D> {
  readonly double: D
  /** Its server; `url` is what --engine-url names. */
  server: TestServer
}

/** The model name the vLLM doubles serve (`--engine-model`). */
export const VLLM_MODEL = "tinymoe"

const shellTurn = () => {
  const tokenizer = loadBundledTokenizer()
  return [...tokenizer.encode("```bash\necho hi\n```"), ...new ChatTemplate(tokenizer).endOfTurn]
}

/** Two replicas, started before the file's tests and closed after them. */
const useReplicas = <D extends { readonly handler: Parameters<typeof startTestServer>[0] }>(
  make: () => D,
): readonly [EngineReplica<D>, EngineReplica<D>] => {
  const replicas = [{ double: make() }, { double: make() }] as [EngineReplica<D>, EngineReplica<D>]
  beforeAll(async () => {
    for (const r of replicas) r.server = await startTestServer(r.double.handler)
  })
  afterAll(() => Promise.all(replicas.map((r) => r.server.close())))
  return replicas
}

export const useSglangReplicas = () => {
  const turn = shellTurn()
  return useReplicas<SglangDouble>(() => sglangDouble(() => ({ tokens: turn })))
}

export const useVllmReplicas = () => {
  const turn = shellTurn()
  return useReplicas<VllmDouble>(() => vllmDouble(VLLM_MODEL, () => ({ tokens: turn })))
}
