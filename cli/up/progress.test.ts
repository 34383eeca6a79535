import { afterEach, describe, expect, it, vi } from "vitest"
import { progressBar } from "./progress.ts"

describe("progressBar", () => {
  afterEach(() => vi.restoreAllMocks())

  it("draws one line per tenth off a terminal, and raises its total for work past it", () => {
    const lines: string[] = []
    vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
      lines.push(String(chunk))
      return true
    })
    const bar = progressBar("RL update 1/2", 4)
    for (let k = 1; k <= 6; k++) bar.update(k)
    bar.done("ok")
    expect(lines[0]).toContain("0/4")
    expect(lines.some((l) => l.includes("4/4"))).toBe(true)
    // A further wave: 6 episodes of an update sized for 4 fill the bar instead of breaking it.
    expect(lines.at(-1) ?? "").toContain("6/6  ok")
  })
})
