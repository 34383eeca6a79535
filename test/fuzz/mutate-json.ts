import type { Random } from "./random.ts"

/**
 * Structure-aware mutations of parsed documents (JSON, TOML, YAML and safetensors headers all
 * parse to plain objects): one node somewhere in the tree deleted, given the wrong type, an
 * extreme value, or a sibling; the result is serialised again by the caller.
 */

export type Doc = null | boolean | number | string | Doc[] | { [key: string]: Doc }

const isRecord = (v: Doc): v is { [key: string]: Doc } =>
  typeof v === "object" && v !== null && !Array.isArray(v)

/** Values of the wrong type or at the edge of their type's range. */
export const oddValue = (rng: Random): Doc =>
  rng.pick<() => Doc>([
    () => null,
    () => rng.bool(),
    () => 0,
    () => -1,
    () => 1.5,
    () => -0.5,
    () => 1e308,
    () => -1e308,
    () => 2 ** 53 + 2,
    () => 2 ** 31,
    () => 2 ** 32,
    () => 1e21,
    () => rng.int(1_000_000_000),
    () => "",
    () => "x".repeat(rng.pick([100, 10_000, 100_000])),
    () => rng.text(32),
    () => [],
    () => [rng.text(4), rng.int(10)],
    () => ({}),
    () => ({ [rng.text(4)]: rng.text(4) }),
    () => "../../../../etc/passwd",
    () => "\u0000",
  ])()

interface Slot {
  readonly parent: Doc[] | { [key: string]: Doc }
  readonly key: string | number
}

const slots = (doc: Doc, out: Slot[] = [], depth = 0): Slot[] => {
  if (depth > 8) return out
  if (Array.isArray(doc)) {
    doc.forEach((child, i) => {
      out.push({ parent: doc, key: i })
      slots(child, out, depth + 1)
    })
  } else if (isRecord(doc)) {
    for (const [key, child] of Object.entries(doc)) {
      out.push({ parent: doc, key })
      slots(child, out, depth + 1)
    }
  }
  return out
}

const clone = (doc: Doc): Doc => structuredClone(doc)

const setSlot = (slot: Slot, value: Doc): void => {
  if (Array.isArray(slot.parent)) slot.parent[slot.key as number] = value
  else slot.parent[slot.key as string] = value
}

const getSlot = (slot: Slot): Doc =>
  (Array.isArray(slot.parent)
    ? slot.parent[slot.key as number]
    : slot.parent[slot.key as string]) ?? null

const deleteSlot = (slot: Slot): void => {
  if (Array.isArray(slot.parent)) slot.parent.splice(slot.key as number, 1)
  else delete slot.parent[slot.key as string]
}

/** A copy of `doc` with one to three nodes changed. */
export const mutateDoc = (rng: Random, doc: Doc): Doc => {
  const out = clone(doc)
  const n = rng.range(1, 3)
  for (let i = 0; i < n; i++) {
    const all = slots(out)
    if (all.length === 0) return rng.bool() ? oddValue(rng) : out
    const slot = rng.pick(all)
    const current = getSlot(slot)
    switch (rng.int(5)) {
      case 0:
        deleteSlot(slot)
        break
      case 1:
        // a number nudged to a neighbour, a string to a near-miss
        setSlot(
          slot,
          typeof current === "number"
            ? rng.pick([current + 1, current - 1, -current, current * 1e6, current + 0.5])
            : typeof current === "string"
              ? rng.pick([`${current}${rng.char()}`, current.slice(0, -1), current.toUpperCase()])
              : oddValue(rng),
        )
        break
      case 2:
        // the parent gets another key (objects) or item (arrays)
        if (Array.isArray(slot.parent)) slot.parent.push(clone(current))
        // defineProperty: a key named __proto__ must become an own key, as JSON.parse makes it
        else
          Object.defineProperty(
            slot.parent,
            rng.pick([`${slot.key}_x`, rng.text(6), "__proto__"]),
            {
              value: clone(current),
              enumerable: true,
              writable: true,
              configurable: true,
            },
          )
        break
      default:
        setSlot(slot, oddValue(rng))
    }
  }
  return out
}
