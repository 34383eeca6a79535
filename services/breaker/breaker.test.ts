import { describe, expect, it } from "vitest"
import { CircuitBreaker } from "./breaker.ts"

const options = { failures: 3, windowMs: 1000, cooldownMs: 5000 }

describe("CircuitBreaker", () => {
  it("opens after N consecutive failures within the window, and only then", () => {
    const b = new CircuitBreaker(options)
    expect(b.failure(0)).toBe(false)
    expect(b.failure(500)).toBe(false)
    expect(b.state(600)).toBe("closed")
    expect(b.failure(1400)).toBe(true)
    expect(b.state(1400)).toBe("open")
    expect(b.tryAcquire(1401)).toBe(false)
    expect(b.openCount()).toBe(1)
    expect(b.reopensAtMs()).toBe(6400)
  })

  it("starts the count again after a success or a gap longer than the window", () => {
    const b = new CircuitBreaker(options)
    b.failure(0)
    b.failure(100)
    b.success()
    b.failure(200)
    b.failure(300)
    expect(b.state(300)).toBe("closed")
    // 1001 ms after the last failure: a new run of one.
    expect(b.failure(1301)).toBe(false)
    expect(b.failure(1302)).toBe(false)
    expect(b.failure(1303)).toBe(true)
  })

  it("lets one probe through after the cool-down: success closes, failure re-opens", () => {
    const b = new CircuitBreaker(options)
    for (const t of [0, 1, 2]) b.failure(t)
    expect(b.state(5001)).toBe("open")
    expect(b.state(5002)).toBe("half_open")
    expect(b.tryAcquire(5002)).toBe(true)
    // One probe at a time.
    expect(b.tryAcquire(5003)).toBe(false)
    expect(b.failure(5010)).toBe(true)
    expect(b.state(5011)).toBe("open")
    expect(b.openCount()).toBe(2)
    expect(b.tryAcquire(10_010)).toBe(true)
    b.success()
    expect(b.state(10_011)).toBe("closed")
    expect(b.tryAcquire(10_011)).toBe(true)
    expect(b.tryAcquire(10_011)).toBe(true)
  })

  it("a probe that ends without a verdict frees the slot for another", () => {
    const b = new CircuitBreaker(options)
    for (const t of [0, 1, 2]) b.failure(t)
    expect(b.tryAcquire(6000)).toBe(true)
    b.release()
    expect(b.tryAcquire(6001)).toBe(true)
  })

  it("refuses options it cannot honour", () => {
    expect(() => new CircuitBreaker({ ...options, failures: 0 })).toThrow(/failures must be/)
    expect(() => new CircuitBreaker({ ...options, windowMs: 0 })).toThrow(/window must be/)
    expect(() => new CircuitBreaker({ ...options, cooldownMs: Number.NaN })).toThrow(/cool-down/)
  })
})
