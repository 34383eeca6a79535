import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Cause, Effect, Exit, Option, type Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { sandboxDriverContract } from "../driver.contract.ts"
import { type ExecOptions, LABELS, type SandboxSpec, sandboxSpec } from "../driver.ts"
import type { SandboxError } from "../errors.ts"
import { BASE_IMAGE } from "../image/index.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "../image/testing.ts"
import {
  type BwrapDriver,
  BwrapDriverLive,
  killBwrapSandboxProcesses,
  makeBwrapDriver,
} from "./index.ts"
import { seccompInstructions } from "./seccomp.ts"

const root = "/tmp/t1-bwrap-test"

const baseSpec: SandboxSpec = sandboxSpec({ image: BASE_IMAGE, ttlMs: 60_000 })

beforeAll(async () => {
  await ensureTestBaseImage()
}, BASE_IMAGE_TIMEOUT_MS)

sandboxDriverContract("bwrap", () => BwrapDriverLive({ root, interruptGraceMs: 1000 }), {
  baseSpec,
  networkIsolation: true,
  pidsLimit: true,
  dockerSocketHidden: true,
  killFromOutside: (id) => killBwrapSandboxProcesses(id, root),
  outsideKill: "SandboxDied",
})

// The fallback where no C compiler is at hand: keeper.py on the toolchain's Python, started by
// unshare, sh, mount and setpriv instead of launcher.c.
sandboxDriverContract(
  "bwrap with the Python keeper",
  () => BwrapDriverLive({ root, interruptGraceMs: 1000, keeper: "python" }),
  {
    baseSpec,
    networkIsolation: true,
    pidsLimit: true,
    dockerSocketHidden: true,
    killFromOutside: (id) => killBwrapSandboxProcesses(id, root),
    outsideKill: "SandboxDied",
  },
)

const text = (b: Uint8Array) => new TextDecoder().decode(b)
const quick: ExecOptions = { timeoutMs: 20_000, maxOutputBytes: 64 * 1024 }

const withDriver = <A, E>(
  f: (driver: BwrapDriver) => Effect.Effect<A, E, Scope.Scope>,
  options: Parameters<typeof makeBwrapDriver>[0] = { root },
) => Effect.runPromise(Effect.scoped(Effect.flatMap(makeBwrapDriver(options), f)))

const failure = <A>(exit: Exit.Exit<A, unknown>) => {
  if (Exit.isSuccess(exit)) return undefined
  const e = Cause.findErrorOption(exit.cause)
  return Option.isSome(e) ? (e.value as SandboxError) : undefined
}

describe("bwrap driver: limits, network, host files", () => {
  const hostDirs = ["/tmp", "/var/tmp", "/dev/shm", "/root"]
  const marker = `t1-bwrap-host-${process.pid}`
  let made: string[] = []
  beforeAll(() => {
    made = hostDirs.map((dir) => {
      const path = join(dir, marker)
      writeFileSync(path, "host secret\n")
      return path
    })
  })
  afterAll(() => {
    for (const path of made) rmSync(path, { force: true })
  })

  it("host files in /tmp, /var/tmp, /dev/shm and /root are neither visible nor writable", async () => {
    const [look, wrote] = await withDriver((d) =>
      Effect.gen(function* () {
        const { id } = yield* d.create(baseSpec)
        const look = yield* d.exec(
          id,
          `for f in ${made.join(" ")}; do test -e "$f" && echo "SEEN $f"; done; grep -rl 'host secret' /tmp /var/tmp /dev/shm /root 2>/dev/null; echo done`,
          quick,
        )
        const wrote = yield* d.exec(id, made.map((f) => `echo sandbox > ${f}`).join("; "), quick)
        return [look, wrote]
      }),
    )
    expect(text(look.output)).toBe("done\n")
    expect(wrote.exitCode).toBe(0)
    // What the sandbox wrote went to its own files, not the host's.
    const { readFileSync } = await import("node:fs")
    for (const path of made) expect(readFileSync(path, "utf8")).toBe("host secret\n")
  })

  it("localhost resolves to the sandbox's own loopback", async () => {
    const result = await withDriver((d) =>
      Effect.gen(function* () {
        const { id } = yield* d.create(baseSpec)
        return yield* d.exec(
          id,
          'python3 -c \'import socket; s = socket.socket(); s.bind(("localhost", 0)); s.listen(); c = socket.create_connection(("localhost", s.getsockname()[1])); print("connected")\'',
          quick,
        )
      }),
    )
    expect(text(result.output)).toBe("connected\n")
  })

  it("no network but loopback; connecting out fails", async () => {
    const result = await withDriver((d) =>
      Effect.gen(function* () {
        const { id } = yield* d.create(baseSpec)
        return yield* d.exec(
          id,
          "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; python3 -c 'import socket; s=socket.socket(); s.settimeout(2); s.connect((\"10.0.0.1\", 9))' 2>&1 | tail -1",
          quick,
        )
      }),
    )
    const lines = text(result.output).trim().split("\n")
    expect(lines[0]).toBe("lo")
    expect(lines[1]).toMatch(/unreachable|Errno 101/)
  })

  it("network allowed: its own namespace on bwrap's bridge, removed with the sandbox", async () => {
    const { existsSync } = await import("node:fs")
    const { netnsPath } = await import("./network.ts")
    const seen = await withDriver((d) =>
      Effect.gen(function* () {
        const { id } = yield* d.create({ ...baseSpec, network: true })
        const devices = yield* d.exec(
          id,
          "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort",
          quick,
        )
        const before = existsSync(netnsPath(id))
        yield* d.destroy(id)
        return { devices: text(devices.output), before, after: existsSync(netnsPath(id)) }
      }),
    )
    expect(seen).toEqual({ devices: "eth0\nlo\n", before: true, after: false })
  })

  it("pids limit: a sandbox cannot have more processes than its limit", async () => {
    const result = await withDriver((d) =>
      Effect.gen(function* () {
        const { id } = yield* d.create({ ...baseSpec, pidsLimit: 20 })
        return yield* d.exec(
          id,
          "n=0; for i in $(seq 30); do sleep 5 & [ $? -eq 0 ] && n=$((n+1)); done 2>/dev/null; sleep 0.2; ps -e --no-headers | wc -l",
          quick,
        )
      }),
    )
    // bwrap's init, the keeper and the shell, plus as many sleeps as the limit left room for.
    expect(Number(text(result.output).trim().split("\n").at(-1))).toBeLessThanOrEqual(20)
  })

  it("memory limit: a hog over it is OOM-killed and the shell carries on", async () => {
    const [hog, after] = await withDriver((d) =>
      Effect.gen(function* () {
        const { id } = yield* d.create({ ...baseSpec, memoryMb: 96 })
        const hog = yield* d.exec(
          id,
          `python3 -c 'b = b"x" * (512 * 1024 * 1024)'; echo exit=$?`,
          quick,
        )
        const after = yield* d.exec(id, "echo alive", quick)
        return [hog, after]
      }),
    )
    expect(text(hog.output)).toMatch(/exit=(137|1)\n$/)
    expect(text(after.output)).toBe("alive\n")
  })

  it("root in the sandbox is an unprivileged uid on the host, with Docker's capabilities and seccomp", async () => {
    const result = await withDriver((d) =>
      Effect.gen(function* () {
        const { id } = yield* d.create(baseSpec)
        return yield* d.exec(
          id,
          [
            "id -u",
            "cat /proc/self/uid_map",
            // The keeper (pid 2, under bwrap's init): keeper.c, built where a compiler is here.
            "tr '\\0' ' ' < /proc/2/cmdline; echo",
            "grep -E '^(CapEff|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status",
            "(unshare --user true || mount -t tmpfs none /mnt || echo 1 > /proc/sys/kernel/randomize_va_space) 2>/dev/null && echo ESCAPED",
            "echo checked",
          ].join("; "),
          quick,
        )
      }),
    )
    const out = text(result.output)
    expect(out).toMatch(/^0\n\s+0\s+951000\s+1\n\/\.t1v\/t1\/keeper-[0-9a-f]{12} \n/)
    expect(out).toContain("CapEff:\t00000000000000eb")
    expect(out).toContain("CapAmb:\t0000000000000000")
    expect(out).toContain("NoNewPrivs:\t1")
    expect(out).toContain("Seccomp:\t2")
    expect(out).not.toContain("ESCAPED")
    expect(out).toContain("checked")
  })

  it("execArgv runs outside the shell; seal kills what the agent left and restores site files", async () => {
    const [argv, report, after] = await withDriver((d) =>
      Effect.gen(function* () {
        const { id } = yield* d.create(baseSpec)
        yield* d.exec(
          id,
          "echo() { builtin echo FORGED; }; export T1_AGENT=1; (setsid sleep 300 &) ; echo forged > /usr/lib/python3/dist-packages/_pytest/__init__.py; touch /usr/lib/python3/dist-packages/t1added.py",
          quick,
        )
        const execArgv = d.execArgv
        const seal = d.seal
        if (execArgv === undefined || seal === undefined) return yield* Effect.die("missing")
        const argv = yield* execArgv(
          id,
          ["/.t1v/bin/bash", "-c", 'echo "[$T1_AGENT]"; exit 4'],
          quick,
        )
        const report = yield* seal(id, {
          pristinePaths: ["/usr/lib/python3/dist-packages"],
          timeoutMs: 60_000,
        })
        const after = yield* execArgv(
          id,
          [
            "/.t1v/bin/bash",
            "-c",
            "ps -e --no-headers | wc -l; head -c 200 /usr/lib/python3/dist-packages/_pytest/__init__.py; ls /usr/lib/python3/dist-packages/t1added.py 2>&1 | tail -c 30",
          ],
          quick,
        )
        return [argv, report, after]
      }),
    )
    expect([text(argv.output), argv.exitCode]).toEqual(["[]\n", 4])
    expect(report.toolchain).toBe(true)
    expect(report.stopped).toBeGreaterThanOrEqual(2)
    expect(report.restored).toContain("/usr/lib/python3/dist-packages/_pytest/__init__.py")
    expect(report.removed).toContain("/usr/lib/python3/dist-packages/t1added.py")
    const out = text(after.output)
    expect(out).not.toContain("forged")
    expect(out).toContain("No such file")
  })

  it("lists with labels and puts files owned by the sandbox's root", async () => {
    const out = await withDriver((d) =>
      Effect.gen(function* () {
        const { id } = yield* d.create({ ...baseSpec, labels: { [LABELS.job]: "j" } })
        const listed = (yield* d.list).find((s) => s.id === id)
        const { singleFileTar } = yield* Effect.promise(
          () => import("../../../services/tar/index.ts"),
        )
        const tar = yield* Effect.promise(() =>
          singleFileTar("f.txt", new TextEncoder().encode("x")),
        )
        yield* d.put(id, "/tests/sub", tar)
        const owner = yield* d.exec(id, "stat -c '%U %s' /tests/sub/f.txt", quick)
        return { listed, owner: text(owner.output) }
      }),
    )
    expect(out.listed?.labels[LABELS.job]).toBe("j")
    expect(out.owner).toBe("root 1\n")
  })
})

describe("bwrap driver: bad input", () => {
  it("fails at start, with the reason and the fix, where bwrap is missing", async () => {
    const exit = await Effect.runPromiseExit(
      Effect.scoped(makeBwrapDriver({ root, bwrap: "/nonexistent/bwrap" })),
    )
    const error = failure(exit)
    expect(error?._tag).toBe("EngineUnavailable")
    expect(error?.message).toMatch(/bwrap is not installed.*bubblewrap/)
  })

  it("fails at start with the sysctl fix where user namespaces cannot be made", async () => {
    // A bwrap that cannot unshare: a script that fails the way bwrap does there.
    const dir = mkdtempSync("/tmp/t1-fake-bwrap-")
    const fake = join(dir, "bwrap")
    writeFileSync(
      fake,
      "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n",
      { mode: 0o755 },
    )
    try {
      const error = failure(
        await Effect.runPromiseExit(Effect.scoped(makeBwrapDriver({ root, bwrap: fake }))),
      )
      expect(error?._tag).toBe("EngineUnavailable")
      expect(error?.message).toMatch(
        /user namespaces.*kernel\.unprivileged_userns_clone=1.*user\.max_user_namespaces/,
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("creates from the cached export when the engine does not answer", async () => {
    const { default: Dockerode } = await import("dockerode")
    const unreachable = new Dockerode({ socketPath: "/nonexistent/docker.sock" })
    const out = await withDriver(
      (d) =>
        Effect.gen(function* () {
          const { id } = yield* d.create(baseSpec)
          return text((yield* d.exec(id, "cat /etc/debian_version | cut -d. -f1", quick)).output)
        }),
      { root, docker: unreachable },
    )
    expect(out).toBe("12\n")
  })

  it("t1 actor sandbox --driver bwrap fails at start where bwrap is missing; other names are refused", async () => {
    const { sandboxActor } = await import("../index.ts")
    const { makeMemoryBus, Bus, subjectsFor } = await import("../../../services/bus/index.ts")
    const { Metrics, makeMetrics } = await import("../../../services/metrics/index.ts")
    const context = { subjects: subjectsFor("bwrapflags"), concurrency: 1, shutdownGraceMs: 100 }
    expect(() => sandboxActor.run(context, { driver: "podman" })).toThrow(
      '--driver must be auto, docker, local or bwrap, got "podman"',
    )
    const exit = await Effect.runPromiseExit(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* makeMemoryBus()
          return yield* sandboxActor
            .run(context, { driver: "bwrap", bwrap: "/nonexistent/bwrap", "sandbox-root": root })
            .pipe(
              Effect.provideService(Bus, bus),
              Effect.provideService(Metrics, makeMetrics({ defaultMetrics: false })),
            )
        }),
      ),
    )
    expect(Exit.isFailure(exit)).toBe(true)
    expect(String(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "")).toMatch(
      /bwrap is not installed.*fix: install the package bubblewrap/,
    )
  })

  it("refuses a user other than root", async () => {
    const exit = await withDriver((d) => Effect.exit(d.create({ ...baseSpec, user: "1000" })))
    expect(failure(exit)?._tag).toBe("InvalidSandboxSpec")
  })

  it("gives a networked sandbox an address no other has, and fails when none is left", async () => {
    const { BWRAP_GATEWAY, freeAddress } = await import("./network.ts")
    const taken = new Set<string>()
    for (let i = 0; i < 2000; i++) {
      const address = freeAddress(taken)
      expect(taken.has(address) || address === BWRAP_GATEWAY).toBe(false)
      taken.add(address)
    }
    const all = new Set<string>()
    for (let a = 0; a < 256; a++) for (let b = 1; b < 255; b++) all.add(`10.213.${a}.${b}`)
    expect(() => freeAddress(all)).toThrow(/no free address/)
  })

  it("compiles a seccomp filter that kills other architectures and ends in EPERM", () => {
    const program = seccompInstructions()
    expect(program.length).toBeLessThan(4096)
    expect(program[1]?.[3]).toBe(0xc000003e)
    expect(program.at(-1)).toEqual([0x06, 0, 0, 0x00050001])
  })
})
