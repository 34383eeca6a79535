import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"

const run = promisify(execFile)
const fixture = fileURLToPath(new URL("./first-start.fixture.ts", import.meta.url))
const tsx = fileURLToPath(new URL("../../../node_modules/.bin/tsx", import.meta.url))

describe("a process whose only work is its first sandbox", () => {
  // The process helper that starts sandboxes' processes is never what keeps a process alive;
  // before it answered, nothing did, and such a process ended silently at its first create.
  it("stays alive until the sandbox answers (the helper's first answer is waited for)", async () => {
    const { stdout } = await run(tsx, [fixture], { timeout: 60_000 })
    expect(stdout).toBe("hi\n")
  }, 90_000)
})
