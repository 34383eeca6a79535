import { spawnSync } from "node:child_process"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { CappedOutput, truncationMarker } from "./capped-output.ts"
import { FrameScanner, newMarker, quoteAnsiC } from "./framing.ts"

const concat = (parts: ReadonlyArray<Uint8Array>) => new Uint8Array(Buffer.concat(parts))
const ascii = (s: string) => new TextEncoder().encode(s)

/** Cuts `bytes` at the given fractions, into pieces fed one by one like pipe reads. */
const split = (bytes: Uint8Array, cuts: ReadonlyArray<number>) => {
  const points = [...new Set(cuts.map((c) => Math.floor(c * bytes.length)))].sort((a, b) => a - b)
  const pieces: Uint8Array[] = []
  let from = 0
  for (const p of points) {
    pieces.push(bytes.subarray(from, p))
    from = p
  }
  pieces.push(bytes.subarray(from))
  return pieces
}

/** Output that looks like trailers: pieces of the real needle, other nonces, bare prefixes. */
const trailerLike = (needle: Uint8Array) =>
  fc.oneof(
    fc.uint8Array({ maxLength: 64 }),
    fc.integer({ min: 1, max: needle.length - 1 }).map((n) => needle.subarray(0, n)),
    fc.constant(ascii("\n__t1_")),
    fc.constant(ascii("\n__t1_0123456789abcdef0123456789abcdef 0\n")),
    fc.constant(needle.subarray(1)),
  )

const scan = (scanner: FrameScanner, pieces: ReadonlyArray<Uint8Array>) => {
  const content: Uint8Array[] = []
  const trailers: Array<{ index: number; values: ReadonlyArray<number> }> = []
  let rest: Uint8Array | undefined
  for (const piece of pieces) {
    if (rest !== undefined) {
      rest = concat([rest, piece])
      continue
    }
    rest = scanner.feed(piece, {
      content: (b) => content.push(Uint8Array.from(b)),
      trailer: (index, values) => {
        trailers.push({ index, values })
        return true
      },
    })
  }
  return { content: concat(content), trailers, rest }
}

describe("quoteAnsiC", () => {
  it("gives bash exactly the bytes it quotes", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 0, maxLength: 200 }).map((b) => b.map((x) => (x === 0 ? 1 : x))),
        (bytes) => {
          const out = spawnSync("bash", ["--norc", "-c", `printf %s ${quoteAnsiC(bytes)}`])
          expect([...out.stdout]).toEqual([...bytes])
        },
      ),
      { numRuns: 60 },
    )
  })

  it("leaves plain words readable", () => {
    expect(quoteAnsiC(ascii("ls -la /app"))).toBe("$'ls -la /app'")
    expect(quoteAnsiC(ascii("a'b\\c\n"))).toBe("$'a\\x27b\\x5cc\\x0a'")
  })
})

describe("FrameScanner", () => {
  it("passes any output through exactly and finds the trailer, however the stream is cut", () => {
    const marker = newMarker()
    fc.assert(
      fc.property(
        fc.array(trailerLike(marker.needle), { maxLength: 12 }),
        fc.integer({ min: -1, max: 255 }),
        fc.uint8Array({ maxLength: 40 }),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 8 }),
        (parts, code, after, cuts) => {
          const output = concat(parts)
          // The real needle is a secret nonce: it never appears in a command's own output.
          fc.pre(Buffer.from(output).indexOf(marker.needle) === -1)
          const stream = concat([output, marker.needle, ascii(`${code}\n`), after])
          const got = scan(new FrameScanner([marker.needle]), split(stream, cuts))
          expect([...got.content]).toEqual([...output])
          expect(got.trailers).toEqual([{ index: 0, values: [code] }])
          expect([...(got.rest ?? [])]).toEqual([...after])
        },
      ),
      { numRuns: 500 },
    )
  })

  it("tells two needles apart and reports each trailer's numbers", () => {
    const [a, b] = [newMarker(), newMarker()]
    const scanner = new FrameScanner([a.needle, b.needle])
    const seen: Array<[number, ReadonlyArray<number>]> = []
    const content: Uint8Array[] = []
    const rest = scanner.feed(
      concat([
        ascii("x"),
        a.needle,
        ascii("130\n"),
        ascii("y"),
        b.needle,
        ascii("130 7\n"),
        ascii("z"),
      ]),
      {
        content: (bytes) => content.push(Uint8Array.from(bytes)),
        trailer: (index, values) => {
          seen.push([index, values])
          return index === 1
        },
      },
    )
    expect(seen).toEqual([
      [0, [130]],
      [1, [130, 7]],
    ])
    expect(new TextDecoder().decode(concat(content))).toBe("xy")
    expect(new TextDecoder().decode(rest)).toBe("z")
  })

  it("holds back only a possible trailer start, so output flows as it comes", () => {
    const marker = newMarker()
    const scanner = new FrameScanner([marker.needle])
    const content: Uint8Array[] = []
    const handler = {
      content: (b: Uint8Array) => content.push(Uint8Array.from(b)),
      trailer: () => true,
    }
    scanner.feed(ascii("no newline at all"), handler)
    expect(concat(content).length).toBe(17)
    scanner.feed(ascii("line\n__t1"), handler)
    expect(new TextDecoder().decode(concat(content))).toBe("no newline at allline")
    expect(new TextDecoder().decode(scanner.drain())).toBe("\n__t1")
  })

  it("returns a malformed trailer to the output", () => {
    const marker = newMarker()
    const scanner = new FrameScanner([marker.needle])
    const got = scan(scanner, [concat([ascii("a"), marker.needle, ascii("oops\nb")])])
    expect(got.trailers).toEqual([])
    const all = concat([got.content, scanner.drain()])
    expect([...all]).toEqual([...concat([ascii("a"), marker.needle, ascii("oops\nb")])])
  })
})

describe("CappedOutput", () => {
  const reference = (all: Uint8Array, limit: number) => {
    if (all.length <= limit) return all
    const head = Math.floor(limit / 2)
    const tail = limit - head
    return concat([
      all.subarray(0, head),
      ascii(truncationMarker(all.length - head - tail)),
      all.subarray(all.length - tail),
    ])
  }

  it("keeps everything under the cap and exactly head + marker + tail over it", () => {
    fc.assert(
      fc.property(
        // Limits past the 4 KiB a head starts with, so that its growth is exercised too.
        fc.array(fc.uint8Array({ maxLength: 3000 }), { maxLength: 20 }),
        fc.integer({ min: 0, max: 20_000 }),
        (chunks, limit) => {
          const capped = new CappedOutput(limit)
          for (const c of chunks) capped.append(c)
          const all = concat(chunks)
          expect([...capped.bytes()]).toEqual([...reference(all, limit)])
          expect(capped.totalBytes).toBe(all.length)
          expect(capped.truncated).toBe(all.length > limit)
        },
      ),
      { numRuns: 500 },
    )
  })

  it("round-trips scanned output exactly when under the cap", () => {
    const marker = newMarker()
    fc.assert(
      fc.property(
        fc.array(trailerLike(marker.needle), { maxLength: 10 }),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 6 }),
        (parts, cuts) => {
          const output = concat(parts)
          fc.pre(Buffer.from(output).indexOf(marker.needle) === -1)
          const capped = new CappedOutput(64 * 1024)
          const scanner = new FrameScanner([marker.needle])
          let done = false
          for (const piece of split(concat([output, marker.needle, ascii("0\n")]), cuts))
            if (!done)
              scanner.feed(piece, {
                content: (b) => capped.append(b),
                trailer: () => {
                  done = true
                  return true
                },
              })
          expect(done).toBe(true)
          expect([...capped.bytes()]).toEqual([...output])
        },
      ),
      { numRuns: 300 },
    )
  })

  it("handles 50 MB in bounded memory and little time", () => {
    const capped = new CappedOutput(64 * 1024)
    const chunk = new Uint8Array(64 * 1024).fill(0x79)
    const started = performance.now()
    for (let i = 0; i < 800; i++) capped.append(chunk)
    expect(capped.totalBytes).toBe(800 * 64 * 1024)
    expect(capped.bytes().length).toBe(64 * 1024 + truncationMarker(799 * 64 * 1024).length)
    expect(performance.now() - started).toBeLessThan(1000)
  })
})
