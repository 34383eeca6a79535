/**
 * The PyTorch reference learner's own tests (clients/python/tests/test_*.py: the Qwen3-MoE
 * forward against an independent computation, checkpoint directories, t1's weights files, the
 * contract), run by their pytest-free runner so that CI, which installs Debian's python3-torch
 * but not pytest, runs them.
 */
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { torchPython } from "../support/python.ts"

const RUNNER = fileURLToPath(new URL("../../clients/python/tests/run.py", import.meta.url))

describe.skipIf(torchPython === undefined)("clients/python tests", () => {
  it("every test_* function passes", () => {
    const run = spawnSync(torchPython as string, [RUNNER], { encoding: "utf8", timeout: 120_000 })
    const summary = run.stdout.trim().split("\n").at(-1) ?? ""
    console.log(`clients/python: ${summary}`)
    expect(run.stdout).not.toContain("FAIL ")
    expect(run.status).toBe(0)
    expect(summary).toMatch(/^\d+ passed, 0 failed$/)
  }, 150_000)
})
