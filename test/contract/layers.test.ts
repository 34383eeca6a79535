/**
 * The layering of DESIGN.md, checked on every import of the source (tests and fixtures aside):
 * proto and model at the bottom, then services, then tasks (a library), then actors, then cli
 * and bench. A module may import its own layer and those below it, never one above. And each
 * actor folder has a surface: code outside `actors/<name>/` imports only `actors/<name>/index.ts`
 * (the actor registry, `actors/index.ts`, also hosts each pooled actor's `hosted.ts`), and the
 * folders use each other without cycles, so any surface can be the first one loaded.
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

/** The registry's hosting entries: a folder's surface leaves its hosting out (see actors/index.ts). */
const REGISTRY = join(ROOT, "actors", "index.ts")
const HOSTED = /^actors\/[a-z-]+\/hosted\.ts$/

const internalImports = (): string[] => {
  const out: string[] = []
  for (const top of Object.keys(RANK)) {
    for (const file of sources(join(ROOT, top))) {
      const own = relative(ROOT, file).split("/")
      const ownFolder = own[0] === "actors" && own.length > 2 ? own[1] : undefined
      const text = readFileSync(file, "utf8")
      for (const m of text.matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g)) {
        const target = relative(ROOT, resolve(dirname(file), m[1] as string))
        const parts = target.split("/")
        if (parts[0] !== "actors" || parts.length < 3 || parts[1] === ownFolder) continue
        if (parts.length === 3 && parts[2] === "index.ts") continue
        if (file === REGISTRY && HOSTED.test(target)) continue
        out.push(`${relative(ROOT, file)} imports ${target}`)
      }
    }
  }
  return out
}

/** Which actor folders each actor folder imports values from (type-only imports aside). */
const folderGraph = (): Map<string, Set<string>> => {
  const graph = new Map<string, Set<string>>()
  for (const file of sources(join(ROOT, "actors"))) {
    const own = relative(ROOT, file).split("/")
    if (own.length < 3) continue
    const from = own[1] as string
    const text = readFileSync(file, "utf8")
    for (const m of text.matchAll(/^(?!import type)[^\n]*from\s*"(\.{1,2}\/[^"]+)"/gm)) {
      const parts = relative(ROOT, resolve(dirname(file), m[1] as string)).split("/")
      const to = parts[1]
      if (parts[0] !== "actors" || parts.length < 3 || to === undefined || to === from) continue
      graph.set(from, (graph.get(from) ?? new Set()).add(to))
    }
  }
  return graph
}

/** One cycle of the graph as a path (a → b → … → a), or undefined when there is none. */
const findCycle = (graph: Map<string, Set<string>>): string[] | undefined => {
  const state = new Map<string, "open" | "done">()
  const path: string[] = []
  const visit = (node: string): string[] | undefined => {
    if (state.get(node) === "done") return undefined
    if (state.get(node) === "open") return [...path.slice(path.indexOf(node)), node]
    state.set(node, "open")
    path.push(node)
    for (const next of graph.get(node) ?? []) {
      const cycle = visit(next)
      if (cycle !== undefined) return cycle
    }
    path.pop()
    state.set(node, "done")
    return undefined
  }
  for (const node of graph.keys()) {
    const cycle = visit(node)
    if (cycle !== undefined) return cycle
  }
  return undefined
}

describe("layering", () => {
  it("no module imports a layer above its own", () => {
    expect(violations()).toEqual([])
  })

  it("nothing outside an actor folder imports its internals, only its index.ts", () => {
    expect(internalImports()).toEqual([])
  })

  it("actor folders use each other without cycles (each surface can load first)", () => {
    const graph = folderGraph()
    expect(graph.get("learner")).toContain("sampler")
    expect(findCycle(graph)).toBeUndefined()
    // The check itself finds a cycle when there is one.
    expect(
      findCycle(
        new Map([
          ["a", new Set(["b"])],
          ["b", new Set(["a"])],
        ]),
      ),
    ).toEqual(["a", "b", "a"])
  })
})
