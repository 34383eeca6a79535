import { Effect, Exit } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { fromLittleEndian, HOST_IS_LITTLE_ENDIAN, swapByteOrder, toLittleEndian } from "./endian.ts"
import type { Dtype, PackedArray, PackedValues } from "./index.ts"
import {
  BYTES_PER_ELEMENT,
  decode,
  decodeRoutingSync,
  decodeSync,
  encode,
  encodeRoutingSync,
  encodeSync,
  PackedArrayError,
  routingDtypeFor,
} from "./index.ts"

const DTYPES: ReadonlyArray<Dtype> = ["uint8", "uint16", "uint32", "float32"]

const product = (shape: ReadonlyArray<number>) => shape.reduce((a, b) => a * b, 1)

const shapeArb = fc.array(fc.integer({ min: 0, max: 6 }), { minLength: 1, maxLength: 3 })

/** Random elements of `dtype`; float32 comes from raw bits so NaN payloads and -0 show up. */
const valuesOf = (dtype: Dtype, length: number): fc.Arbitrary<PackedValues> => {
  const bits = (max: number) =>
    fc.array(fc.integer({ min: 0, max }), { minLength: length, maxLength: length })
  switch (dtype) {
    case "uint8":
      return bits(0xff).map((xs) => Uint8Array.from(xs))
    case "uint16":
      return bits(0xffff).map((xs) => Uint16Array.from(xs))
    case "uint32":
      return bits(0xffffffff).map((xs) => Uint32Array.from(xs))
    case "float32":
      return bits(0xffffffff).map((xs) => new Float32Array(Uint32Array.from(xs).buffer))
  }
}

const arrayArb = fc
  .record({ dtype: fc.constantFrom(...DTYPES), shape: shapeArb })
  .chain(({ dtype, shape }) =>
    valuesOf(dtype, product(shape)).map((values) => ({ dtype, shape, values })),
  )

/** `bytes` copied into a larger buffer at `offset`, the way protobuf decoders hand them out. */
const atOffset = (bytes: Uint8Array, offset: number): Uint8Array => {
  const host = new Uint8Array(offset + bytes.byteLength + 3)
  host.set(bytes, offset)
  return host.subarray(offset, offset + bytes.byteLength)
}

/** Bit patterns, so NaN payloads compare exactly (Float32Array equality would not). */
const bitsOf = (values: PackedValues): Uint8Array =>
  new Uint8Array(values.buffer, values.byteOffset, values.byteLength).slice()

const thrown = (f: () => unknown): unknown => {
  try {
    f()
  } catch (e) {
    return e
  }
  return undefined
}

describe("encode", () => {
  it.runIf(HOST_IS_LITTLE_ENDIAN)("is a view over the array's own memory", () => {
    fc.assert(
      fc.property(arrayArb, ({ shape, values }) => {
        const packed = encodeSync("x", values, shape)
        expect(packed.data.buffer).toBe(values.buffer)
        expect(packed.data.byteOffset).toBe(values.byteOffset)
        expect(packed.data.byteLength).toBe(values.byteLength)
      }),
    )
  })

  it("writes little-endian bytes", () => {
    const packed = encodeSync("token_ids", Uint32Array.of(0x01020304))
    expect([...packed.data]).toEqual([4, 3, 2, 1])
    expect(packed).toMatchObject({ dtype: "uint32", shape: [1] })
  })

  it("rejects a shape that does not hold the array's elements", () => {
    const error = thrown(() => encodeSync("logprobs", new Float32Array(10), [3, 4]))
    expect(error).toBeInstanceOf(PackedArrayError)
    expect((error as PackedArrayError).message).toBe(
      "logprobs: expected 3×4 float32 = 12 elements, got 10",
    )
  })

  it("fails in the error channel of the Effect variant", async () => {
    const exit = await Effect.runPromiseExit(encode("mask", new Uint8Array(3), [2]))
    expect(exit).toEqual(Exit.fail(expect.any(PackedArrayError)))
  })
})

describe("decode", () => {
  it("round-trips every dtype, shape and byte offset bit-exactly", () => {
    fc.assert(
      fc.property(arrayArb, fc.integer({ min: 0, max: 7 }), ({ dtype, shape, values }, offset) => {
        const packed = encodeSync("x", values, shape)
        const decoded = decodeSync("x", { dtype, shape, data: atOffset(packed.data, offset) })
        expect(decoded.constructor).toBe(values.constructor)
        expect(decoded.length).toBe(product(shape))
        expect(bitsOf(decoded)).toEqual(bitsOf(values))
      }),
    )
  })

  it.runIf(HOST_IS_LITTLE_ENDIAN)(
    "is a view over aligned bytes and a copy of unaligned ones",
    () => {
      fc.assert(
        fc.property(
          arrayArb,
          fc.integer({ min: 0, max: 7 }),
          ({ dtype, shape, values }, offset) => {
            const data = atOffset(encodeSync("x", values, shape).data, offset)
            const decoded = decodeSync("x", { dtype, shape, data })
            const aligned = offset % BYTES_PER_ELEMENT[dtype] === 0
            expect(decoded.buffer === data.buffer).toBe(aligned)
            if (aligned) expect(decoded.byteOffset).toBe(data.byteOffset)
            expect(bitsOf(decoded)).toEqual(data.slice())
          },
        ),
      )
    },
  )

  it("copies unaligned bytes that live in a Node Buffer's shared pool correctly", () => {
    // NATS hands messages over as Buffers; Buffer#slice is a view, so a copy must not use it.
    const pool = Buffer.alloc(64, 0xee)
    const values = new Uint32Array([1, 2, 0xdeadbeef])
    pool.set(new Uint8Array(values.buffer), 5)
    const got = fromLittleEndian(pool.subarray(5, 17), "uint32")
    expect([...got]).toEqual([...values])
  })

  it("keeps NaN payloads bit-exact", () => {
    const bits = Uint32Array.of(0x7fc00001, 0xffbadbad, 0x7f800001, 0x80000000)
    const data = atOffset(encodeSync("logprobs", new Float32Array(bits.buffer)).data, 1)
    const decoded = decodeSync("logprobs", { dtype: "float32", shape: [4], data })
    expect(new Uint32Array(decoded.slice().buffer)).toEqual(bits)
  })

  it("names the field and both sizes when the length is wrong", () => {
    const error = thrown(() =>
      decodeSync("routing", { dtype: "uint8", shape: [4, 2, 2], data: new Uint8Array(15) }),
    )
    expect(error).toBeInstanceOf(PackedArrayError)
    expect((error as PackedArrayError).message).toBe(
      "routing: expected 4×2×2 uint8 = 16 bytes, got 15",
    )
    expect(
      thrown(() =>
        decodeSync("token_ids", { dtype: "uint32", shape: [4], data: new Uint8Array(15) }),
      ),
    ).toMatchObject({
      message: "token_ids: expected 4 uint32 = 16 bytes, got 15 (not a whole number of uint32)",
    })
  })

  it("rejects every truncation", () => {
    fc.assert(
      fc.property(
        arrayArb.filter(({ values }) => values.length > 0),
        fc.nat(),
        ({ dtype, shape, values }, cut) => {
          const data = encodeSync("x", values, shape).data
          const truncated = data.subarray(0, cut % data.byteLength)
          expect(thrown(() => decodeSync("x", { dtype, shape, data: truncated }))).toBeInstanceOf(
            PackedArrayError,
          )
        },
      ),
    )
  })

  it("rejects a shape of a different size", () => {
    fc.assert(
      fc.property(arrayArb, shapeArb, ({ dtype, shape, values }, wrong) => {
        fc.pre(product(wrong) !== product(shape))
        const data = encodeSync("x", values, shape).data
        expect(thrown(() => decodeSync("x", { dtype, shape: wrong, data }))).toBeInstanceOf(
          PackedArrayError,
        )
      }),
    )
  })

  it("rejects a dtype of a different element size", () => {
    fc.assert(
      fc.property(arrayArb, fc.constantFrom(...DTYPES), ({ dtype, shape, values }, wrong) => {
        fc.pre(BYTES_PER_ELEMENT[wrong] !== BYTES_PER_ELEMENT[dtype] && values.length > 0)
        const data = encodeSync("x", values, shape).data
        expect(thrown(() => decodeSync("x", { dtype: wrong, shape, data }))).toBeInstanceOf(
          PackedArrayError,
        )
      }),
    )
  })

  it("rejects shapes that are not non-negative integers", () => {
    for (const shape of [[-1], [1.5], [Number.NaN], [2, Number.POSITIVE_INFINITY], [2 ** 53]]) {
      expect(
        thrown(() => decodeSync("x", { dtype: "uint8", shape, data: new Uint8Array(0) })),
      ).toBeInstanceOf(PackedArrayError)
    }
  })

  it("rejects a dtype that is not one of the four", () => {
    const packed = { dtype: "int64", shape: [1], data: new Uint8Array(8) }
    expect(thrown(() => decodeSync("x", packed as unknown as PackedArray))).toBeInstanceOf(
      PackedArrayError,
    )
  })

  it("either returns exactly the bytes it was given or fails with PackedArrayError", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...DTYPES),
        fc.array(fc.integer({ min: -1, max: 5 }), { maxLength: 3 }),
        fc.uint8Array({ maxLength: 40 }),
        fc.integer({ min: 0, max: 7 }),
        async (dtype, shape, raw, offset) => {
          const data = atOffset(raw, offset)
          const exit = await Effect.runPromiseExit(decode("x", { dtype, shape, data }))
          if (Exit.isSuccess(exit)) {
            expect(exit.value.length).toBe(product(shape))
            expect(bitsOf(exit.value)).toEqual(raw)
          } else {
            expect(exit).toEqual(Exit.fail(expect.any(PackedArrayError)))
          }
        },
      ),
    )
  })
})

describe("byte order", () => {
  it("swapping twice is the identity and matches a big-endian DataView", () => {
    fc.assert(
      fc.property(fc.uint32Array({ maxLength: 16 }), (values) => {
        const native = new Uint8Array(values.buffer)
        const swapped = swapByteOrder(native, 4)
        const view = new DataView(swapped.buffer)
        const bigEndian = Array.from(values, (_, i) => view.getUint32(i * 4, false))
        expect(bigEndian).toEqual([...values])
        expect(swapByteOrder(swapped, 4)).toEqual(native)
      }),
    )
  })

  it("a big-endian host encodes to a swapped copy and decodes it back", () => {
    fc.assert(
      fc.property(arrayArb, ({ dtype, values }) => {
        const width = BYTES_PER_ELEMENT[dtype]
        const wire = toLittleEndian(values, width, false)
        if (values.byteLength > 0) expect(wire.buffer).not.toBe(values.buffer)
        const back = fromLittleEndian(wire, dtype, false)
        expect(back.buffer).not.toBe(wire.buffer)
        expect(bitsOf(back)).toEqual(bitsOf(values))
      }),
    )
  })
})

describe("routing", () => {
  it("is uint8 up to 256 experts, uint16 above, and rejects impossible counts", () => {
    expect([1, 8, 256, 257, 65_536].map(routingDtypeFor)).toEqual([
      "uint8",
      "uint8",
      "uint8",
      "uint16",
      "uint16",
    ])
    for (const n of [0, -1, 2.5, 65_537]) {
      expect(thrown(() => routingDtypeFor(n))).toBeInstanceOf(PackedArrayError)
    }
  })

  const routingArb = fc
    .record({
      tokens: fc.integer({ min: 0, max: 5 }),
      layers: fc.integer({ min: 1, max: 3 }),
      topK: fc.integer({ min: 1, max: 3 }),
      numExperts: fc.oneof(fc.integer({ min: 1, max: 256 }), fc.integer({ min: 257, max: 65_536 })),
    })
    .chain(({ tokens, layers, topK, numExperts }) => {
      const length = tokens * layers * topK
      return fc
        .array(fc.integer({ min: 0, max: numExperts - 1 }), {
          minLength: length,
          maxLength: length,
        })
        .map((indices) => ({
          spec: { shape: [tokens, layers, topK] as const, numExperts },
          values: numExperts <= 256 ? Uint8Array.from(indices) : Uint16Array.from(indices),
        }))
    })

  it("round-trips at any byte offset", () => {
    fc.assert(
      fc.property(routingArb, fc.integer({ min: 0, max: 3 }), ({ spec, values }, offset) => {
        const packed = encodeRoutingSync(values, spec)
        expect(packed.dtype).toBe(routingDtypeFor(spec.numExperts))
        const decoded = decodeRoutingSync(atOffset(packed.data, offset), spec)
        expect(decoded).toEqual(values)
      }),
    )
  })

  it("rejects any out-of-range expert index, on both sides", () => {
    fc.assert(
      fc.property(
        routingArb.filter(({ values }) => values.length > 0),
        fc.nat(),
        fc.nat(),
        ({ spec, values }, at, excess) => {
          const bad = values.slice()
          const i = at % bad.length
          bad[i] = Math.min(
            bad instanceof Uint8Array ? 0xff : 0xffff,
            spec.numExperts + (excess % 4),
          )
          // 256 experts in uint8 (or 65 536 in uint16) leave no index to corrupt to.
          fc.pre((bad[i] ?? 0) >= spec.numExperts)
          const data = new Uint8Array(bad.buffer)
          expect(thrown(() => decodeRoutingSync(data, spec))).toBeInstanceOf(PackedArrayError)
          expect(thrown(() => encodeRoutingSync(bad, spec))).toBeInstanceOf(PackedArrayError)
        },
      ),
    )
  })

  it("says where the bad index is", () => {
    const data = Uint8Array.of(0, 1, 2, 3, 4, 9, 6, 7)
    const error = thrown(() => decodeRoutingSync(data, { shape: [2, 2, 2], numExperts: 8 }))
    expect((error as PackedArrayError).message).toBe(
      "routing: expected expert indices < 8, got 9 at [token 1, layer 0, k 1]",
    )
  })

  it("refuses a table whose dtype does not match the expert count", () => {
    const error = thrown(() =>
      encodeRoutingSync(new Uint16Array(4), { shape: [1, 2, 2], numExperts: 8 }),
    )
    expect((error as PackedArrayError).message).toBe(
      "routing: expected uint8 for 8 experts, got uint16",
    )
  })
})
