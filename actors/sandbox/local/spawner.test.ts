import { readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { afterAll, describe, expect, it } from "vitest"
import {
  ChildExits,
  closeProcessHelper,
  helperAvailable,
  type SpawnMode,
  type Started,
  startProcess,
} from "./spawner.ts"

afterAll(() => closeProcessHelper())

const options = { cwd: tmpdir(), env: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" } }

const parentOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
}

const output = (child: Started) =>
  new Promise<string>((resolve) => {
    let text = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (s: string) => {
      text += s
    })
    child.stdout.on("close", () => resolve(text))
  })

const exit = (child: Started) =>
  new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.onExit((code, signal) => resolve({ code, signal })),
  )

describe.runIf(helperAvailable())("process helper", () => {
  it("starts processes this process did not fork, with the same stdio, status and signals", async () => {
    const modes: SpawnMode[] = ["helper", "direct"]
    for (const mode of modes) {
      const child = await startProcess(
        mode,
        "/bin/sh",
        ["-c", 'grep SigIgn /proc/self/status; cat; echo "cwd=$PWD"; echo oops >&2; exit 3'],
        options,
      )
      const parent = parentOf(child.pid)
      if (mode === "helper") expect(parent).not.toBe(process.pid)
      else expect(parent).toBe(process.pid)
      const out = output(child)
      let err = ""
      child.stderr.on("data", (d: Buffer) => {
        err += d.toString()
      })
      child.stdin.end("hello\n")
      expect(await exit(child)).toEqual({ code: 3, signal: null })
      // Nothing ignored: the helper (Python) ignores SIGPIPE, SIGXFSZ and SIGINT itself.
      expect(await out).toBe(`SigIgn:\t0000000000000000\nhello\ncwd=${tmpdir()}\n`)
      expect(child.exited()).toBe(true)
      await new Promise((r) => setTimeout(r, 20))
      expect(err).toBe("oops\n")
    }
  })

  it("reports a signal, and a program that cannot start as a rejected start", async () => {
    const child = await startProcess("helper", "sleep", ["30"], options)
    const ended = exit(child)
    child.kill("SIGTERM")
    expect(await ended).toEqual({ code: null, signal: "SIGTERM" })
    await expect(startProcess("helper", "/no/such/program", [], options)).rejects.toMatchObject({
      code: "ENOENT",
    })
    await expect(
      startProcess("helper", "/bin/true", [], { ...options, cwd: "/no/such/dir" }),
    ).rejects.toMatchObject({ code: "ENOENT" })
  })

  it("a helper that dies is replaced, and its orphans' ends are still seen", async () => {
    const before = await startProcess("helper", "sleep", ["30"], options)
    const helperPid = parentOf(before.pid)
    process.kill(helperPid, "SIGKILL")
    await new Promise((r) => setTimeout(r, 100))
    const ended = exit(before)
    before.kill("SIGKILL")
    expect(await ended).toEqual({ code: null, signal: null })
    const after = await startProcess("helper", "/bin/sh", ["-c", "sleep 0.2; echo again"], options)
    expect(parentOf(after.pid)).not.toBe(helperPid)
    expect(await output(after)).toBe("again\n")
  })
})

describe("child exits", () => {
  it("a reused pid names the new child: the earlier one's listener is not told again", () => {
    const exits = new ChildExits()
    const told: string[] = []
    exits.started(5, (e) => told.push(`first ${e.code}`))
    exits.exited(5, { code: 0, signal: null })
    exits.started(5, (e) => told.push(`second ${e.signal}`))
    exits.exited(7, { code: 1, signal: null })
    expect(told).toEqual(["first 0"])
    exits.exited(5, { code: null, signal: "SIGKILL" })
    exits.exited(5, { code: 2, signal: null })
    expect(told).toEqual(["first 0", "second SIGKILL"])
    exits.started(9, () => undefined)
    expect(exits.drain().map(([pid]) => pid)).toEqual([9])
  })
})
