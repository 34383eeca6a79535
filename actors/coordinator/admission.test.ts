import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { type AdmissionInput, AdmissionInputError, admissionCapacity } from "./admission.ts"

const base: AdmissionInput = {
  maxConcurrent: 100,
  running: 0,
  maxStaleness: 0,
  policyVersion: 0,
  batchSize: 4,
  accepted: 0,
}

describe("admissionCapacity", () => {
  it("with η = 0 admits exactly the current version's batch (synchronous RL)", () => {
    expect(admissionCapacity(base)).toBe(4)
    expect(admissionCapacity({ ...base, running: 3 })).toBe(1)
    expect(admissionCapacity({ ...base, running: 4 })).toBe(0)
    expect(admissionCapacity({ ...base, running: 2, accepted: 2 })).toBe(0)
    // After the step: version 1 may sample the next batch.
    expect(admissionCapacity({ ...base, policyVersion: 1, accepted: 4 })).toBe(4)
  })

  it("with η = 2 runs up to η + 1 batches ahead", () => {
    expect(admissionCapacity({ ...base, maxStaleness: 2 })).toBe(12)
    // (2 + 3 + 1) · 4 − (17 + 6) = 1
    expect(
      admissionCapacity({ ...base, maxStaleness: 2, policyVersion: 3, accepted: 17, running: 6 }),
    ).toBe(1)
    expect(
      admissionCapacity({ ...base, maxStaleness: 2, policyVersion: 3, accepted: 18, running: 6 }),
    ).toBe(0)
  })

  it("is capped by the free concurrency", () => {
    expect(admissionCapacity({ ...base, maxStaleness: 10, maxConcurrent: 8, running: 5 })).toBe(3)
    expect(admissionCapacity({ ...base, maxStaleness: 10, maxConcurrent: 8, running: 8 })).toBe(0)
    expect(admissionCapacity({ ...base, maxConcurrent: 0 })).toBe(0)
  })

  it("is never negative (over-admitted, or more running than allowed)", () => {
    expect(admissionCapacity({ ...base, accepted: 9 })).toBe(0)
    expect(admissionCapacity({ ...base, maxConcurrent: 2, running: 3 })).toBe(0)
  })

  it("rejects counts that are negative or fractional", () => {
    expect(() => admissionCapacity({ ...base, running: -1 })).toThrow(AdmissionInputError)
    expect(() => admissionCapacity({ ...base, batchSize: 1.5 })).toThrow("batchSize")
    expect(() => admissionCapacity({ ...base, maxStaleness: Number.NaN })).toThrow("maxStaleness")
  })

  it("keeps every trajectory at most η versions stale when trained in admission order, and uses the whole η", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 6 }),
        (eta, batchSize, maxConcurrent, finishPerTick) => {
          // FIFO simulation: each tick admits what the capacity allows (tagged with the current
          // version), the oldest running episodes finish, and the learner trains on full batches.
          let version = 0
          const running: number[] = []
          const buffer: number[] = []
          let accepted = 0
          let worst = 0
          for (let tick = 0; tick < 200; tick++) {
            const cap = admissionCapacity({
              maxConcurrent,
              running: running.length,
              maxStaleness: eta,
              policyVersion: version,
              batchSize,
              accepted,
            })
            for (let i = 0; i < cap; i++) running.push(version)
            for (const v of running.splice(0, finishPerTick)) {
              buffer.push(v)
              accepted++
            }
            while (buffer.length >= batchSize) {
              for (const v of buffer.splice(0, batchSize)) worst = Math.max(worst, version - v)
              version++
            }
          }
          expect(version).toBeGreaterThan(0) // never deadlocks
          expect(worst).toBeLessThanOrEqual(eta)
        },
      ),
      { numRuns: 200 },
    )
  })

  it("reaches staleness η exactly when the sampler is ahead of a slow learner", () => {
    // Sampling finishes everything at once; the learner takes one batch per tick.
    const eta = 2
    const batchSize = 3
    let version = 0
    let accepted = 0
    const buffer: number[] = []
    let worst = 0
    for (let tick = 0; tick < 50; tick++) {
      const cap = admissionCapacity({
        maxConcurrent: 1000,
        running: 0,
        maxStaleness: eta,
        policyVersion: version,
        batchSize,
        accepted,
      })
      for (let i = 0; i < cap; i++) buffer.push(version)
      accepted += cap
      if (buffer.length >= batchSize) {
        for (const v of buffer.splice(0, batchSize)) worst = Math.max(worst, version - v)
        version++
      }
    }
    expect(version).toBe(50)
    expect(worst).toBe(eta)
  })
})
