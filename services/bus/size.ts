import type { Headers } from "./bus.ts"

const encoder = new TextEncoder()

/** Bytes a message occupies against max_payload: payload plus the NATS/1.0 header block. */
export const wireSize = (data: Uint8Array, headers?: Headers): number => {
  if (headers === undefined) return data.byteLength
  const entries = Object.entries(headers)
  if (entries.length === 0) return data.byteLength
  let size = "NATS/1.0\r\n\r\n".length
  for (const [k, v] of entries) size += encoder.encode(k).length + 2 + encoder.encode(v).length + 2
  return data.byteLength + size
}
