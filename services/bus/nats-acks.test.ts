import { setImmediate as nextTurn } from "node:timers/promises"
import { describe, expect, it } from "vitest"
import { ackQueue } from "./nats-acks.ts"

describe("ackQueue", () => {
  it("hands the acks of one turn to the client together, in order, after the turn's microtasks", async () => {
    const acks = ackQueue()
    const sent: string[] = []
    acks.later(() => sent.push("ack 1"))
    await Promise.resolve()
    acks.later(() => sent.push("working 2"))
    acks.later(() => sent.push("ack 2"))
    // Still the same turn: nothing has gone to the client yet.
    expect(sent).toEqual([])
    await nextTurn()
    expect(sent).toEqual(["ack 1", "working 2", "ack 2"])
    acks.later(() => sent.push("nak 3"))
    await nextTurn()
    expect(sent).toEqual(["ack 1", "working 2", "ack 2", "nak 3"])
  })

  it("keeps going past an ack the client refuses (a closed connection: the server redelivers)", async () => {
    const acks = ackQueue()
    const sent: number[] = []
    acks.later(() => sent.push(1))
    acks.later(() => {
      throw new Error("connection closed")
    })
    acks.later(() => sent.push(3))
    await nextTurn()
    expect(sent).toEqual([1, 3])
  })

  it("flush sends what is queued at once, and the turn's scheduled run then has nothing left", async () => {
    const acks = ackQueue()
    const sent: number[] = []
    acks.later(() => sent.push(1))
    acks.flush()
    expect(sent).toEqual([1])
    await nextTurn()
    expect(sent).toEqual([1])
  })
})
