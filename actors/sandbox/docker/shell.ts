import { Writable } from "node:stream"
import type Dockerode from "dockerode"
import { CappedOutput } from "../shell/capped-output.ts"
import type { ShellProcess, StartShell } from "../shell/process.ts"
import { reasonOf } from "./engine.ts"
import { signalGroupFromHost } from "./host-kill.ts"

export interface DockerShellOptions {
  /** "" = the container's user. */
  readonly user: string
  /** "" = the container's working directory. */
  readonly workdir: string
  readonly env?: Readonly<Record<string, string>>
}

/**
 * Feeds stdout and stderr of an attached, multiplexed engine stream to `onChunk` in the order
 * written; resolves when the stream ends. Nothing is kept here: what the output is bounded by is
 * the caller's to decide (runArgv keeps head and tail only).
 */
export const demux = (
  docker: Dockerode,
  stream: NodeJS.ReadableStream,
  onChunk: (chunk: Buffer) => void,
): Promise<void> => {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      onChunk(chunk)
      done()
    },
  })
  const ended = new Promise<void>((resolve, reject) => {
    stream.once("error", reject)
    stream.once("end", () => resolve())
  })
  docker.modem.demuxStream(stream, sink, sink)
  return ended
}

/**
 * Runs a short command in the container (as its user unless `user` says otherwise) and waits for
 * it; resolves with its exit code and output (stdout and stderr together).
 */
export const runOnce = async (
  docker: Dockerode,
  containerId: string,
  cmd: ReadonlyArray<string>,
  user?: string,
): Promise<{ readonly exitCode: number; readonly output: string }> => {
  const exec = await docker.getContainer(containerId).exec({
    Cmd: [...cmd],
    AttachStdin: false,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    ...(user === undefined ? {} : { User: user }),
  })
  const stream = await exec.start({ hijack: true, stdin: false })
  const chunks: Buffer[] = []
  await demux(docker, stream, (chunk) => chunks.push(chunk))
  const info = await exec.inspect()
  return { exitCode: info.ExitCode ?? -1, output: Buffer.concat(chunks).toString("utf8") }
}

/**
 * Sends a signal to a process group in the container, from an exec as the container's user: the
 * shell's own user, so it may signal its own processes (root has CAP_KILL besides). Resolves
 * once `kill` has run.
 */
export const signalGroup = async (
  docker: Dockerode,
  containerId: string,
  pgid: number,
  signal: "INT" | "KILL",
): Promise<void> => {
  if (!Number.isInteger(pgid) || pgid <= 1) throw new Error(`refusing to signal group ${pgid}`)
  // bash's builtin kill: the shell is there anyway, and procps' kill rejects "--".
  const inside = await runOnce(docker, containerId, [
    "bash",
    "-c",
    'kill -s "$0" -- "-$1"',
    signal,
    String(pgid),
  ]).catch((error: unknown) => ({ exitCode: -1, output: String(error) }))
  const { exitCode, output } = inside
  // A group that is already gone is not an error: the job ended by itself meanwhile.
  if (exitCode === 0 || /no such process/i.test(output)) return
  // 126/-1: nothing could start inside (e.g. a fork bomb holds every pid): signal from the host.
  if (await signalGroupFromHost(docker, containerId, pgid, signal)) return
  throw new Error(`kill -${signal} -${pgid} exited ${exitCode}: ${output.trim()}`)
}

/**
 * StartShell over a docker exec: `setsid -w bash --noprofile --norc` with stdin, stdout and
 * stderr attached (no TTY), the two output streams demultiplexed and merged in arrival order.
 * `-w` keeps setsid waiting for bash: an exec is already a session leader, so setsid forks, and
 * the exec should last exactly as long as the shell.
 */
export const dockerShell =
  (docker: Dockerode, containerId: string, options: DockerShellOptions): StartShell =>
  async (): Promise<ShellProcess> => {
    const exec = await docker.getContainer(containerId).exec({
      Cmd: ["setsid", "-w", "bash", "--noprofile", "--norc"],
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      ...(options.user === "" ? {} : { User: options.user }),
      ...(options.workdir === "" ? {} : { WorkingDir: options.workdir }),
      Env: Object.entries(options.env ?? {}).map(([name, value]) => `${name}=${value}`),
    })
    const stream = await exec.start({ hijack: true, stdin: true })

    const outputListeners: Array<(chunk: Uint8Array) => void> = []
    const exitListeners: Array<(reason: string) => void> = []
    let exiting = false
    let exitReason: string | undefined
    let closed = false

    const output = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const listener of outputListeners) listener(chunk)
        done()
      },
    })
    docker.modem.demuxStream(stream, output, output)

    const describeExit = async (how: string): Promise<string> => {
      try {
        const info = await exec.inspect()
        const container = await docker.getContainer(containerId).inspect()
        const state = container.State
        if (!state.Running)
          return `${how}: the container stopped (exit ${state.ExitCode}${state.OOMKilled ? ", OOM-killed" : ""})`
        return `${how}: the shell exited${info.ExitCode === null ? "" : ` with status ${info.ExitCode}`}`
      } catch (error) {
        return `${how}: ${reasonOf(error)}`
      }
    }
    const exited = (how: string) => {
      if (exiting) return
      exiting = true
      void describeExit(how).then((reason) => {
        exitReason = reason
        for (const listener of exitListeners.splice(0)) listener(reason)
      })
    }
    stream.once("end", () => exited("the shell's output ended"))
    stream.once("close", () => exited("the shell's stream closed"))
    stream.once("error", (error) => exited(`the shell's stream failed (${reasonOf(error)})`))

    return {
      write: (data) =>
        new Promise<void>((resolve, reject) => {
          if (closed || stream.destroyed || stream.writableEnded) {
            reject(new Error("the shell's stdin is closed"))
            return
          }
          stream.write(data, (error) => (error ? reject(error) : resolve()))
        }),
      onOutput: (listener) => {
        outputListeners.push(listener)
      },
      onExit: (listener) => {
        const reason = exitReason
        if (reason === undefined) exitListeners.push(listener)
        else queueMicrotask(() => listener(reason))
      },
      signal: (pgid, signal) => signalGroup(docker, containerId, pgid, signal),
      close: async () => {
        if (closed) return
        closed = true
        // EOF on stdin ends an idle bash; destroying the socket drops a busy one's output.
        stream.end()
        stream.destroy()
      },
    }
  }

/**
 * Runs `argv` as a new process in the container, as its user, and collects its output (stdout and
 * stderr together, head and tail kept within `maxOutputBytes`). At `timeoutMs` it stops waiting
 * and kills the process from this machine when the engine runs here (the exec's pid is a host
 * pid); callers that need a hard stop anywhere wrap argv in a `timeout` of their own.
 */
export const runArgv = async (
  docker: Dockerode,
  containerId: string,
  argv: ReadonlyArray<string>,
  options: { readonly timeoutMs: number; readonly maxOutputBytes: number },
): Promise<{
  readonly output: Uint8Array
  readonly exitCode: number
  readonly timedOut: boolean
  readonly truncated: boolean
  readonly totalBytes: number
}> => {
  const exec = await docker.getContainer(containerId).exec({
    Cmd: [...argv],
    AttachStdin: false,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    // The container's own working directory is the agent's to remove, which would keep the
    // exec from starting at all.
    WorkingDir: "/",
  })
  const stream = await exec.start({ hijack: true, stdin: false })
  const output = new CappedOutput(options.maxOutputBytes)
  // A stream that breaks ends the output as well; the exit code comes from the engine. Caught
  // here, since after a timeout nobody awaits it (an unhandled rejection would end the process).
  const ended = demux(docker, stream, (chunk) =>
    output.append(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength)),
  ).catch(() => undefined)
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), options.timeoutMs)
  })
  const finished = await Promise.race([ended.then(() => "done" as const), late])
  clearTimeout(timer)
  if (finished === "late") {
    const pid = (await exec.inspect().catch(() => undefined))?.Pid
    if (pid !== undefined && pid > 1) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // Not this machine's process (a remote engine), or already gone.
      }
    }
    if ("destroy" in stream && typeof stream.destroy === "function") stream.destroy()
    return {
      output: output.bytes(),
      exitCode: -1,
      timedOut: true,
      truncated: output.truncated,
      totalBytes: output.totalBytes,
    }
  }
  const info = await exec.inspect()
  return {
    output: output.bytes(),
    exitCode: info.ExitCode ?? -1,
    timedOut: false,
    truncated: output.truncated,
    totalBytes: output.totalBytes,
  }
}
