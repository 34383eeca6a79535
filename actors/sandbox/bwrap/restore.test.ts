import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { restorePristine, upperTouchesPatterns } from "./restore.ts"

const SITES = ["/usr/local/lib/python3*/dist-packages", "/usr/lib/python3/dist-packages"]

const dirs: string[] = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "t1-restore-"))
  dirs.push(dir)
  return dir
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe("upperTouchesPatterns", () => {
  it("an agent that wrote only outside /usr touched none of the site directories", async () => {
    const upper = tempDir()
    mkdirSync(join(upper, "app"))
    writeFileSync(join(upper, "app", "out.txt"), "1")
    mkdirSync(join(upper, "tmp"))
    expect(await upperTouchesPatterns(upper, SITES)).toBe(false)
  })

  it("any entry named as a pattern's first directory counts: a directory, a link, a file", async () => {
    for (const make of [
      (at: string) => mkdirSync(at),
      (at: string) => symlinkSync("/elsewhere", at),
      // what overlayfs leaves for a removed /usr is a character device; any non-directory will do
      (at: string) => writeFileSync(at, ""),
    ]) {
      const upper = tempDir()
      make(join(upper, "usr"))
      expect(await upperTouchesPatterns(upper, SITES)).toBe(true)
    }
  })

  it("a pattern's first component may hold a *", async () => {
    const upper = tempDir()
    mkdirSync(join(upper, "opt-python"))
    expect(await upperTouchesPatterns(upper, ["/opt*/site"])).toBe(true)
    expect(await upperTouchesPatterns(upper, ["/op/site", "/usr/lib"])).toBe(false)
    // `.` in a pattern is a dot, not any character
    expect(await upperTouchesPatterns(upper, ["/opt.python/site"])).toBe(false)
  })
})

describe("restorePristine", () => {
  it("an untouched /usr is not walked: no program runs (a python that does not exist is not started)", async () => {
    const upper = tempDir()
    mkdirSync(join(upper, "app"))
    expect(await restorePristine("/no/such/python", upper, tempDir(), SITES)).toEqual({
      restored: [],
      removed: [],
    })
  })

  it("a touched /usr runs restore.py, which removes what the agent added there", async () => {
    const upper = tempDir()
    const lower = tempDir()
    mkdirSync(join(lower, "usr", "lib", "python3", "dist-packages"), { recursive: true })
    mkdirSync(join(upper, "usr", "lib", "python3", "dist-packages"), { recursive: true })
    writeFileSync(join(upper, "usr", "lib", "python3", "dist-packages", "evil.py"), "x")
    const report = await restorePristine("python3", upper, lower, SITES)
    expect(report).toEqual({ restored: [], removed: ["/usr/lib/python3/dist-packages/evil.py"] })
  })

  it("a python that cannot run is an error, never an empty report", async () => {
    const upper = tempDir()
    mkdirSync(join(upper, "usr"))
    await expect(restorePristine("/no/such/python", upper, tempDir(), SITES)).rejects.toThrow(
      /restoring the pristine paths failed/,
    )
  })
})
