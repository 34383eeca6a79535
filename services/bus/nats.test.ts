import { afterAll, beforeAll } from "vitest"
import { type NatsServerProcess, startNatsServer } from "../../test/support/nats-server.ts"
import { busContract } from "./bus.contract.ts"
import { NatsBusLive } from "./nats.ts"

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

busContract("NATS", () => NatsBusLive({ servers: url, name: "t1-contract-test" }))
