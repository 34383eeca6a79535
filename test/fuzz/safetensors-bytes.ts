import type { Doc } from "./mutate-json.ts"

/**
 * A safetensors file split into its header (parsed) and data section, and put back together
 * with a correct header length, so that header mutations reach the decoder's field checks
 * rather than stopping at the length prefix.
 */
export interface SafetensorsParts {
  readonly header: Doc
  readonly data: Uint8Array
}

export const splitSafetensors = (bytes: Uint8Array): SafetensorsParts => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const length = Number(view.getBigUint64(0, true))
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + length))) as Doc
  return { header, data: bytes.subarray(8 + length) }
}

export const joinSafetensors = (header: Doc, data: Uint8Array): Uint8Array => {
  const json = new TextEncoder().encode(JSON.stringify(header))
  const out = new Uint8Array(8 + json.byteLength + data.byteLength)
  new DataView(out.buffer).setBigUint64(0, BigInt(json.byteLength), true)
  out.set(json, 8)
  out.set(data, 8 + json.byteLength)
  return out
}
