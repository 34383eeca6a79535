import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { VerifierInfraError } from "./errors.ts"
import type { ShellResult, VerifierSandboxShape } from "./port.ts"

/** `text` as one single-quoted shell word. */
export const shellQuote = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`

/**
 * Variables an agent may have left exported in the episode's shell that change how the tests
 * run or are reported (pytest options and plugins, interpreter start-up files, bash start-up).
 */
const HAZARDS = [
  "PYTEST_ADDOPTS",
  "PYTEST_PLUGINS",
  "PYTHONSTARTUP",
  "PYTHONINSPECT",
  "PYTHONHOME",
  "PYTHONUSERBASE",
  "LD_PRELOAD",
  "LD_AUDIT",
  "BASH_ENV",
  "ENV",
  "CDPATH",
  "GLOBIGNORE",
]

/**
 * `script` run by a fresh bash rather than in the episode's shell itself, whose aliases,
 * functions, options and traps the agent set: `\command /usr/bin/env` sidesteps an alias or
 * function named env and drops HAZARDS, and `-p` keeps that bash from importing exported
 * functions or reading SHELLOPTS, ENV and BASH_ENV. It reads its own environment from
 * /proc/$$/environ (`env -0` where /proc is missing): when the agent exported no function it runs
 * `script` itself; else it drops the BASH_FUNC_* variables and starts one more bash for `script`,
 * so that neither a test script nor anything it starts sees them. (Always starting that second
 * bash cost three more processes per call, about a tenth of a short episode's CPU.) Best effort
 * only: the agent was root in this sandbox and could have replaced any program.
 */
export const inFreshShell = (script: string): string => {
  const scan = `while IFS= read -r -d '' __t1_kv; do case $__t1_kv in BASH_FUNC_*) __t1_u+=(-u "\${__t1_kv%%=*}");; esac; done`
  const driver = [
    `__t1_s=$1; __t1_u=()`,
    `if [ -r /proc/$$/environ ]; then ${scan} < /proc/$$/environ; else ${scan} < <(env -0 2>/dev/null); fi`,
    `if [ "\${#__t1_u[@]}" -gt 0 ]; then exec env "\${__t1_u[@]}" bash --noprofile --norc -c "$__t1_s"; fi`,
    `unset __t1_u __t1_kv; set --; eval -- "$__t1_s"`,
  ].join("\n")
  const unset = HAZARDS.map((v) => `-u ${v}`).join(" ")
  return `\\command /usr/bin/env ${unset} bash --noprofile --norc -p -c ${shellQuote(driver)} t1-verify ${shellQuote(script)}`
}

/**
 * Runs one of the verifier's scripts: with the sandbox's own runner where it has one (the
 * toolchain's bash outside the agent's shell, guard.ts), else in a fresh bash started from the
 * agent's session.
 */
export const runScript = (
  sandbox: VerifierSandboxShape,
  script: string,
  options: { readonly timeoutMs: number; readonly maxOutputBytes: number },
) =>
  sandbox.script !== undefined
    ? sandbox.script(script, options)
    : sandbox.exec(inFreshShell(script), options)

/** Short bookkeeping commands (mkdir, reading files back) get this long. */
export const BOOKKEEPING_TIMEOUT_MS = 60_000

/** Runs a bookkeeping command; a failed call is an infra error at `stage`. */
export const runBookkeeping = (
  sandbox: VerifierSandboxShape,
  stage: string,
  script: string,
  maxOutputBytes = 64 * 1024,
): Effect.Effect<ShellResult & { readonly text: string }, VerifierInfraError> =>
  runScript(sandbox, script, { timeoutMs: BOOKKEEPING_TIMEOUT_MS, maxOutputBytes }).pipe(
    Effect.map((r) => ({ ...r, text: new TextDecoder().decode(r.output) })),
    Effect.mapError(
      (e) => new VerifierInfraError({ stage, reason: e.message, retryable: e.infra }),
    ),
  )

export type FileRead =
  | { readonly kind: "missing" }
  | { readonly kind: "too-large"; readonly size: number }
  | { readonly kind: "unreadable"; readonly reason: string }
  | { readonly kind: "read"; readonly bytes: Uint8Array }

/** Raw bytes per read: base64 of it plus headroom stays under a 1 MiB bus message. */
const CHUNK_BYTES = 512 * 1024

/**
 * Reads a regular file back through the shell, base64 in chunks between random markers: the
 * same through a driver and over the bus (whose messages are capped, and whose local driver
 * transfers files only under the workdir). Output of the agent's leftover background jobs can
 * land in the same stream, hence the markers and the length check.
 */
export const readSandboxFile = (
  sandbox: VerifierSandboxShape,
  path: string,
  maxBytes: number,
): Effect.Effect<FileRead, VerifierInfraError> =>
  Effect.map(readSandboxFiles(sandbox, [{ path, maxBytes }]), (reads) => reads[0] as FileRead)

/**
 * Several files as readSandboxFile reads one, in one exec for their sizes and first chunks (every
 * exec is a few processes, and a verification reads up to three report files, most of them
 * missing and most of the rest small).
 */
export const readSandboxFiles = (
  sandbox: VerifierSandboxShape,
  files: ReadonlyArray<{ readonly path: string; readonly maxBytes: number }>,
): Effect.Effect<ReadonlyArray<FileRead>, VerifierInfraError> =>
  Effect.gen(function* () {
    if (files.length === 0) return []
    const share = Math.floor(CHUNK_BYTES / files.length)
    const firsts = files.map((f) => Math.max(0, Math.min(share, f.maxBytes)))
    const { a, b } = markers()
    const section = randomBytes(6).toString("hex")
    const script = [
      `printf '\\n%s%s\\n' ${a} ${b}`,
      ...files.map((f, i) => {
        const file = shellQuote(f.path)
        return `if [ -f ${file} ]; then size=$(wc -c < ${file}); echo "$size"; if [ "$size" -le ${f.maxBytes} ] 2>/dev/null; then head -c ${firsts[i]} -- ${file} | base64 -w0; fi; else echo missing; fi; printf '\\n%s\\n' ${section}`
      }),
      `printf '\\n%s%s\\n' ${b} ${a}`,
    ].join("; ")
    const result = yield* runBookkeeping(
      sandbox,
      `reading ${files.map((f) => f.path).join(", ")}`,
      script,
      Math.ceil((firsts.reduce((s, n) => s + n, 0) * 4) / 3) + 128 * 1024,
    )
    const body = between(result.text, a, b)
    const sections = body?.split(`\n${section}\n`)
    const reads: Array<FileRead> = []
    for (const [i, f] of files.entries()) {
      const part = sections?.[i]
      if (part === undefined || sections === undefined || sections.length !== files.length + 1) {
        reads.push({ kind: "unreadable", reason: result.text.slice(-200) || "no answer" })
        continue
      }
      reads.push(
        yield* finishRead(sandbox, f.path, f.maxBytes, firsts[i] as number, part, result.truncated),
      )
    }
    return reads
  })

/** The rest of a read from its first section: `missing`, or the size and the first chunk. */
const finishRead = (
  sandbox: VerifierSandboxShape,
  path: string,
  maxBytes: number,
  first: number,
  body: string,
  truncated: boolean,
): Effect.Effect<FileRead, VerifierInfraError> =>
  Effect.gen(function* () {
    const newline = body.indexOf("\n")
    const answer = (newline < 0 ? body : body.slice(0, newline)).trim()
    if (answer === "missing") return { kind: "missing" } as const
    const size = Number(answer)
    if (!/^\d+$/.test(answer)) return { kind: "unreadable", reason: body.slice(0, 200) } as const
    if (size > maxBytes) return { kind: "too-large", size } as const
    const parts: Uint8Array[] = []
    const head =
      newline < 0 ? undefined : decodeChunk(body.slice(newline + 1), Math.min(first, size))
    let offset = 0
    if (head !== undefined && !truncated) {
      parts.push(head)
      offset = head.byteLength
    }
    for (; offset < size; offset += CHUNK_BYTES) {
      const length = Math.min(CHUNK_BYTES, size - offset)
      const chunk = yield* readChunk(sandbox, path, offset, length).pipe(
        Effect.flatMap((c) =>
          c === undefined ? readChunk(sandbox, path, offset, length) : Effect.succeed(c),
        ),
      )
      if (chunk === undefined)
        return {
          kind: "unreadable",
          reason: `bytes ${offset}..${offset + length} did not arrive`,
        } as const
      parts.push(chunk)
    }
    return { kind: "read", bytes: new Uint8Array(Buffer.concat(parts)) } as const
  })

/** A random marker in two halves, printed so that no echo of the command line contains it. */
const markers = () => {
  const marker = randomBytes(8).toString("hex")
  return { a: marker.slice(0, 8), b: marker.slice(8) }
}

/** The text between the last `\n<a><b>\n` and the next `\n<b><a>\n`. */
const between = (text: string, a: string, b: string): string | undefined => {
  const start = text.lastIndexOf(`\n${a}${b}\n`)
  const end = text.indexOf(`\n${b}${a}\n`, start + 1)
  if (start < 0 || end < 0) return undefined
  return text.slice(start + a.length + b.length + 2, end)
}

/** base64 of exactly `length` bytes, else undefined. */
const decodeChunk = (payload: string, length: number): Uint8Array | undefined => {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(payload)) return undefined
  const bytes = Buffer.from(payload, "base64")
  return bytes.byteLength === length ? new Uint8Array(bytes) : undefined
}

const readChunk = (sandbox: VerifierSandboxShape, path: string, offset: number, length: number) =>
  Effect.gen(function* () {
    const { a, b } = markers()
    const script = [
      `printf '\\n%s%s\\n' ${a} ${b}`,
      `tail -c +${offset + 1} -- ${shellQuote(path)} | head -c ${length} | base64 -w0`,
      `printf '\\n%s%s\\n' ${b} ${a}`,
    ].join("; ")
    const result = yield* runBookkeeping(
      sandbox,
      `reading ${path}`,
      script,
      Math.ceil((length * 4) / 3) + 128 * 1024,
    )
    const payload = between(result.text, a, b)
    if (payload === undefined || result.truncated) return undefined
    return decodeChunk(payload, length)
  })
