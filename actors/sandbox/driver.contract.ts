import { createServer, type Server } from "node:net"
import { Cause, Context, Effect, Exit, Layer, Option, type Scope } from "effect"
import * as tar from "tar-stream"
import { describe, expect, it } from "vitest"
import {
  type ExecOptions,
  type ExecResult,
  LABELS,
  SandboxDriver,
  type SandboxDriverShape,
  type SandboxSpec,
} from "./driver.ts"
import type { SandboxError } from "./errors.ts"
import { truncationMarker } from "./shell/index.ts"

/** What a driver under test can isolate, and how to reach around it. */
export interface ContractCapabilities {
  /** The spec every test starts from (an image the engine has, a workdir the driver allows). */
  readonly baseSpec: SandboxSpec
  /** network: false leaves only loopback, and the host's loopback is unreachable. */
  readonly networkIsolation: boolean
  /** spec.pidsLimit is enforced, so a fork bomb is contained. */
  readonly pidsLimit: boolean
  /** No engine control socket (/var/run/docker.sock) inside. */
  readonly dockerSocketHidden: boolean
  /** Kills every process of the sandbox without the driver (`docker kill`, a kill -9). */
  readonly killFromOutside: (id: string) => Promise<void>
  /**
   * How the next exec reports a sandbox killed from outside: failing with SandboxDied (an infra
   * error: the episode is retried), or succeeding in a fresh shell with sessionRestarted.
   */
  readonly outsideKill: "SandboxDied" | "sessionRestarted"
}

const text = (b: Uint8Array) => new TextDecoder().decode(b)
const bytes = (s: string) => new TextEncoder().encode(s)
const quick: ExecOptions = { timeoutMs: 10_000, maxOutputBytes: 64 * 1024 }

const failureTag = <A>(exit: Exit.Exit<A, SandboxError>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const error = Cause.findErrorOption(exit.cause)
  return Option.isSome(error) ? error.value._tag : "defect"
}

const makeTar = async (
  entries: ReadonlyArray<{
    name: string
    content?: Uint8Array
    type?: "directory" | "symlink"
    linkname?: string
  }>,
) => {
  const pack = tar.pack()
  const chunks: Buffer[] = []
  const done = (async () => {
    for await (const c of pack) chunks.push(c as Buffer)
  })()
  for (const e of entries) {
    if (e.type === "directory") pack.entry({ name: e.name, type: "directory", mode: 0o755 })
    else if (e.type === "symlink")
      pack.entry({ name: e.name, type: "symlink", linkname: e.linkname ?? "" })
    else pack.entry({ name: e.name, mode: 0o644 }, Buffer.from(e.content ?? new Uint8Array()))
  }
  pack.finalize()
  await done
  return new Uint8Array(Buffer.concat(chunks))
}

const readTar = async (archive: Uint8Array) => {
  const extract = tar.extract()
  const files = new Map<string, { type: string; content: Buffer }>()
  const fed = (async () => {
    extract.end(Buffer.from(archive))
  })()
  for await (const entry of extract) {
    const parts: Buffer[] = []
    for await (const p of entry) parts.push(p as Buffer)
    files.set(entry.header.name, {
      type: entry.header.type ?? "file",
      content: Buffer.concat(parts),
    })
  }
  await fed
  return files
}

const listen = () =>
  new Promise<{ server: Server; port: number; connections: () => number }>((resolve) => {
    let count = 0
    const server = createServer((socket) => {
      count++
      socket.end("hello from the host\n")
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resolve({ server, port, connections: () => count })
    })
  })

/**
 * The behaviour every SandboxDriver must have: a persistent, robust shell, limits that hold,
 * typed errors, file transfer and reapable metadata. A driver skips only what its capabilities
 * say it cannot isolate.
 */
export const sandboxDriverContract = (
  name: string,
  layer: () => Layer.Layer<SandboxDriver, SandboxError>,
  capabilities: ContractCapabilities,
) => {
  const run = <A, E>(f: (driver: SandboxDriverShape) => Effect.Effect<A, E, Scope.Scope>) =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          return yield* f(yield* SandboxDriver)
        }),
      ).pipe(Effect.provide(layer())),
    )

  /** Creates a sandbox for the test, destroyed when the test's scope closes. */
  const sandbox = (driver: SandboxDriverShape, overrides: Partial<SandboxSpec> = {}) =>
    Effect.acquireRelease(
      Effect.map(driver.create({ ...capabilities.baseSpec, ...overrides }), (info) => info.id),
      (id) => Effect.ignore(driver.destroy(id)),
    )

  const sh = (driver: SandboxDriverShape, id: string, command: string, options = quick) =>
    driver.exec(id, command, options)

  describe(`SandboxDriver contract: ${name}`, () => {
    it("keeps cwd, exported variables, functions and background jobs across execs", async () => {
      const [first, second] = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          const first = yield* sh(
            driver,
            id,
            "mkdir -p sub && cd sub && export T1_FOO=bar; greet() { echo hi $1; }; sleep 30 & echo pid=$!",
          )
          const second = yield* sh(
            driver,
            id,
            'basename "$PWD"; echo "$T1_FOO"; greet you; kill -0 $! && echo alive',
          )
          return [first, second]
        }),
      )
      expect(text(first.output)).toMatch(/pid=\d+/)
      expect(text(second.output)).toBe("sub\nbar\nhi you\nalive\n")
      expect(second.exitCode).toBe(0)
      expect(second.sessionRestarted).toBe(false)
    })

    it("interrupts a command at its timeout like Ctrl-C and keeps the session", async () => {
      const [slept, after] = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          yield* sh(driver, id, "export KEEP=1; sleep 30 & echo $! > bg.pid")
          const slept = yield* sh(driver, id, "sleep 100; echo not-reached", {
            timeoutMs: 1000,
            maxOutputBytes: 1024,
          })
          const after = yield* sh(
            driver,
            id,
            'echo "keep=$KEEP"; kill -0 "$(cat bg.pid)" && echo bg-alive',
          )
          return [slept, after]
        }),
      )
      expect(slept.timedOut).toBe(true)
      expect(slept.exitCode).toBe(130)
      expect(slept.sessionRestarted).toBe(false)
      expect(text(slept.output)).not.toContain("not-reached")
      expect(slept.durationMs).toBeGreaterThanOrEqual(950)
      expect(slept.durationMs).toBeLessThan(1000 + 1500)
      expect(text(after.output)).toBe("keep=1\nbg-alive\n")
      expect(after.timedOut).toBe(false)
    })

    it("abandons a whole loop at its timeout, not just the current iteration", async () => {
      const result = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          return yield* sh(driver, id, "while true; do sleep 0.2; done", {
            timeoutMs: 600,
            maxOutputBytes: 1024,
          })
        }),
      )
      expect(result.timedOut).toBe(true)
      expect(result.sessionRestarted).toBe(false)
      expect(result.durationMs).toBeLessThan(600 + 1500)
    })

    it("kills and restarts the shell when the foreground job ignores the interrupt", async () => {
      const [ignored, after] = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          yield* sh(driver, id, "export GONE=1")
          const ignored = yield* sh(driver, id, "bash -c 'trap \"\" INT; sleep 100'", {
            timeoutMs: 300,
            maxOutputBytes: 1024,
          })
          const after = yield* sh(driver, id, 'echo "gone=[$GONE]"')
          return [ignored, after]
        }),
      )
      expect(ignored.timedOut).toBe(true)
      expect(ignored.sessionRestarted).toBe(true)
      expect(ignored.exitCode).toBe(-1)
      expect(text(after.output)).toBe("gone=[]\n")
      expect(after.sessionRestarted).toBe(false)
    })

    it("caps 50 MB of output to its head and tail, counting every byte, quickly", async () => {
      const result = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          return yield* sh(driver, id, "yes | head -c 50000000", {
            timeoutMs: 20_000,
            maxOutputBytes: 64 * 1024,
          })
        }),
      )
      const half = 32 * 1024
      const marker = truncationMarker(50_000_000 - 2 * half)
      expect(result.exitCode).toBe(0)
      expect(result.truncated).toBe(true)
      expect(result.totalBytes).toBe(50_000_000)
      expect(result.output.length).toBe(2 * half + marker.length)
      expect(text(result.output.subarray(0, half))).toBe("y\n".repeat(half / 2))
      expect(text(result.output.subarray(half, half + marker.length))).toBe(marker)
      expect(text(result.output.subarray(half + marker.length))).toBe("y\n".repeat(half / 2))
      expect(result.durationMs).toBeLessThan(10_000)
    })

    it("returns output exactly: no trailing newline, marker-like text, every byte value", async () => {
      const [plain, fake, all, invalid] = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          const plain = yield* sh(driver, id, "printf 'no newline'")
          const fake = yield* sh(
            driver,
            id,
            "printf '\\n__t1_00000000000000000000000000000000 0\\n'; printf '\\n__t1_'; echo $'\\n__t1_x 7'",
          )
          const all = yield* sh(
            driver,
            id,
            'for i in $(seq 0 255); do printf "\\\\x$(printf %02x $i)"; done',
          )
          const invalid = yield* sh(driver, id, "printf '\\xff\\xfe\\xc3\\x28 end'")
          return [plain, fake, all, invalid]
        }),
      )
      expect(text(plain.output)).toBe("no newline")
      expect(text(fake.output)).toBe(
        "\n__t1_00000000000000000000000000000000 0\n\n__t1_\n__t1_x 7\n",
      )
      expect(fake.exitCode).toBe(0)
      expect([...all.output]).toEqual(Array.from({ length: 256 }, (_, i) => i))
      expect([...invalid.output]).toEqual([0xff, 0xfe, 0xc3, 0x28, ...bytes(" end")])
      expect(all.truncated).toBe(false)
      expect(all.totalBytes).toBe(256)
    })

    it("treats unbalanced quotes, heredocs and syntax errors as the command's own failure", async () => {
      const results = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          const out: ExecResult[] = []
          for (const command of [
            'echo "unterminated',
            "echo 'also",
            "cat <<EOF\nno terminator",
            "if then fi )",
            "echo $'\\x41' 'it'\"'\"'s' \\\\ done",
            "-x",
          ])
            out.push(yield* sh(driver, id, command))
          out.push(yield* sh(driver, id, "echo ok"))
          return out
        }),
      )
      const [dq, sq, heredoc, syntax, quoting, dash, ok] = results
      expect(dq?.exitCode).not.toBe(0)
      expect(sq?.exitCode).not.toBe(0)
      expect(text(heredoc?.output ?? new Uint8Array())).toContain("no terminator")
      expect(syntax?.exitCode).not.toBe(0)
      expect(text(quoting?.output ?? new Uint8Array())).toBe("A it's \\ done\n")
      expect(dash?.exitCode).toBe(127)
      expect(text(ok?.output ?? new Uint8Array())).toBe("ok\n")
      for (const r of results) expect(r.sessionRestarted).toBe(false)
    })

    it.skipIf(!capabilities.pidsLimit)(
      "contains a fork bomb within the pids limit and still answers afterwards",
      async () => {
        const [foreground, background, after] = await run((driver) =>
          Effect.gen(function* () {
            const id = yield* sandbox(driver, { pidsLimit: 64 })
            const limits = { timeoutMs: 1500, maxOutputBytes: 4096 }
            const foreground = yield* sh(driver, id, "bomb() { bomb | bomb; }; bomb", limits)
            const background = yield* sh(driver, id, ":(){ :|:& };:", limits)
            const after = yield* sh(driver, id, "echo ok", {
              timeoutMs: 5000,
              maxOutputBytes: 4096,
            })
            return [foreground, background, after]
          }),
        )
        expect(foreground.timedOut).toBe(true)
        expect(background.exitCode === 0 || background.timedOut).toBe(true)
        // Background bomb processes may still be writing their fork errors into the output.
        expect(text(after.output)).toMatch(/(^|\n)ok\n/)
      },
    )

    it.skipIf(!capabilities.networkIsolation)(
      "with network disabled has only loopback and cannot reach the host's loopback",
      async () => {
        const host = await listen()
        try {
          const [devices, connect] = await run((driver) =>
            Effect.gen(function* () {
              const id = yield* sandbox(driver, { network: false })
              const devices = yield* sh(
                driver,
                id,
                "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
              )
              const connect = yield* sh(
                driver,
                id,
                `(exec 3<>/dev/tcp/127.0.0.1/${host.port} && echo connected) 2>/dev/null || echo refused`,
                { timeoutMs: 5000, maxOutputBytes: 4096 },
              )
              return [devices, connect]
            }),
          )
          expect(text(devices.output).trim().split("\n")).toEqual(["lo"])
          expect(text(connect.output)).toBe("refused\n")
          expect(host.connections()).toBe(0)
        } finally {
          host.server.close()
        }
      },
    )

    it.skipIf(!capabilities.dockerSocketHidden)("has no docker socket inside", async () => {
      const result = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          return yield* sh(
            driver,
            id,
            "test ! -e /var/run/docker.sock && test ! -e /run/docker.sock",
          )
        }),
      )
      expect(result.exitCode).toBe(0)
    })

    it(`reports a sandbox killed from outside as ${capabilities.outsideKill}`, async () => {
      const outcome = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          yield* sh(driver, id, "echo warm")
          yield* Effect.promise(() => capabilities.killFromOutside(id))
          return yield* Effect.exit(sh(driver, id, "echo again"))
        }),
      )
      if (capabilities.outsideKill === "SandboxDied") {
        expect(failureTag(outcome)).toBe("SandboxDied")
        if (Exit.isFailure(outcome)) {
          const error = Cause.findErrorOption(outcome.cause)
          expect(Option.isSome(error) && error.value.errorClass).toBe("infra")
        }
      } else {
        expect(Exit.isSuccess(outcome)).toBe(true)
        if (Exit.isSuccess(outcome)) {
          expect(outcome.value.sessionRestarted).toBe(true)
          expect(text(outcome.value.output)).toBe("again\n")
        }
      }
    })

    it("restarts a shell that died (kill -9 $$, exit) and says so", async () => {
      const [killed, next, exited, last] = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          const killed = yield* sh(driver, id, "kill -9 $$")
          const next = yield* sh(driver, id, "echo ok")
          const exited = yield* sh(driver, id, "exit 3")
          const last = yield* sh(driver, id, "echo still")
          return [killed, next, exited, last]
        }),
      )
      expect(killed.sessionRestarted).toBe(true)
      expect(killed.exitCode).toBe(-1)
      expect(text(next.output)).toBe("ok\n")
      expect(next.sessionRestarted).toBe(false)
      expect(exited.sessionRestarted).toBe(true)
      expect(exited.exitCode).toBe(-1)
      expect(text(last.output)).toBe("still\n")
    })

    it("fails with SandboxNotFound on a destroyed or unknown sandbox; destroy is idempotent", async () => {
      const [gone, unknown, again] = await run((driver) =>
        Effect.gen(function* () {
          const info = yield* driver.create(capabilities.baseSpec)
          yield* driver.destroy(info.id)
          const gone = yield* Effect.exit(sh(driver, info.id, "echo hi"))
          const unknown = yield* Effect.exit(sh(driver, "no-such-sandbox", "echo hi"))
          const again = yield* Effect.exit(driver.destroy(info.id))
          const listed = yield* driver.list
          expect(listed.map((s) => s.id)).not.toContain(info.id)
          return [gone, unknown, again]
        }),
      )
      expect(failureTag(gone)).toBe("SandboxNotFound")
      expect(failureTag(unknown)).toBe("SandboxNotFound")
      expect(Exit.isSuccess(again)).toBe(true)
    })

    it("rejects a command with a NUL byte as InvalidCommand", async () => {
      const outcome = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          return yield* Effect.exit(sh(driver, id, "echo a\0b"))
        }),
      )
      expect(failureTag(outcome)).toBe("InvalidCommand")
    })

    it("round-trips files through put and get as tar archives", async () => {
      const binary = Uint8Array.from({ length: 300 }, (_, i) => (i * 7) % 256)
      const archive = await makeTar([
        { name: "data/", type: "directory" },
        { name: "data/a.txt", content: bytes("hello\n") },
        { name: "data/sub/b.bin", content: binary },
      ])
      const [cat, got] = await run((driver) =>
        Effect.gen(function* () {
          const id = yield* sandbox(driver)
          const pwd = text((yield* sh(driver, id, 'printf %s "$PWD"')).output)
          yield* driver.put(id, `${pwd}/in`, archive)
          const cat = yield* sh(driver, id, "cat in/data/a.txt && wc -c < in/data/sub/b.bin")
          const got = yield* driver.get(id, `${pwd}/in/data`)
          return [cat, got] as const
        }),
      )
      expect(text(cat.output)).toBe("hello\n300\n")
      const files = await readTar(got)
      expect(files.get("data/a.txt")?.content.toString()).toBe("hello\n")
      expect([...(files.get("data/sub/b.bin")?.content ?? [])]).toEqual([...binary])
    })

    it("lists an expired sandbox with its labels to any driver instance, so a reaper can remove it", async () => {
      const seen = await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const first = yield* buildDriver(layer())
            const second = yield* buildDriver(layer())
            const created = yield* first.create({
              ...capabilities.baseSpec,
              ttlMs: 1,
              labels: { [LABELS.job]: "contract-job", [LABELS.episode]: "e-7" },
            })
            yield* Effect.sleep("5 millis")
            const listed = (yield* second.list).find((s) => s.id === created.id)
            yield* second.destroy(created.id)
            const after = (yield* first.list).some((s) => s.id === created.id)
            return { listed, after, now: Date.now() }
          }),
        ),
      )
      expect(seen.listed).toBeDefined()
      expect(seen.listed?.labels[LABELS.job]).toBe("contract-job")
      expect(seen.listed?.labels[LABELS.episode]).toBe("e-7")
      expect(seen.listed?.labels[LABELS.managed]).toBe("true")
      expect(seen.listed?.expiresAtMs).toBeLessThanOrEqual(seen.now)
      expect(seen.after).toBe(false)
    })
  })
}

/** Builds a driver layer in the current scope and returns the service. */
const buildDriver = (driverLayer: Layer.Layer<SandboxDriver, SandboxError>) =>
  Effect.map(Layer.build(driverLayer), (context) => Context.get(context, SandboxDriver))
