/**
 * Acknowledgements handed to the client together. nats.js writes whatever its outgoing buffer
 * holds at the end of the microtask in which the first command went in; a consumer that acks
 * each item after an asynchronous step (every Stream consumer) therefore sends one socket write
 * per ack, where a callback consumer acking inside the client's read loop sends one per read.
 * Queued here and given to the client once per event-loop turn, the acks of a turn share one
 * write (bench:stream measured ~45 ms of socket writes per 300 MB consumed one write per ack).
 *
 * Order is kept: ack, nak, working and term of every item go through the same queue.
 */
export interface AckQueue {
  /** Runs `send` (a client ack call) later in this event-loop turn, after those before it. */
  readonly later: (send: () => void) => void
  /** Runs everything queued now (before the connection drains or closes). */
  readonly flush: () => void
}

export const ackQueue = (): AckQueue => {
  let queued: Array<() => void> = []
  let scheduled = false
  const flush = () => {
    scheduled = false
    const sends = queued
    queued = []
    for (const send of sends) {
      try {
        send()
      } catch {
        // A closed or draining connection refuses the ack; the server redelivers the item
        // after its ack wait, which is what an ack lost on the wire would do too.
      }
    }
  }
  return {
    later: (send) => {
      queued.push(send)
      if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    },
    flush,
  }
}
