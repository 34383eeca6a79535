import { TokenizerFormatError } from "./errors.ts"
import { GPT2_PATTERN } from "./pretokenize.ts"
import { Tokenizer, type TokenizerSpec } from "./tokenizer.ts"

/**
 * Hugging Face `tokenizer.json` for byte-level BPE: model BPE (vocab, merges as "a b" strings or
 * [a, b] pairs), added_tokens, a ByteLevel pre-tokenizer (alone, or after a Split regex as in
 * Llama 3 / Qwen 2), ByteLevel decoder, and a null or NFC normalizer. Anything else is refused
 * with TokenizerFormatError rather than silently tokenising differently from the original.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type JsonObject = { [key: string]: Json }

function isObject(v: Json | undefined): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v)
}

function field(obj: JsonObject, key: string): Json | undefined {
  return Object.hasOwn(obj, key) ? obj[key] : undefined
}

function fail(message: string): never {
  throw new TokenizerFormatError(`tokenizer.json: ${message}`)
}

interface PreTokenizerSettings {
  /** Isolated split patterns in the order they apply. */
  patterns: string[]
  addPrefixSpace: boolean
}

function readByteLevel(node: JsonObject): { useRegex: boolean; addPrefixSpace: boolean } {
  return {
    useRegex: field(node, "use_regex") !== false,
    addPrefixSpace: field(node, "add_prefix_space") === true,
  }
}

function readSplit(node: JsonObject): string {
  const pattern = field(node, "pattern")
  if (!isObject(pattern)) fail("Split pre_tokenizer without a pattern")
  const behavior = field(node, "behavior")
  if (behavior !== "Isolated" || field(node, "invert") === true) {
    fail(`Split behavior ${JSON.stringify(behavior)} is not supported (only Isolated)`)
  }
  const regex = field(pattern, "Regex")
  if (typeof regex === "string") return regex
  const literal = field(pattern, "String")
  if (typeof literal === "string") return literal.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
  return fail("Split pattern is neither Regex nor String")
}

/**
 * The byte-level pre-tokenizers real tokenizers use: ByteLevel alone (GPT-2's regex when
 * use_regex), or a Sequence of Isolated Splits ending in ByteLevel (Llama 3, Qwen 2/3: one Split;
 * DeepSeek-V3: three), each Split applied to the pieces of the one before.
 */
function readPreTokenizer(node: Json | undefined): PreTokenizerSettings {
  if (node === undefined || node === null) return { patterns: [], addPrefixSpace: false }
  if (!isObject(node)) return fail("pre_tokenizer is not an object")
  const type = field(node, "type")
  if (type === "ByteLevel") {
    const bl = readByteLevel(node)
    return { patterns: bl.useRegex ? [GPT2_PATTERN] : [], addPrefixSpace: bl.addPrefixSpace }
  }
  if (type === "Sequence") {
    const steps = field(node, "pretokenizers")
    if (!Array.isArray(steps)) return fail("Sequence pre_tokenizer without pretokenizers")
    const last = steps[steps.length - 1]
    const splits = steps.slice(0, -1)
    if (
      !isObject(last) ||
      field(last, "type") !== "ByteLevel" ||
      !splits.every((s) => isObject(s) && field(s, "type") === "Split")
    ) {
      return fail("only Sequence[Split…, ByteLevel] pre_tokenizers are supported")
    }
    const settings = readByteLevel(last)
    const patterns = splits.map((s) => readSplit(s as JsonObject))
    // ByteLevel with use_regex splits the Splits' pieces once more by GPT-2's pattern.
    if (settings.useRegex) patterns.push(GPT2_PATTERN)
    return { patterns, addPrefixSpace: settings.addPrefixSpace }
  }
  return fail(`pre_tokenizer type ${JSON.stringify(type)} is not supported`)
}

/** null, NFC, or a Sequence of those (DeepSeek-V3 ships an empty Sequence). */
function readNormalizer(node: Json | undefined): "NFC" | null {
  if (node === undefined || node === null) return null
  if (!isObject(node)) return fail("normalizer is not an object")
  const type = field(node, "type")
  if (type === "NFC") return "NFC"
  if (type === "Sequence") {
    const steps = field(node, "normalizers")
    if (!Array.isArray(steps)) return fail("Sequence normalizer without normalizers")
    const kinds = steps.map((step) => readNormalizer(step))
    return kinds.includes("NFC") ? "NFC" : null
  }
  return fail(
    `normalizer ${JSON.stringify(type)} is not supported (only NFC, or a Sequence of NFC)`,
  )
}

function readMerges(node: Json | undefined): Array<[string, string]> {
  if (!Array.isArray(node)) return fail("model.merges is not an array")
  return node.map((m): [string, string] => {
    if (typeof m === "string") {
      const parts = m.split(" ")
      if (parts.length !== 2) fail(`merge ${JSON.stringify(m)} is not "a b"`)
      return [parts[0] as string, parts[1] as string]
    }
    if (
      Array.isArray(m) &&
      m.length === 2 &&
      typeof m[0] === "string" &&
      typeof m[1] === "string"
    ) {
      return [m[0], m[1]]
    }
    return fail(`merge ${JSON.stringify(m)} is neither "a b" nor [a, b]`)
  })
}

/** Build a Tokenizer from tokenizer.json text or its parsed object. */
export function loadTokenizerJson(source: string | object): Tokenizer {
  const root = (typeof source === "string" ? JSON.parse(source) : source) as Json
  if (!isObject(root)) return fail("not a JSON object")
  const model = field(root, "model")
  if (!isObject(model)) return fail("no model")
  const type = field(model, "type")
  if (type !== undefined && type !== "BPE") fail(`model type ${JSON.stringify(type)} is not BPE`)
  if (field(model, "byte_fallback") === true) fail("byte_fallback BPE is not byte-level")
  const prefix = field(model, "continuing_subword_prefix")
  const suffix = field(model, "end_of_word_suffix")
  if (
    (typeof prefix === "string" && prefix !== "") ||
    (typeof suffix === "string" && suffix !== "")
  ) {
    fail("continuing_subword_prefix / end_of_word_suffix are not supported")
  }
  const dropout = field(model, "dropout")
  if (typeof dropout === "number" && dropout > 0) fail("BPE dropout is not supported")

  const vocabNode = field(model, "vocab")
  if (!isObject(vocabNode)) return fail("model.vocab is not an object")
  const vocab = new Map<string, number>()
  for (const [token, id] of Object.entries(vocabNode)) {
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0) fail(`bad id for ${token}`)
    vocab.set(token, id)
  }

  const specialTokens = new Map<string, number>()
  const added = field(root, "added_tokens") ?? []
  if (!Array.isArray(added)) return fail("added_tokens is not an array")
  for (const t of added) {
    if (!isObject(t)) return fail("added token is not an object")
    const content = field(t, "content")
    const id = field(t, "id")
    if (typeof content !== "string" || typeof id !== "number") fail("added token lacks content/id")
    specialTokens.set(content, id)
  }

  const decoder = field(root, "decoder")
  if (isObject(decoder) && field(decoder, "type") !== "ByteLevel") {
    fail(`decoder ${JSON.stringify(field(decoder, "type"))} is not ByteLevel`)
  }
  const normalizer = readNormalizer(field(root, "normalizer"))
  const pre = readPreTokenizer(field(root, "pre_tokenizer"))
  return new Tokenizer({
    vocab,
    merges: readMerges(field(model, "merges")),
    specialTokens,
    patterns: pre.patterns,
    addPrefixSpace: pre.addPrefixSpace,
    normalizer,
    ignoreMerges: field(model, "ignore_merges") === true,
  })
}

function preTokenizerJson(spec: TokenizerSpec): Json {
  const byteLevel = (useRegex: boolean): JsonObject => ({
    type: "ByteLevel",
    add_prefix_space: spec.addPrefixSpace,
    trim_offsets: true,
    use_regex: useRegex,
  })
  const [only] = spec.patterns
  if (spec.patterns.length === 1 && only === GPT2_PATTERN) return byteLevel(true)
  if (spec.patterns.length === 0) return byteLevel(false)
  return {
    type: "Sequence",
    pretokenizers: [
      ...spec.patterns.map((p) => ({
        type: "Split",
        pattern: { Regex: p },
        behavior: "Isolated",
        invert: false,
      })),
      byteLevel(false),
    ],
  }
}

/** The tokenizer as a tokenizer.json object (Hugging Face `tokenizers` layout). */
export function toTokenizerJson(tokenizer: Tokenizer): object {
  const spec = tokenizer.spec
  const vocab: JsonObject = {}
  for (const [token, id] of [...spec.vocab].sort((x, y) => x[1] - y[1])) vocab[token] = id
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [...spec.specialTokens]
      .sort((x, y) => x[1] - y[1])
      .map(([content, id]) => ({
        id,
        content,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      })),
    normalizer: spec.normalizer === null ? null : { type: spec.normalizer },
    pre_tokenizer: preTokenizerJson(spec),
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: spec.ignoreMerges,
      vocab,
      merges: spec.merges.map(([a, b]) => [a, b]),
    },
  }
}

/** tokenizer.json text. */
export function saveTokenizerJson(tokenizer: Tokenizer): string {
  return JSON.stringify(toTokenizerJson(tokenizer), null, 2)
}
