/**
 * Two engine replicas for the weight-sync tests: SGLang or vLLM doubles (actors/sampler/policy/
 * engine-double.ts) on loopback HTTP servers, every turn one shell-block command in the bundled
 * tokenizer ending with the end-of-turn token, so TinyMoE can train on what they sample. The
 * SGLang doubles are launched on the directory of a train job's starting point (TinyMoE from
 * seed 0, `tinymoe:init`), so loads change the tensors they serve.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { afterAll, beforeAll } from "vitest"
import {
  type SglangDouble,
  sglangDouble,
  type VllmDouble,
  vllmDouble,
} from "../../actors/sampler/policy/engine-double.ts"
import { startTestServer, type TestServer } from "../../actors/sampler/policy/test-server.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate, encodeWeights, hfCheckpointFiles, TinyMoe } from "../../model/index.ts"

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

/** The model directory of a train job's starting point (`tinymoe:init`), Hugging Face names. */
export const initialModelDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), "t1-engine-launch-"))
  const model = TinyMoe.create({ config: { vocabSize: loadBundledTokenizer().vocabSize }, seed: 0 })
  for (const file of hfCheckpointFiles(encodeWeights(model))) {
    mkdirSync(dirname(join(dir, file.name)), { recursive: true })
    writeFileSync(join(dir, file.name), file.bytes)
  }
  return dir
}

export const useSglangReplicas = () => {
  const turn = shellTurn()
  const launchDir = initialModelDir()
  return useReplicas<SglangDouble>(() => sglangDouble(() => ({ tokens: turn }), { launchDir }))
}

export const useVllmReplicas = () => {
  const turn = shellTurn()
  return useReplicas<VllmDouble>(() => vllmDouble(VLLM_MODEL, () => ({ tokens: turn })))
}
