import { existsSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Cause, Effect, Exit, Option, type Scope } from "effect"
import * as tar from "tar-stream"
import { describe, expect, it } from "vitest"
import { sandboxDriverContract } from "../driver.contract.ts"
import type { ExecOptions, SandboxSpec } from "../driver.ts"
import type { SandboxError } from "../errors.ts"
import {
  killLocalSandboxProcesses,
  type LocalDriver,
  LocalDriverLive,
  makeLocalDriver,
  probeIsolation,
} from "./index.ts"

const root = join(tmpdir(), "t1-sandboxes-test")
const isolation = await probeIsolation("auto", tmpdir())

const baseSpec: SandboxSpec = {
  image: "",
  cpus: 0,
  memoryMb: 0,
  pidsLimit: 0,
  network: false,
  user: "",
  workdir: isolation.mountNamespace ? "/app" : "",
  env: {},
  labels: {},
  ttlMs: 60_000,
}

sandboxDriverContract("local", () => LocalDriverLive({ root, interruptGraceMs: 1000 }), {
  baseSpec,
  networkIsolation: isolation.networkNamespace,
  pidsLimit: isolation.cgroups !== undefined,
  dockerSocketHidden: isolation.mountNamespace,
  killFromOutside: (id) => killLocalSandboxProcesses(id, root),
  outsideKill: "SandboxDied",
})

// What an unprivileged user gets: no namespaces, no cgroups. Only the shell's behaviour holds.
sandboxDriverContract(
  "local without isolation",
  () => LocalDriverLive({ root, isolation: "none", interruptGraceMs: 1000 }),
  {
    baseSpec: { ...baseSpec, workdir: "" },
    networkIsolation: false,
    pidsLimit: false,
    dockerSocketHidden: false,
    killFromOutside: (id) => killLocalSandboxProcesses(id, root),
    outsideKill: "SandboxDied",
  },
)

const text = (b: Uint8Array) => new TextDecoder().decode(b)
const quick: ExecOptions = { timeoutMs: 10_000, maxOutputBytes: 64 * 1024 }

const withDriver = <A, E>(
  f: (driver: LocalDriver) => Effect.Effect<A, E, Scope.Scope>,
  options: Parameters<typeof makeLocalDriver>[0] = { root },
) => Effect.runPromise(Effect.scoped(Effect.flatMap(makeLocalDriver(options), f)))

const failure = <A>(exit: Exit.Exit<A, SandboxError>) => {
  if (Exit.isSuccess(exit)) return undefined
  const e = Cause.findErrorOption(exit.cause)
  return Option.isSome(e) ? e.value : undefined
}

const archiveOf = async (
  entries: ReadonlyArray<{
    name: string
    type?: "symlink" | "link"
    linkname?: string
    body?: string
  }>,
) => {
  const pack = tar.pack()
  const chunks: Buffer[] = []
  const done = (async () => {
    for await (const c of pack) chunks.push(c as Buffer)
  })()
  for (const e of entries)
    if (e.type !== undefined) pack.entry({ name: e.name, type: e.type, linkname: e.linkname ?? "" })
    else pack.entry({ name: e.name }, e.body ?? "")
  pack.finalize()
  await done
  return new Uint8Array(Buffer.concat(chunks))
}

describe("local driver", () => {
  it("starts its sandboxes' processes through the helper by default, or with node's spawn", async () => {
    for (const spawn of ["helper", "direct"] as const) {
      const [mode, parent, interrupted] = await withDriver(
        (driver) =>
          Effect.gen(function* () {
            const { id } = yield* driver.create(baseSpec)
            const ppid = yield* driver.exec(id, "echo $PPID", quick)
            const slept = yield* driver.exec(id, "sleep 5", { ...quick, timeoutMs: 300 })
            return [driver.spawn, Number(text(ppid.output).trim()), slept.exitCode] as const
          }),
        { root, spawn },
      )
      expect(mode).toBe(spawn)
      // The shell's parent: the helper (this process never forked it), or this process.
      if (spawn === "helper") expect(parent).not.toBe(process.pid)
      else expect(parent).toBe(process.pid)
      expect(interrupted).toBe(130)
    }
  })

  it("keeps archive entries inside their target, refusing ../ and writes through symlinks", async () => {
    const outside = join(root, `outside-${process.pid}`)
    const outcomes = await withDriver((driver) =>
      Effect.gen(function* () {
        const { id } = yield* driver.create(baseSpec)
        const put = (entries: Parameters<typeof archiveOf>[0], path = "in") =>
          Effect.flatMap(
            Effect.promise(() => archiveOf(entries)),
            (archive) => Effect.exit(driver.put(id, path, archive)),
          )
        const climb = yield* put([{ name: "../../../../outside-climb", body: "x" }])
        const viaLink = yield* put([
          { name: "escape", type: "symlink", linkname: outside },
          { name: "escape/file", body: "x" },
        ])
        const hardLink = yield* put([
          { name: "passwd", type: "link", linkname: "../../../../../etc/passwd" },
        ])
        const elsewhere = yield* put([{ name: "a", body: "x" }], "/etc")
        const fine = yield* put([{ name: "ok/a.txt", body: "fine\n" }])
        const read = yield* driver.exec(
          id,
          "cat in/ok/a.txt; test -L in/escape && echo link-kept",
          quick,
        )
        const getOutside = yield* Effect.exit(driver.get(id, "in/escape/x"))
        const getEtc = yield* Effect.exit(driver.get(id, "/etc/passwd"))
        return { climb, viaLink, hardLink, elsewhere, fine, read, getOutside, getEtc }
      }),
    )
    for (const refused of [outcomes.climb, outcomes.viaLink, outcomes.hardLink, outcomes.elsewhere])
      expect(failure(refused)?._tag).toBe("FileTransferError")
    expect(Exit.isSuccess(outcomes.fine)).toBe(true)
    expect(text(outcomes.read.output)).toBe("fine\nlink-kept\n")
    expect(failure(outcomes.getOutside)?._tag).toBe("FileTransferError")
    expect(failure(outcomes.getEtc)?._tag).toBe("FileTransferError")
    expect(existsSync(outside)).toBe(false)
    expect(existsSync(join(root, "outside-climb"))).toBe(false)
  })

  it.skipIf(!isolation.mountNamespace)(
    "transfers files in a sandbox's private /tests and /logs, and nowhere else outside the workdir",
    async () => {
      const [inFirst, inSecond, back, link, etc] = await withDriver((driver) =>
        Effect.gen(function* () {
          const first = yield* driver.create(baseSpec)
          const second = yield* driver.create(baseSpec)
          const archive = yield* Effect.promise(() =>
            archiveOf([{ name: "test.sh", body: "echo mine\n" }]),
          )
          yield* driver.put(first.id, "/tests", archive)
          const inFirst = yield* driver.exec(first.id, "cat /tests/test.sh", quick)
          const inSecond = yield* driver.exec(second.id, "ls -A /tests", quick)
          yield* driver.exec(first.id, "mkdir -p /logs/v && echo 1 > /logs/v/reward.txt", quick)
          const back = yield* driver.get(first.id, "/logs/v/reward.txt")
          // A symlink the sandbox made there leads to the host's files: refused.
          yield* driver.exec(first.id, "ln -s /etc /tests/etc", quick)
          const link = yield* Effect.exit(driver.put(first.id, "/tests/etc", archive))
          const etc = yield* Effect.exit(driver.put(first.id, "/etc", archive))
          return [inFirst, inSecond, back, link, etc] as const
        }),
      )
      expect(text(inFirst.output)).toBe("echo mine\n")
      expect(text(inSecond.output)).toBe("")
      expect(existsSync("/tests/test.sh")).toBe(false)
      expect(back.byteLength).toBeGreaterThan(512)
      expect(text(back)).toContain("reward.txt")
      expect(failure(link)?._tag).toBe("FileTransferError")
      expect(failure(etc)?._tag).toBe("FileTransferError")
    },
  )

  it.skipIf(!isolation.mountNamespace)(
    "gives each sandbox its own /app, leaving the host's untouched",
    async () => {
      const [a, b] = await withDriver((driver) =>
        Effect.gen(function* () {
          const first = yield* driver.create(baseSpec)
          const second = yield* driver.create(baseSpec)
          yield* driver.exec(first.id, "echo a > mine && mkdir -p d", quick)
          yield* driver.exec(second.id, "kill -9 $$", quick)
          const a = yield* driver.exec(first.id, "ls /app", quick)
          const b = yield* driver.exec(second.id, "pwd; ls -A /app", quick)
          return [a, b]
        }),
      )
      expect(text(a.output)).toBe("d\nmine\n")
      expect(text(b.output)).toBe("/app\n")
      expect(existsSync("/app/mine")).toBe(false)
    },
  )

  it("rejects workdirs it cannot provide as InvalidSandboxSpec", async () => {
    const tags = await withDriver((driver) =>
      Effect.forEach(
        ["relative", "/", "/proc/x", "/usr/local/app", "/no/such/parent/app", root],
        (workdir) =>
          Effect.map(
            Effect.exit(driver.create({ ...baseSpec, workdir })),
            (exit) => failure(exit)?._tag,
          ),
      ),
    )
    expect(tags).toEqual(Array(6).fill("InvalidSandboxSpec"))
    const unprivileged = await withDriver(
      (driver) => Effect.exit(driver.create({ ...baseSpec, workdir: "/app" })),
      { root, isolation: "none" },
    )
    expect(failure(unprivileged)?._tag).toBe("InvalidSandboxSpec")
  })

  it.runIf(isolation.mountNamespace)(
    "gives each sandbox its own /tests and /logs: concurrent verifications never share them",
    async () => {
      const seen = await withDriver((driver) =>
        Effect.gen(function* () {
          const a = yield* driver.create(baseSpec)
          const b = yield* driver.create(baseSpec)
          yield* driver.exec(a.id, "echo a > /tests/test_x.py && mkdir /logs/verifier", quick)
          const inB = yield* driver.exec(b.id, "ls -A /tests /logs", quick)
          const inA = yield* driver.exec(a.id, "cat /tests/test_x.py", quick)
          return { inA: text(inA.output), inB: text(inB.output) }
        }),
      )
      expect(seen.inA).toBe("a\n")
      expect(seen.inB).toBe("/logs:\n\n/tests:\n")
      expect(existsSync("/tests/test_x.py")).toBe(false)
    },
  )

  it("gives the shell the spec's environment, a private HOME, and none of the host's variables", async () => {
    process.env.T1_HOST_ONLY = "secret"
    try {
      const result = await withDriver((driver) =>
        Effect.gen(function* () {
          const { id } = yield* driver.create({ ...baseSpec, env: { GREETING: "hi there" } })
          return yield* driver.exec(
            id,
            'echo "$GREETING|$T1_HOST_ONLY|$PATH"; case "$HOME" in */home) echo private-home;; esac',
            quick,
          )
        }),
      )
      expect(text(result.output)).toBe(
        "hi there||/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nprivate-home\n",
      )
    } finally {
      delete process.env.T1_HOST_ONLY
    }
  })

  it("kills every process of a sandbox on destroy, also those that left its process group", async () => {
    const { id, pids } = await withDriver((driver) =>
      Effect.gen(function* () {
        const { id } = yield* driver.create(baseSpec)
        const started = yield* driver.exec(
          id,
          "sleep 300 & echo pid=$!; setsid sh -c 'echo $$ > away.pid; exec sleep 300' >/dev/null 2>&1 </dev/null & sleep 0.2; echo pid=$(cat away.pid)",
          quick,
        )
        yield* driver.destroy(id)
        const pids = [...text(started.output).matchAll(/pid=(\d+)/g)].map((m) => Number(m[1]))
        return { id, pids }
      }),
    )
    expect(pids).toHaveLength(2)
    for (const pid of pids) expect(existsSync(`/proc/${pid}/stat`) && !isZombie(pid)).toBe(false)
    expect(existsSync(join(root, id))).toBe(false)
  })

  it.skipIf(isolation.cgroups?.parents.memory === undefined)(
    "enforces memoryMb through its cgroup",
    async () => {
      const result = await withDriver((driver) =>
        Effect.gen(function* () {
          const { id } = yield* driver.create({ ...baseSpec, memoryMb: 64 })
          return yield* driver.exec(
            id,
            'awk \'BEGIN { s = sprintf("%300000000s", ""); print length(s) }\'; echo status=$?',
            quick,
          )
        }),
      )
      expect(text(result.output)).toMatch(/status=(137|2)\n$/)
      expect(text(result.output)).not.toContain("300000000\n")
    },
  )
})

const isZombie = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")
  } catch {
    return true
  }
}
