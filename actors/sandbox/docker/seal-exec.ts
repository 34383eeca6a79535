import { PassThrough, Writable } from "node:stream"
import type Dockerode from "dockerode"

/**
 * Execs the seal runs: the toolchain's programs only, as root, from `/`, with the loader's
 * variables emptied (the container's Env comes from its spec, and nothing of it should steer
 * what runs here).
 */
const execOptions = (argv: ReadonlyArray<string>) => ({
  Cmd: [...argv],
  User: "0:0",
  WorkingDir: "/",
  Env: ["LD_PRELOAD=", "LD_LIBRARY_PATH=", "LD_AUDIT="],
  AttachStdin: false,
  AttachStdout: true,
  AttachStderr: true,
  Tty: false,
})

const sink = (chunks: Buffer[]) =>
  new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk)
      done()
    },
  })

const ended = (stream: NodeJS.ReadableStream) =>
  new Promise<void>((resolve, reject) => {
    stream.once("error", reject)
    stream.once("end", () => resolve())
  })

export interface Collected {
  readonly exitCode: number
  readonly stdout: Buffer
  readonly stderr: string
}

/** Runs argv in the container and keeps its stdout and stderr apart. */
export const collect = async (
  docker: Dockerode,
  containerId: string,
  argv: ReadonlyArray<string>,
): Promise<Collected> => {
  const exec = await docker.getContainer(containerId).exec(execOptions(argv))
  const stream = await exec.start({ hijack: true, stdin: false })
  const out: Buffer[] = []
  const err: Buffer[] = []
  docker.modem.demuxStream(stream, sink(out), sink(err))
  await ended(stream)
  const info = await exec.inspect()
  return {
    exitCode: info.ExitCode ?? -1,
    stdout: Buffer.concat(out),
    stderr: Buffer.concat(err).toString("utf8"),
  }
}

/**
 * Runs argv (a tar writing an archive to stdout) in `source` and unpacks what it writes into
 * `target` at `/` as it comes, without holding the archive here. Resolves with the exit code and
 * stderr of the exec; the caller decides what a failed one means (the part already unpacked
 * stays).
 */
export const pipeArchive = async (
  docker: Dockerode,
  source: string,
  argv: ReadonlyArray<string>,
  target: string,
): Promise<{ readonly exitCode: number; readonly stderr: string }> => {
  const exec = await docker.getContainer(source).exec(execOptions(argv))
  const stream = await exec.start({ hijack: true, stdin: false })
  const archive = new PassThrough()
  const err: Buffer[] = []
  docker.modem.demuxStream(stream, archive, sink(err))
  const done = ended(stream).then(
    () => void archive.end(),
    (error: unknown) => {
      archive.destroy(error instanceof Error ? error : new Error(String(error)))
      throw error
    },
  )
  await Promise.all([docker.getContainer(target).putArchive(archive, { path: "/" }), done])
  const info = await exec.inspect()
  return { exitCode: info.ExitCode ?? -1, stderr: Buffer.concat(err).toString("utf8") }
}
