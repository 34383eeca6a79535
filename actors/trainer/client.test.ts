import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as grpc from "@grpc/grpc-js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MemoryBusLive } from "../../services/bus/index.ts"
import {
  type GatewayHarness,
  gatewayHarness,
  opensslAvailable,
  selfSignedCertificate,
} from "../../services/gateway/gateway.fixture.ts"
import type { GatewayCallError } from "../../services/gateway/index.ts"
import { trainerServiceClient } from "./client.ts"

let h: GatewayHarness
let dir = ""
beforeAll(async () => {
  h = await gatewayHarness(MemoryBusLive())
  dir = mkdtempSync(join(tmpdir(), "t1-trainer-tls-"))
})
afterAll(async () => {
  await h.close()
  rmSync(dir, { recursive: true, force: true })
})

describe.skipIf(!opensslAvailable)("trainer client over TLS", () => {
  it("checks the certificate against tls.serverName when given", async () => {
    // A certificate for a DNS name only, reached at 127.0.0.1: only the override makes it match.
    const { certFile, keyFile } = selfSignedCertificate(dir, "DNS:trainer.t1.test")
    const gw = await h.start({ tls: { certFile, keyFile } })
    const ca = readFileSync(certFile)
    // This gateway serves no TrainerService: a call that got past the TLS handshake is
    // UNIMPLEMENTED, one whose handshake failed UNAVAILABLE.
    const claim = async (tls: { ca: Uint8Array; serverName?: string }) => {
      const client = trainerServiceClient(gw.endpoint.address, { tls, timeoutMs: 2000 })
      try {
        await client.claimJob({})
        return grpc.status.OK
      } catch (error) {
        return (error as GatewayCallError).code
      } finally {
        client.close()
      }
    }
    expect(await claim({ ca, serverName: "trainer.t1.test" })).toBe(grpc.status.UNIMPLEMENTED)
    expect(await claim({ ca })).toBe(grpc.status.UNAVAILABLE)
  })
})
