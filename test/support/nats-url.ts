import { afterAll, beforeAll } from "vitest"
import { type NatsServerProcess, startNatsServer } from "./nats-server.ts"

/**
 * The NATS server a test file talks to: `T1_TEST_NATS_URL` when set (CI starts its own), else a
 * private server started before the file's tests and stopped after them. Call at the top level of
 * a test file; read `.url` inside tests.
 */
export const useNatsServer = (): { readonly url: string } => {
  const state = { url: process.env.T1_TEST_NATS_URL ?? "" }
  let server: NatsServerProcess | undefined
  beforeAll(async () => {
    if (state.url === "") {
      server = await startNatsServer()
      state.url = server.url
    }
  })
  afterAll(async () => {
    await server?.stop()
  })
  return state
}
