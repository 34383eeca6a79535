/**
 * Tripwire: the sha256 of every file the verifier put in the test directory, computed here
 * before the upload and read back from the sandbox after the run. Code of the agent's that runs
 * during the tests (imported by them, or started by the test script) could rewrite or delete a
 * test file before pytest collects it; a file that changed or vanished means the run did not test
 * what the task's tests say.
 */
import { createHash } from "node:crypto"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { Effect } from "effect"
import * as tar from "tar-stream"
import { collectBytes } from "../../services/tar/index.ts"
import type { VerifierInfraError } from "./errors.ts"
import type { VerifierSandboxShape } from "./port.ts"
import { runBookkeeping, shellQuote } from "./shell.ts"

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

const normalName = (name: string) => name.replace(/^(\.?\/+)+/, "").replace(/\/$/, "")

/**
 * The sha256 of each regular file of a tests archive by its path in the tree, read in one pass
 * (a later entry of the same name replaces an earlier one, as tar does when unpacking), with
 * `extra` files laid over it (the canary file, a rewritten script).
 */
export const fingerprints = async (
  archive: Uint8Array,
  extra: ReadonlyArray<{ readonly path: string; readonly bytes: Uint8Array }> = [],
): Promise<Map<string, string>> => {
  const hashes = new Map<string, string>()
  const extract = tar.extract()
  const reading = (async () => {
    for await (const entry of extract) {
      const body = await collectBytes(entry)
      const name = normalName(entry.header.name)
      if (entry.header.type === "file") hashes.set(name, sha256(body))
      else hashes.delete(name)
    }
  })()
  await Promise.all([
    pipeline(
      Readable.from([Buffer.from(archive.buffer, archive.byteOffset, archive.byteLength)]),
      extract,
    ),
    reading,
  ])
  for (const f of extra) hashes.set(f.path, sha256(f.bytes))
  return hashes
}

/** One shell word per file: bookkeeping scripts stay well under one argument's 128 KiB. */
const MAX_SCRIPT_BYTES = 48 * 1024

/** sha256sum escapes a name holding a backslash or a newline and marks its line with `\`. */
const unescapeName = (name: string) =>
  name.replace(/\\(\\|n|r)/g, (_, c: string) => (c === "n" ? "\n" : c === "r" ? "\r" : "\\"))

const parseSums = (text: string): Map<string, string> => {
  const sums = new Map<string, string>()
  for (const line of text.split("\n")) {
    const m = /^(\\?)([0-9a-f]{64}) [ *](.*)$/.exec(line)
    if (m === null) continue
    sums.set(m[1] === "\\" ? unescapeName(m[3] ?? "") : (m[3] ?? ""), m[2] ?? "")
  }
  return sums
}

export type TripwireResult =
  | { readonly kind: "checked"; readonly evidence: ReadonlyArray<string> }
  | { readonly kind: "unchecked"; readonly reason: string }

/**
 * Reads back the sha256 of each of `expected`'s files in `testDir` (one exec; more only for a
 * test tree whose names do not fit one script) and says which changed or are missing. `remove`:
 * a directory the first of those execs deletes before it reads (the verifier's scratch, done
 * with by then), which spares the verification an exec of its own; `removed` says whether one
 * ran.
 */
export const checkTripwire = (
  sandbox: VerifierSandboxShape,
  testDir: string,
  expected: ReadonlyMap<string, string>,
  remove?: string,
): Effect.Effect<TripwireResult & { readonly removed: boolean }, VerifierInfraError> =>
  Effect.map(readBack(sandbox, testDir, expected, remove), (result) => ({
    ...result,
    removed: remove !== undefined && expected.size > 0,
  }))

const readBack = (
  sandbox: VerifierSandboxShape,
  testDir: string,
  expected: ReadonlyMap<string, string>,
  remove: string | undefined,
): Effect.Effect<TripwireResult, VerifierInfraError> =>
  Effect.gen(function* () {
    const names = [...expected.keys()].sort()
    const batches: string[][] = [[]]
    let size = 0
    for (const name of names) {
      const word = shellQuote(`./${name}`).length + 1
      const batch = batches[batches.length - 1] ?? []
      if (batch.length > 0 && size + word > MAX_SCRIPT_BYTES) {
        batches.push([name])
        size = word
      } else {
        batch.push(name)
        size += word
      }
    }
    const sums = new Map<string, string>()
    for (const [i, batch] of batches.entries()) {
      if (batch.length === 0) continue
      // `t1-sums` proves sha256sum ran: a missing program must not read as missing files.
      const script = [
        ...(i === 0 && remove !== undefined ? [`rm -rf -- ${shellQuote(remove)}`] : []),
        "command -v sha256sum >/dev/null 2>&1 || { echo t1-no-sha256sum; exit 0; }",
        `echo t1-sums; cd -- ${shellQuote(testDir)} 2>/dev/null || exit 0`,
        `sha256sum -- ${batch.map((n) => shellQuote(`./${n}`)).join(" ")} 2>/dev/null; true`,
      ].join("\n")
      const result = yield* runBookkeeping(
        sandbox,
        "reading back the test files' sha256",
        script,
        batch.reduce((s, n) => s + n.length + 80, 0) + 64 * 1024,
      )
      if (!result.text.includes("t1-sums"))
        return {
          kind: "unchecked",
          reason: result.text.includes("t1-no-sha256sum")
            ? "the sandbox has no sha256sum"
            : `sha256sum did not run: ${result.text.slice(-200).trim() || `exit ${result.exitCode}`}`,
        } as const
      if (result.truncated)
        return { kind: "unchecked", reason: "sha256sum's answer was cut short" } as const
      for (const [name, sum] of parseSums(result.text)) sums.set(name.replace(/^\.\//, ""), sum)
    }
    const changed: string[] = []
    const missing: string[] = []
    for (const name of names) {
      const got = sums.get(name)
      if (got === undefined) missing.push(name)
      else if (got !== expected.get(name)) changed.push(name)
    }
    const list = (files: ReadonlyArray<string>) =>
      files.length <= 20
        ? files.join(", ")
        : `${files.slice(0, 20).join(", ")} and ${files.length - 20} more`
    const evidence = [
      ...(changed.length > 0
        ? [`test files changed during the run: ${list(changed)} (sha256 differs from the upload)`]
        : []),
      ...(missing.length > 0 ? [`test files missing after the run: ${list(missing)}`] : []),
    ]
    return { kind: "checked", evidence } as const
  })
