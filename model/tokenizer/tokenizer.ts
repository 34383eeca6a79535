import { applyMerges, MAX_VOCAB, type MergeTable, pairKey } from "./bpe.ts"
import { BYTE_TO_UNICODE, byteLevelToBytes, bytesToByteLevel } from "./byteLevel.ts"
import { TokenizerFormatError, UnknownTokenError } from "./errors.ts"
import { compileSplitPattern, splitBytes, splitText } from "./pretokenize.ts"

/** Everything that defines a byte-level BPE tokenizer; what tokenizer.json stores. */
export interface TokenizerSpec {
  /** Model vocabulary: byte-level token string → id. */
  readonly vocab: ReadonlyMap<string, number>
  /** Merges in rank order (first = applied first), as pairs of byte-level token strings. */
  readonly merges: ReadonlyArray<readonly [string, string]>
  /** Added tokens matched atomically (when allowed): literal content → id. */
  readonly specialTokens: ReadonlyMap<string, number>
  /**
   * Split regex sources (HF flavour), applied in order as `Isolated` splits (each splits the
   * pieces of the one before, as a Sequence pre-tokenizer does); empty for no splitting.
   */
  readonly patterns: ReadonlyArray<string>
  /** ByteLevel add_prefix_space: prepend " " to text that does not start with one. */
  readonly addPrefixSpace: boolean
  /** Unicode normalisation applied by `encode` (never by `encodeBytes`). */
  readonly normalizer: "NFC" | null
  /** HF `ignore_merges`: a piece that is itself a vocabulary token encodes to that token. */
  readonly ignoreMerges: boolean
}

export interface EncodeOptions {
  /**
   * Match special-token text (e.g. "<|end|>") as the special id. Off by default: observation and
   * user text must never be able to forge template tokens.
   */
  readonly allowSpecial?: boolean
}

const utf8Encoder = new TextEncoder()
const utf8Decoder = new TextDecoder("utf-8", { ignoreBOM: true })
const PIECE_CACHE_LIMIT = 100_000

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
}

/**
 * A byte-level BPE tokenizer. Every byte sequence is encodable (the 256 byte tokens cover all
 * inputs), and `decodeBytes(encodeBytes(b))` returns `b` exactly, valid UTF-8 or not.
 */
export class Tokenizer {
  readonly spec: TokenizerSpec
  /** One more than the largest id. */
  readonly vocabSize: number
  private readonly byteIds: Uint32Array
  private readonly table: MergeTable
  private readonly patterns: ReadonlyArray<RegExp>
  private readonly idBytes: Array<Uint8Array | undefined>
  private readonly idToken: Array<string | undefined>
  private readonly specialIds: Set<number>
  private readonly specialSplitter: RegExp | null
  private readonly cache = new Map<string, number[]>()

  constructor(spec: TokenizerSpec) {
    this.spec = spec
    let maxId = -1
    for (const id of spec.vocab.values()) maxId = Math.max(maxId, id)
    for (const id of spec.specialTokens.values()) maxId = Math.max(maxId, id)
    if (maxId >= MAX_VOCAB) throw new TokenizerFormatError(`ids must be below ${MAX_VOCAB}`)
    this.vocabSize = maxId + 1

    this.byteIds = new Uint32Array(256)
    for (let b = 0; b < 256; b++) {
      const id = spec.vocab.get(BYTE_TO_UNICODE[b] as string)
      if (id === undefined) {
        throw new TokenizerFormatError(`vocabulary lacks the byte token for 0x${b.toString(16)}`)
      }
      this.byteIds[b] = id
    }

    const ranks = new Map<number, number>()
    const results: number[] = []
    spec.merges.forEach(([a, b], rank) => {
      const ia = spec.vocab.get(a)
      const ib = spec.vocab.get(b)
      const merged = spec.vocab.get(a + b)
      if (ia === undefined || ib === undefined || merged === undefined) {
        throw new TokenizerFormatError(`merge "${a} ${b}" uses a token not in the vocabulary`)
      }
      const key = pairKey(ia, ib)
      if (!ranks.has(key)) ranks.set(key, rank) // HF keeps the first rank of a repeated merge
      results.push(merged)
    })
    this.table = { ranks, results }

    this.idBytes = new Array<Uint8Array | undefined>(this.vocabSize)
    this.idToken = new Array<string | undefined>(this.vocabSize)
    for (const [token, id] of spec.vocab) {
      this.idToken[id] = token
      this.idBytes[id] = byteLevelToBytes(token) ?? utf8Encoder.encode(token)
    }
    this.specialIds = new Set(spec.specialTokens.values())
    for (const [content, id] of spec.specialTokens) {
      this.idToken[id] = content
      this.idBytes[id] = utf8Encoder.encode(content)
    }
    const specials = [...spec.specialTokens.keys()].filter((s) => s.length > 0)
    specials.sort((x, y) => y.length - x.length || (x < y ? -1 : 1)) // longest match wins
    this.specialSplitter =
      specials.length > 0 ? new RegExp(`(${specials.map(escapeRegExp).join("|")})`, "u") : null
    this.patterns = spec.patterns.map(compileSplitPattern)
  }

  /** Id of an added/special token by its literal text ("<|end|>"). */
  specialId(content: string): number {
    const id = this.spec.specialTokens.get(content)
    if (id === undefined) throw new UnknownTokenError(content)
    return id
  }

  isSpecial(id: number): boolean {
    return this.specialIds.has(id)
  }

  /** The vocabulary string of an id (byte-level form for model tokens). */
  idToToken(id: number): string | undefined {
    return this.idToken[id]
  }

  /** Encode text. Special-token text is ordinary bytes unless `allowSpecial` is set. */
  encode(text: string, options: EncodeOptions = {}): Uint32Array {
    const out: number[] = []
    if (options.allowSpecial === true && this.specialSplitter !== null) {
      // split with a capture group: odd indices are the special tokens themselves
      text.split(this.specialSplitter).forEach((part, i) => {
        if (i % 2 === 1) out.push(this.specialId(part))
        else this.encodeOrdinary(part, out)
      })
    } else {
      this.encodeOrdinary(text, out)
    }
    return Uint32Array.from(out)
  }

  /**
   * Encode raw bytes exactly (no normalisation, no prefix space, no special tokens): the path for
   * observations, which may be any bytes. Well-formed UTF-8 encodes as `encode` would encode it.
   */
  encodeBytes(bytes: Uint8Array): Uint32Array {
    const out: number[] = []
    for (const piece of splitBytes(bytes, this.patterns)) this.encodePiece(piece, out)
    return Uint32Array.from(out)
  }

  /** Exact bytes of a token sequence; the inverse of encodeBytes. */
  decodeBytes(ids: ArrayLike<number>): Uint8Array {
    const parts: Uint8Array[] = []
    let length = 0
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] as number
      const bytes = this.idBytes[id]
      if (bytes === undefined) throw new UnknownTokenError(id)
      parts.push(bytes)
      length += bytes.length
    }
    const out = new Uint8Array(length)
    let at = 0
    for (const p of parts) {
      out.set(p, at)
      at += p.length
    }
    return out
  }

  /** Text of a token sequence; bytes that are not valid UTF-8 become U+FFFD. */
  decode(ids: ArrayLike<number>): string {
    return utf8Decoder.decode(this.decodeBytes(ids))
  }

  private encodeOrdinary(text: string, out: number[]): void {
    if (text.length === 0) return
    let t = this.spec.normalizer === "NFC" ? text.normalize("NFC") : text
    if (this.spec.addPrefixSpace && !t.startsWith(" ")) t = ` ${t}`
    for (const piece of splitText(t, this.patterns))
      this.encodePiece(utf8Encoder.encode(piece), out)
  }

  private encodePiece(bytes: Uint8Array, out: number[]): void {
    const key = bytesToByteLevel(bytes)
    let ids = this.cache.get(key)
    if (ids === undefined) {
      const whole = this.spec.ignoreMerges ? this.spec.vocab.get(key) : undefined
      if (whole !== undefined) ids = [whole]
      else {
        const symbols = new Array<number>(bytes.length)
        for (let i = 0; i < bytes.length; i++)
          symbols[i] = this.byteIds[bytes[i] as number] as number
        ids = applyMerges(symbols, this.table)
      }
      if (this.cache.size >= PIECE_CACHE_LIMIT) this.cache.clear()
      this.cache.set(key, ids)
    }
    for (const id of ids) out.push(id)
  }
}
