import { spawn } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync } from "node:fs"
import {
  copyFile,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type Dockerode from "dockerode"
import { Effect } from "effect"
import { reasonOf, statusCode } from "../docker/engine.ts"
import { withFileLock } from "../image/lock.ts"
import { DEFAULT_PATH } from "../local/isolation.ts"
import { TOOLCHAIN_ROOT, toolchainVolume } from "../toolchain/toolchain.ts"
import { seccompProgram } from "./seccomp.ts"

/**
 * A sandbox image for bwrap: the docker image's files exported once into a directory (the
 * read-only lower layer of every sandbox's overlay), the verifier toolchain built from them,
 * and the image's environment. Cached under the t1 cache directory by image id.
 */
export interface BwrapImage {
  readonly id: string
  readonly rootfs: string
  readonly toolchain: string
  /** The image's ENV (PATH, LANG…), the base of every process's environment. */
  readonly env: Readonly<Record<string, string>>
  /** The seccomp filter file (seccomp.ts), given to bwrap on a descriptor. */
  readonly seccomp: string
}

/**
 * Not under the home directory: the sandboxes' host uid must reach the toolchain, and a root
 * home is closed to other users.
 */
export const defaultBwrapCache = (): string =>
  process.env.T1_BWRAP_CACHE || join("/var", "cache", "t1", "bwrap")

/** Runs a program to its end; rejects with its stderr tail when it fails. */
export const runProgram = (
  file: string,
  args: ReadonlyArray<string>,
  options: { readonly input?: NodeJS.ReadableStream; readonly cwd?: string } = {},
): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = spawn(file, [...args], {
      stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      cwd: options.cwd,
      env: { PATH: DEFAULT_PATH },
    })
    let out = ""
    let err = ""
    child.stdout?.on("data", (d: Buffer) => {
      out = (out + d.toString()).slice(-100_000)
    })
    child.stderr?.on("data", (d: Buffer) => {
      err = (err + d.toString()).slice(-4000)
    })
    child.once("error", reject)
    if (options.input !== undefined && child.stdin !== null) {
      child.stdin.on("error", () => undefined)
      options.input.pipe(child.stdin)
    }
    child.once("close", (code, signal) => {
      if (code === 0) resolve(out)
      else reject(new Error(`${file} ${args[0] ?? ""} exited ${signal ?? code}: ${err.trim()}`))
    })
  })

const toolchainSources = async () => {
  const read = (name: string) => readFile(new URL(`../toolchain/${name}`, import.meta.url), "utf8")
  return { build: await read("build.py"), python3: await read("python3") }
}

const HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

/** Unpacks the image's file system into `rootfs` (docker export of a never-started container). */
const exportImage = async (docker: Dockerode, image: string, rootfs: string) => {
  const container = await docker.createContainer({
    Image: image,
    Entrypoint: ["/t1-never-started"],
    Cmd: [],
    Labels: { "t1.bwrap-export": "true" },
    NetworkDisabled: true,
  })
  try {
    const stream = await container.export()
    await mkdir(rootfs, { recursive: true })
    await runProgram("tar", ["-x", "--numeric-owner", "-f", "-", "-C", rootfs], { input: stream })
  } finally {
    await container.remove({ force: true }).catch(() => undefined)
  }
  // What docker adds to every container's file system, not the image's.
  await rm(join(rootfs, ".dockerenv"), { force: true })
  // The export leaves /etc/hosts empty (docker writes it at each start): localhost must resolve.
  await writeFile(join(rootfs, "etc", "hosts"), HOSTS, { mode: 0o644 })
  // The toolchain's mount point: the lower layer is never written once sandboxes use it.
  await mkdir(join(rootfs, TOOLCHAIN_ROOT.slice(1)), { recursive: true })
}

/** Builds the verifier toolchain (toolchain/build.py) from `rootfs` into `out`, in a bwrap. */
const buildToolchain = async (bwrap: string, rootfs: string, out: string) => {
  const { build, python3 } = await toolchainSources()
  await mkdir(out, { recursive: true })
  await runProgram(bwrap, [
    "--unshare-all",
    "--die-with-parent",
    "--ro-bind",
    rootfs,
    "/",
    "--bind",
    out,
    TOOLCHAIN_ROOT,
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    "--clearenv",
    "--setenv",
    "PATH",
    "/usr/sbin:/usr/bin:/sbin:/bin",
    "--setenv",
    "T1V_PYTHON3",
    python3,
    "--",
    "python3",
    "-c",
    build,
    TOOLCHAIN_ROOT,
  ])
}

const envOf = (list: ReadonlyArray<string> | undefined): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const entry of list ?? []) {
    const at = entry.indexOf("=")
    if (at > 0) env[entry.slice(0, at)] = entry.slice(at + 1)
  }
  return env
}

/**
 * The image's bwrap form, made when missing: exported (files owned by `hostUid`, whom the
 * sandbox's root is on this host), the toolchain built, the seccomp filter written. Concurrent
 * callers (processes too) wait for one build.
 */
export const ensureBwrapImage = (
  docker: Dockerode,
  image: string,
  options: { readonly cacheDir: string; readonly bwrap: string; readonly hostUid: number },
): Effect.Effect<BwrapImage, Error> =>
  Effect.gen(function* () {
    const inspected = yield* Effect.tryPromise({
      try: () => docker.getImage(image).inspect(),
      catch: (error) =>
        statusCode(error) === 404
          ? new ImageMissing(image)
          : new Error(`cannot inspect ${image}: ${reasonOf(error)}`),
    }).pipe(
      // Without an engine, the image's last export here serves (bwrap itself needs none).
      Effect.catch((error) =>
        error instanceof ImageMissing
          ? Effect.fail(error)
          : Effect.flatMap(
              Effect.promise(() => cachedExport(options.cacheDir, image, options.hostUid)),
              (cached) => (cached === undefined ? Effect.fail(error) : Effect.succeed(cached)),
            ),
      ),
    )
    const id = inspected.Id.replace(/^sha256:/, "")
    const dir = join(options.cacheDir, `${id.slice(0, 16)}-${options.hostUid}`)
    const toolchainName = toolchainVolume(inspected.Id)
    const made: BwrapImage = {
      id,
      rootfs: join(dir, "rootfs"),
      toolchain: join(dir, toolchainName),
      env: envOf(inspected.Config?.Env),
      seccomp: join(dir, "seccomp.bpf"),
    }
    const complete = join(dir, "complete")
    if (existsSync(complete)) return made
    yield* Effect.tryPromise({
      try: () => mkdir(options.cacheDir, { recursive: true }),
      catch: (e) => new Error(`cache directory ${options.cacheDir}: ${reasonOf(e)}`),
    })
    const build = Effect.tryPromise({
      try: async () => {
        if (existsSync(complete)) return
        const partial = `${dir}.partial`
        await rm(partial, { recursive: true, force: true })
        await rm(dir, { recursive: true, force: true })
        const rootfs = join(partial, "rootfs")
        await exportImage(docker, image, rootfs)
        await buildToolchain(options.bwrap, rootfs, join(partial, toolchainName))
        // The sandbox's root is this uid on the host: it owns the image's files as root did.
        await runProgram("chown", ["-hR", `${options.hostUid}:${options.hostUid}`, rootfs])
        await writeFile(join(partial, "seccomp.bpf"), seccompProgram())
        await writeFile(
          join(partial, "image.json"),
          JSON.stringify({ image, id: inspected.Id, env: inspected.Config?.Env ?? [] }),
        )
        await rename(partial, dir)
        await writeFile(complete, "ok\n")
      },
      catch: (e) => new Error(`preparing ${image} for bwrap sandboxes: ${reasonOf(e)}`),
    })
    yield* withFileLock(
      `${dir}.lock`,
      build,
      Effect.logInfo(`bwrap: another process is preparing ${image}; waiting for it`),
    )
    return made
  })

/** The newest complete export of `image` in the cache, as an inspection would describe it. */
const cachedExport = async (
  cacheDir: string,
  image: string,
  hostUid: number,
): Promise<{ Id: string; Config: { Env: string[] } } | undefined> => {
  let best: { Id: string; Config: { Env: string[] }; at: number } | undefined
  for (const entry of await readdir(cacheDir).catch(() => [])) {
    if (!entry.endsWith(`-${hostUid}`)) continue
    const dir = join(cacheDir, entry)
    try {
      const [text, done] = await Promise.all([
        readFile(join(dir, "image.json"), "utf8"),
        stat(join(dir, "complete")),
      ])
      const recorded = JSON.parse(text) as { image?: string; id?: string; env?: string[] }
      if (recorded.image !== image || typeof recorded.id !== "string") continue
      if (best === undefined || done.mtimeMs > best.at)
        best = { Id: recorded.id, Config: { Env: recorded.env ?? [] }, at: done.mtimeMs }
    } catch {}
  }
  return best === undefined ? undefined : { Id: best.Id, Config: best.Config }
}

/** The image is not on the engine. */
export class ImageMissing extends Error {
  constructor(readonly image: string) {
    super(`image ${image} is not on the engine`)
  }
}

/**
 * Builds C source `name` (beside this file) statically into directory `dir` once, named by the
 * source's hash; resolves with the binary's file name, or undefined where no C compiler or
 * static libc is at hand.
 */
const buildStatic = async (name: string, dir: string): Promise<string | undefined> => {
  const source = await readFile(new URL(`./${name}.c`, import.meta.url))
  const file = `${name}-${createHash("sha256").update(source).digest("hex").slice(0, 12)}`
  const target = join(dir, file)
  if (existsSync(target)) return file
  const scratch = await mkdtemp(join(tmpdir(), `t1-${name}-`))
  try {
    await writeFile(join(scratch, `${name}.c`), source)
    await runProgram("cc", [
      "-O2",
      "-static",
      "-o",
      join(scratch, name),
      join(scratch, `${name}.c`),
    ])
    await mkdir(dir, { recursive: true })
    // A name of this process's own: another process may be building the same file.
    const partial = `${target}.${process.pid}.tmp`
    await copyFile(join(scratch, name), partial)
    await rename(partial, target)
    return file
  } catch {
    return undefined
  } finally {
    await rm(scratch, { recursive: true, force: true })
  }
}

/**
 * The keeper's program for sandboxes of `image`: keeper.c built once (statically: it loads
 * nothing of the sandbox) into the toolchain directory, so it appears read-only under /.t1v;
 * undefined where it cannot be built here, and the sandboxes then run keeper.py on the
 * toolchain's Python.
 */
export const ensureKeeperBinary = async (image: BwrapImage): Promise<string | undefined> => {
  const file = await buildStatic("keeper", join(image.toolchain, "t1"))
  return file === undefined ? undefined : `${TOOLCHAIN_ROOT}/t1/${file}`
}

/**
 * launcher.c built once into the cache directory: a sandbox then starts with one program
 * before bwrap instead of unshare, sh, mount and setpriv; undefined where it cannot be built.
 */
export const ensureLauncher = async (cacheDir: string): Promise<string | undefined> => {
  const file = await buildStatic("launcher", cacheDir)
  return file === undefined ? undefined : join(cacheDir, file)
}
