import { ShapeError } from "./fields.ts"
import { type IntDtype, readLittleEndian } from "./routing.ts"

/** An integer array read from NumPy's `.npy` format (what `np.save` writes). */
export interface NpyArray {
  readonly dtype: IntDtype
  readonly shape: ReadonlyArray<number>
  /** Row-major (C order) values. */
  readonly values: ArrayLike<number>
}

const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59] // "\x93NUMPY"

const DESCR: Readonly<Record<string, IntDtype>> = {
  "|u1": "uint8",
  "<u1": "uint8",
  "|i1": "int8",
  "<i1": "int8",
  "<u2": "uint16",
  "<i2": "int16",
  "<u4": "uint32",
  "<i4": "int32",
  "<i8": "int64",
  "<u8": "uint64",
}

/**
 * Parses a `.npy` file of little-endian integers (format versions 1–3: magic, version, header
 * length, a Python dict literal `{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }`
 * padded with spaces, then the data).
 */
export const parseNpy = (bytes: Uint8Array, path: string): NpyArray => {
  if (bytes.byteLength < 10 || MAGIC.some((byte, i) => bytes[i] !== byte))
    throw new ShapeError(path, "expected a .npy array (magic \\x93NUMPY)")
  const major = bytes[6] ?? 0
  if (major < 1 || major > 3) throw new ShapeError(path, `unsupported .npy format version ${major}`)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const headerAt = major === 1 ? 10 : 12
  if (bytes.byteLength < headerAt) throw new ShapeError(path, ".npy header is cut short")
  const headerLength = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true)
  const dataAt = headerAt + headerLength
  if (bytes.byteLength < dataAt) throw new ShapeError(path, ".npy header is cut short")
  const header = new TextDecoder(major === 3 ? "utf-8" : "latin1").decode(
    bytes.subarray(headerAt, dataAt),
  )

  const descr = /'descr':\s*'([^']*)'/.exec(header)?.[1]
  const dtype = descr === undefined ? undefined : DESCR[descr]
  if (dtype === undefined)
    throw new ShapeError(
      path,
      `unsupported .npy dtype ${descr ?? "(none)"}; expected little-endian integers`,
    )
  if (!/'fortran_order':\s*False/.test(header))
    throw new ShapeError(path, ".npy array is not in C order")
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1]
  if (shapeText === undefined) throw new ShapeError(path, ".npy header has no shape")
  const shape = shapeText
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part !== "")
    .map(Number)
  if (shape.some((size) => !Number.isSafeInteger(size) || size < 0))
    throw new ShapeError(path, `.npy shape (${shapeText}) is not a list of sizes`)

  const values = readLittleEndian(bytes.subarray(dataAt), dtype, path)
  const count = shape.reduce((product, size) => product * size, 1)
  if (values.length !== count)
    throw new ShapeError(
      path,
      `.npy shape (${shape.join(", ")}) needs ${count} values, data holds ${values.length}`,
    )
  return { dtype, shape, values }
}
