import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { BUNDLE, bundlePlan, writeBundle } from "./bundle.ts"

const committed = fileURLToPath(new URL(".", import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), "t1-bundle-test-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const files = (root: string, sub: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name)
      if (e.isDirectory()) walk(p)
      else out[relative(root, p)] = readFileSync(p, "utf8")
    }
  }
  walk(join(root, sub))
  return out
}

describe("the bundled corpus", () => {
  it("plans 24 train tasks and 8 eval tasks from 3 held-out families", () => {
    const plan = bundlePlan()
    expect(plan.train).toHaveLength(24)
    expect(plan.eval).toHaveLength(BUNDLE.evalTasks)
    expect(plan.families.heldOutFamilies).toHaveLength(3)
    const trainFamilies = new Set(plan.train.map((e) => e.family.name))
    expect(plan.eval.filter((e) => trainFamilies.has(e.family.name))).toEqual([])
    expect(new Set(plan.eval.map((e) => e.difficulty)).size).toBe(3)
  })

  it("is what npm run tasks:bundle generates, byte for byte, and decontaminated", async () => {
    const result = await Effect.runPromise(writeBundle(scratch))
    expect(result.report.passed).toBe(true)
    expect(result.split.violations).toEqual([])
    for (const sub of ["train", "eval"]) expect(files(committed, sub)).toEqual(files(scratch, sub))
    expect(readFileSync(join(committed, "README.md"), "utf8")).toBe(result.readme)
  })
})
