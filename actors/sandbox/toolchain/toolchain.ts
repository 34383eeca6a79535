import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import type Dockerode from "dockerode"
import { reasonOf, statusCode } from "../docker/engine.ts"
import { demux } from "../docker/shell.ts"

/**
 * The verifier's toolchain: bash, coreutils, grep, sed, findutils, diffutils, Python and pytest
 * from the base image, built once per engine into a docker volume (build.py) and mounted
 * read-only at TOOLCHAIN_ROOT in every docker sandbox. Its executables load a private copy of
 * the dynamic loader that reads neither /etc/ld.so.preload nor /etc/ld.so.cache and finds the
 * toolchain's own libraries first; its python3 starts isolated, without site, its own pytest
 * first. So the agent, root in the sandbox, can change what the tests see but not what runs them.
 */
export const TOOLCHAIN_ROOT = "/.t1v"
export const TOOLCHAIN_BIN = `${TOOLCHAIN_ROOT}/bin`
export const TOOLCHAIN_BASH = `${TOOLCHAIN_BIN}/bash`
export const TOOLCHAIN_PYTHON = `${TOOLCHAIN_BIN}/python3`
export const TOOLCHAIN_TIMEOUT = `${TOOLCHAIN_BIN}/timeout`

const source = (name: string) => readFileSync(new URL(`./${name}`, import.meta.url), "utf8")

let sources: { readonly build: string; readonly python3: string } | undefined
/** Read on first use: every process that loads the docker driver imports this module. */
const toolchainSources = () => {
  sources ??= { build: source("build.py"), python3: source("python3") }
  return sources
}

/** The volume holding the toolchain built from `imageId` by this version of the sources. */
export const toolchainVolume = (imageId: string): string => {
  const { build, python3 } = toolchainSources()
  const hash = createHash("sha256")
  for (const part of [build, python3]) hash.update(part).update("\0")
  return `t1-verifier-${hash.update(imageId).digest("hex").slice(0, 16)}`
}

/** The docker mount of a toolchain volume, read-only, as a sandbox gets it. */
export const toolchainMount = (volume: string): Dockerode.MountSettings => ({
  Type: "volume",
  Source: volume,
  Target: TOOLCHAIN_ROOT,
  ReadOnly: true,
})

/** Runs `cmd` in a throw-away container of `image` with `volume` at TOOLCHAIN_ROOT. */
const runWithVolume = async (
  docker: Dockerode,
  image: string,
  volume: string,
  cmd: ReadonlyArray<string>,
  options: { readonly readOnly: boolean; readonly env?: ReadonlyArray<string> },
): Promise<{ readonly exitCode: number; readonly output: string }> => {
  const container = await docker.createContainer({
    Image: image,
    Entrypoint: [],
    Cmd: [...cmd],
    Env: [...(options.env ?? [])],
    Labels: { "t1.toolchain": volume },
    HostConfig: {
      Mounts: [{ ...toolchainMount(volume), ReadOnly: options.readOnly }],
      NetworkMode: "none",
      AutoRemove: false,
      LogConfig: { Type: "json-file", Config: {} },
    },
  })
  try {
    const stream = await container.attach({ stream: true, stdout: true, stderr: true })
    const chunks: Buffer[] = []
    // Not awaited past a short wait, so caught: the container's removal may break the stream.
    const ended = demux(docker, stream, (chunk) => chunks.push(chunk)).catch(() => undefined)
    await container.start()
    const exit = (await container.wait()) as { StatusCode?: number }
    await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 2000))])
    return { exitCode: exit.StatusCode ?? -1, output: Buffer.concat(chunks).toString("utf8") }
  } finally {
    await container.remove({ force: true }).catch(() => undefined)
  }
}

/** Why the toolchain is not there: the message a sandbox host logs. */
export class ToolchainUnavailable extends Error {}

/**
 * The toolchain volume for `image` (the base image), built when missing or incomplete. The build
 * copies about 65 MB and takes ~15 s; a complete volume is found in well under a second.
 */
export const ensureToolchain = async (docker: Dockerode, image: string): Promise<string> => {
  let imageId: string
  try {
    imageId = (await docker.getImage(image).inspect()).Id
  } catch (error) {
    throw new ToolchainUnavailable(
      statusCode(error) === 404
        ? `the base image ${image} is not on the engine (run \`npx t1 image build-base\`)`
        : `cannot inspect ${image}: ${reasonOf(error)}`,
    )
  }
  const volume = toolchainVolume(imageId)
  const complete = await runWithVolume(
    docker,
    image,
    volume,
    [TOOLCHAIN_BASH, "-c", `test -f ${TOOLCHAIN_ROOT}/.complete`],
    { readOnly: true },
  ).catch(() => ({ exitCode: -1, output: "" }))
  if (complete.exitCode === 0) return volume
  const { build, python3 } = toolchainSources()
  const built = await runWithVolume(
    docker,
    image,
    volume,
    ["python3", "-c", build, TOOLCHAIN_ROOT],
    {
      readOnly: false,
      env: [`T1V_PYTHON3=${python3}`, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
    },
  )
  if (built.exitCode !== 0)
    throw new ToolchainUnavailable(
      `building the verifier toolchain from ${image} failed (exit ${built.exitCode}): ${built.output.trim().slice(-2000)}`,
    )
  return volume
}
