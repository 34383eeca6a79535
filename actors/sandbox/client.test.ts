import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { makeMemoryBus, subjectsFor } from "../../services/bus/index.ts"
import { sandboxClient } from "./client.ts"

describe("sandbox client", () => {
  it("an undecodable reply is a SandboxProtocolError whose message names the operation and the cause (found by npm run test:fuzz)", async () => {
    const error = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* makeMemoryBus()
          const liar = {
            ...bus,
            request: (subject: string) =>
              Effect.succeed({
                subject,
                data: Uint8Array.of(0x0a, 0x05),
                headers: {},
                reply: undefined,
              }),
          }
          return yield* Effect.flip(sandboxClient(liar, subjectsFor("t")).exec("sb-1", "true"))
        }),
      ),
    )
    expect(error._tag).toBe("SandboxProtocolError")
    expect(error.message).toMatch(/^sandbox exec: undecodable reply: .*premature EOF/)
  })
})
