import {
  type NatsConnection,
  NoRespondersError,
  RequestError,
  TimeoutError,
} from "@nats-io/nats-core"

/** Nothing was sent: the connection was down and did not come back in time. */
export class NotConnected extends Error {
  constructor(waitedMs: number) {
    super(`not connected to NATS (waited ${waitedMs} ms for the reconnect)`)
  }
}

/** The connection dropped while the request was out: its reply can never arrive. */
export class ConnectionDropped extends Error {
  constructor() {
    super("the connection to NATS dropped before the reply; the request may or may not have landed")
  }
}

export interface ConnectionWatch {
  /** Resolves once the connection is up (at once when it is), else rejects with NotConnected. */
  readonly whenConnected: (waitMs: number) => Promise<void>
  /** Settles as `p` does, or rejects with ConnectionDropped at the next disconnect. */
  readonly untilDropped: <A>(p: Promise<A>) => Promise<A>
}

/**
 * Follows the connection's status. nats.js discards what was queued while disconnected when it
 * reconnects, and a reply to a request sent before a drop never comes, so without this a request
 * caught by a drop waits out its whole timeout.
 */
export const watchConnection = (nc: NatsConnection): ConnectionWatch => {
  let connected = !nc.isClosed()
  const onUp = new Set<() => void>()
  const onDrop = new Set<() => void>()
  const fire = (listeners: Set<() => void>) => {
    const all = [...listeners]
    listeners.clear()
    for (const f of all) f()
  }
  const status = nc.status()
  void (async () => {
    for await (const s of status) {
      if (s.type === "disconnect") {
        connected = false
        fire(onDrop)
      } else if (s.type === "reconnect") {
        connected = true
        fire(onUp)
      } else if (s.type === "close") {
        // Let waiters through: their request then fails with ClosedConnectionError.
        connected = true
        fire(onUp)
      }
    }
  })().catch(() => undefined)
  return {
    whenConnected: (waitMs) =>
      connected
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => {
            const up = () => {
              clearTimeout(timer)
              resolve()
            }
            const timer = setTimeout(() => {
              onUp.delete(up)
              reject(new NotConnected(waitMs))
            }, waitMs)
            onUp.add(up)
          }),
    untilDropped: (p) =>
      new Promise((resolve, reject) => {
        const dropped = () => reject(new ConnectionDropped())
        onDrop.add(dropped)
        p.then(resolve, reject).finally(() => onDrop.delete(dropped))
      }),
  }
}

/** Follows an error's causes a few levels (nats.js wraps what the server said). */
const causedBy = (cause: unknown, test: (e: unknown) => boolean): boolean => {
  let e = cause
  for (let depth = 0; depth < 4 && e !== undefined; depth++) {
    if (test(e)) return true
    e = e instanceof Error ? e.cause : undefined
  }
  return false
}

export const isNoResponders = (cause: unknown): boolean =>
  causedBy(
    cause,
    (e) => e instanceof NoRespondersError || (e instanceof RequestError && e.isNoResponders()),
  )

export const isTimeout = (cause: unknown): boolean =>
  causedBy(cause, (e) => e instanceof TimeoutError)
