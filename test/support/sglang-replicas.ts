/**
 * Two SGLang engine replicas for the weight-sync tests: doubles (actors/sampler/policy/
 * engine-double.ts) on loopback HTTP servers, every turn one shell-block command in the bundled
 * tokenizer ending with the end-of-turn token, so TinyMoE can train on what they sample.
 */
import { afterAll, beforeAll } from "vitest"
import { type SglangDouble, sglangDouble } from "../../actors/sampler/policy/engine-double.ts"
import { startTestServer, type TestServer } from "../../actors/sampler/policy/test-server.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate } from "../../model/index.ts"

export interface SglangReplica {
  readonly double: SglangDouble
  /** Its server; `url` is what --engine-url names. */
  server: TestServer
}

/** Two replicas, started before the file's tests and closed after them. */
export const useSglangReplicas = (): readonly [SglangReplica, SglangReplica] => {
  const tokenizer = loadBundledTokenizer()
  const turn = [
    ...tokenizer.encode("```bash\necho hi\n```"),
    ...new ChatTemplate(tokenizer).endOfTurn,
  ]
  const make = () => ({ double: sglangDouble(() => ({ tokens: turn })) }) as SglangReplica
  const replicas = [make(), make()] as const
  beforeAll(async () => {
    for (const r of replicas) r.server = await startTestServer(r.double.handler)
  })
  afterAll(() => Promise.all(replicas.map((r) => r.server.close())))
  return replicas
}
