import { Effect, Exit, Scope } from "effect"
import { type BusMessage, type BusShape, makeMemoryBus } from "../../services/bus/index.ts"

/**
 * One in-memory bus for a target's whole run (created in setup, closed in teardown), and views
 * of it whose requests are all answered with the bytes under test: how a client's reply
 * decoding is reached without a server that could only send valid replies.
 */
export class FuzzBus {
  private scope: Scope.Closeable | undefined
  private current: BusShape | undefined

  get bus(): BusShape {
    if (this.current === undefined) throw new Error("FuzzBus used before setup")
    return this.current
  }

  readonly setup = async (): Promise<void> => {
    const scope = Effect.runSync(Scope.make())
    this.scope = scope
    this.current = await Effect.runPromise(Scope.provide(scope)(makeMemoryBus()))
  }

  readonly teardown = async (): Promise<void> => {
    if (this.scope !== undefined) await Effect.runPromise(Scope.close(this.scope, Exit.void))
    this.scope = undefined
    this.current = undefined
  }

  /** The bus, with every request answered by `data` (and `headers`). */
  replying(data: Uint8Array, headers: Readonly<Record<string, string>> = {}): BusShape {
    return {
      ...this.bus,
      request: (subject) =>
        Effect.succeed<BusMessage>({ subject, data, headers, reply: undefined }),
    }
  }
}
