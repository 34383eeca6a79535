/**
 * Readers for untyped JSON that name the exact field that is wrong (`choices[0].logprobs.tokens[3]`),
 * so a malformed engine answer fails with a message an operator can act on.
 */

/** A field of an engine's answer is missing, of the wrong type or inconsistent with another. */
export class ShapeError extends Error {
  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(`${path === "" ? "body" : path}: ${problem}`)
  }
}

/** `path` extended by an object key or an array index. */
export const child = (path: string, key: string | number): string =>
  typeof key === "number" ? `${path}[${key}]` : path === "" ? key : `${path}.${key}`

/** Short description of a value for error messages (never the whole of a large value). */
export const describe = (value: unknown): string => {
  if (value === undefined) return "nothing"
  if (value === null) return "null"
  if (Array.isArray(value)) return `an array of ${value.length}`
  if (typeof value === "string")
    return value.length > 40 ? `a string of ${value.length} chars` : JSON.stringify(value)
  if (typeof value === "object") return "an object"
  return `${typeof value} ${String(value)}`
}

const expected = (path: string, what: string, value: unknown): ShapeError =>
  new ShapeError(path, `expected ${what}, got ${describe(value)}`)

export const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

export const asRecord = (value: unknown, path: string): Readonly<Record<string, unknown>> => {
  if (!isRecord(value)) throw expected(path, "an object", value)
  return value
}

export const asArray = (value: unknown, path: string): ReadonlyArray<unknown> => {
  if (!Array.isArray(value)) throw expected(path, "an array", value)
  return value
}

export const asString = (value: unknown, path: string): string => {
  if (typeof value !== "string") throw expected(path, "a string", value)
  return value
}

/** A finite number (JSON has no NaN or infinities; engines send null for them). */
export const asNumber = (value: unknown, path: string): number => {
  if (typeof value !== "number" || !Number.isFinite(value)) throw expected(path, "a number", value)
  return value
}

/** A non-negative safe integer (token counts, lengths). */
export const asCount = (value: unknown, path: string): number => {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0)
    throw expected(path, "a non-negative integer", value)
  return value
}

/** A token id: an integer that fits the trajectory's uint32 ids. */
export const asTokenId = (value: unknown, path: string): number => {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 0xffff_ffff)
    throw expected(path, "a token id", value)
  return value
}

/** Token ids of an array field, checked one by one. */
export const asTokenIds = (value: unknown, path: string): Uint32Array => {
  const items = asArray(value, path)
  const ids = new Uint32Array(items.length)
  for (let i = 0; i < items.length; i++) ids[i] = asTokenId(items[i], child(path, i))
  return ids
}
