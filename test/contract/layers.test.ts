/**
 * The layering of DESIGN.md, checked on every import of the source (tests and fixtures aside):
 * proto and model at the bottom, then services, then tasks (a library), then actors, then cli
 * and bench. A module may import its own layer and those below it, never one above.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { describe, expect, it } from "vitest"

const ROOT = resolve(import.meta.dirname, "../..")
const RANK: Readonly<Record<string, number>> = {
  proto: 0,
  model: 0,
  services: 1,
  tasks: 2,
  actors: 3,
  cli: 4,
  bench: 4,
}

const sources = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (name === "node_modules" || name.startsWith(".") || name === "fixtures") return []
    if (statSync(path).isDirectory()) return sources(path)
    return /\.ts$/.test(name) && !/\.(test|contract|fixture)\.ts$/.test(name) ? [path] : []
  })

const layerOf = (path: string): string => relative(ROOT, path).split("/")[0] ?? ""

const violations = (): string[] => {
  const out: string[] = []
  for (const top of Object.keys(RANK)) {
    for (const file of sources(join(ROOT, top))) {
      const from = RANK[top] as number
      const text = readFileSync(file, "utf8")
      for (const m of text.matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g)) {
        const target = layerOf(resolve(dirname(file), m[1] as string))
        const to = RANK[target]
        if (to !== undefined && to > from)
          out.push(`${relative(ROOT, file)} (${top}) imports ${m[1]} (${target})`)
      }
    }
  }
  return out
}

describe("layering", () => {
  it("no module imports a layer above its own", () => {
    expect(violations()).toEqual([])
  })
})
