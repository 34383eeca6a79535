import { afterAll, beforeAll } from "vitest"
import { NatsBusLive } from "../../services/bus/index.ts"
import { type NatsServerProcess, startNatsServer } from "../../test/support/nats-server.ts"
import { bufferContract } from "./buffer.contract.ts"

// CI points this at its own nats-server; elsewhere the suite starts a private one.
let url = process.env.T1_TEST_NATS_URL ?? ""
let server: NatsServerProcess | undefined

beforeAll(async () => {
  if (url === "") {
    server = await startNatsServer()
    url = server.url
  }
})
afterAll(async () => {
  await server?.stop()
})

bufferContract("NATS", () => NatsBusLive({ servers: url, name: "t1-buffer-test" }))
