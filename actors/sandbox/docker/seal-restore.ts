import type Dockerode from "dockerode"
import { pristineMatcher } from "../pristine.ts"
import { TOOLCHAIN_BIN, toolchainMount } from "../toolchain/toolchain.ts"
import { collect, pipeArchive } from "./seal-exec.ts"

/** Labels the throw-away container of an image's pristine files (value: the sandbox's id). */
export const SEAL_HELPER_LABEL = "t1.seal-helper"

/** Longest argv (bytes of paths) one exec gets; more paths take more execs. */
const ARGV_BYTES = 100_000

/** What a restore changed: paths under the pristine directories, sorted. */
export interface Restore {
  readonly restored: ReadonlyArray<string>
  readonly removed: ReadonlyArray<string>
}

/** docker diff's kinds. */
const CHANGED = 0
const ADDED = 1
const DELETED = 2

/** Thrown when the restore cannot be trusted to have happened: the seal fails closed. */
export class RestoreFailed extends Error {}

const chunks = (paths: ReadonlyArray<string>): ReadonlyArray<ReadonlyArray<string>> => {
  const out: string[][] = []
  let current: string[] = []
  let size = 0
  for (const path of paths) {
    if (current.length > 0 && size + path.length + 1 > ARGV_BYTES) {
      out.push(current)
      current = []
      size = 0
    }
    current.push(path)
    size += path.length + 1
  }
  if (current.length > 0) out.push(current)
  return out
}

/** The paths none of whose ancestors is among them (what `rm -r` or `tar -c` needs named). */
const topmost = (paths: ReadonlyArray<string>): ReadonlyArray<string> => {
  const set = new Set(paths)
  return paths.filter((path) => {
    for (let at = path.lastIndexOf("/"); at > 0; at = path.lastIndexOf("/", at - 1))
      if (set.has(path.slice(0, at))) return false
    return true
  })
}

/** Each existing path's type (find's %y: f, d, l, …), from the toolchain's find in `container`. */
const typesIn = async (
  docker: Dockerode,
  container: string,
  paths: ReadonlyArray<string>,
  where: string,
): Promise<ReadonlyMap<string, string>> => {
  const types = new Map<string, string>()
  for (const part of chunks(paths)) {
    const found = await collect(docker, container, [
      `${TOOLCHAIN_BIN}/find`,
      ...part,
      "-maxdepth",
      "0",
      "-printf",
      "%y %p\\0",
    ])
    // 1: some path does not exist, which is an answer too.
    if (found.exitCode !== 0 && found.exitCode !== 1)
      throw new RestoreFailed(
        `find in ${where} exited ${found.exitCode}: ${found.stderr.trim().slice(0, 500)}`,
      )
    for (const record of found.stdout.toString("utf8").split("\0")) {
      if (record.length < 3) continue
      types.set(record.slice(2), record.slice(0, 1))
    }
  }
  return types
}

/**
 * The helper's lifetime: a restore ends long before (the seal's own timeout is shorter), and a
 * helper whose driver died mid-restore stops here and removes itself (AutoRemove).
 */
const HELPER_LIFETIME_SEC = 600

/** A container of the sandbox's image idling on the toolchain's sleep: no program of the image runs. */
const startHelper = async (
  docker: Dockerode,
  sandboxId: string,
  image: string,
  volume: string,
): Promise<Dockerode.Container> => {
  const helper = await docker.createContainer({
    Image: image,
    Entrypoint: [`${TOOLCHAIN_BIN}/sleep`, String(HELPER_LIFETIME_SEC)],
    Cmd: [],
    User: "0:0",
    WorkingDir: "/",
    Labels: { [SEAL_HELPER_LABEL]: sandboxId },
    NetworkDisabled: true,
    HostConfig: {
      Mounts: [toolchainMount(volume)],
      NetworkMode: "none",
      CapDrop: ["ALL"],
      // Reading every file of the image, whatever its mode.
      CapAdd: ["DAC_READ_SEARCH"],
      SecurityOpt: ["no-new-privileges:true"],
      PidsLimit: 64,
      AutoRemove: true,
      LogConfig: { Type: "none", Config: {} },
    },
  })
  try {
    await helper.start()
  } catch (error) {
    await helper.remove({ force: true, v: true }).catch(() => undefined)
    throw error
  }
  return helper
}

/**
 * Puts the image's files back under the pristine directories of a sandbox that no agent process
 * runs in any more. From docker's diff: what the agent added is removed (the toolchain's rm, in
 * the sandbox); what it changed or deleted is copied from a helper container of the image (the
 * toolchain's tar there) into the sandbox. A directory counts only when its type changed (a link
 * put where a directory was), since a directory of the diff otherwise just holds a change.
 * Ancestors of the pristine directories are checked for that too. `diff` is the sandbox's
 * `changes()`, taken while nothing ran in it.
 */
export const restorePristine = async (
  docker: Dockerode,
  sandboxId: string,
  image: string,
  volume: string,
  patterns: ReadonlyArray<string>,
  diff: unknown,
  signal?: AbortSignal,
): Promise<Restore> => {
  if (patterns.length === 0) return { restored: [], removed: [] }
  // A seal that gave up (its timeout) changes nothing more: the engine calls already made finish.
  const stillWanted = () => {
    if (signal?.aborted === true) throw new RestoreFailed("abandoned: the seal gave up")
  }
  const place = pristineMatcher(patterns)
  // A path with anything of the diff below it is a directory in the sandbox (the upper layer
  // holds that entry inside it): no need to ask the sandbox what it is.
  const holding = new Set<string>()
  const added: string[] = []
  const changedUnder: string[] = []
  const changedAbove: string[] = []
  const deleted: string[] = []
  for (const entry of Array.isArray(diff) ? diff : []) {
    const path: unknown = entry?.Path
    const kind: unknown = entry?.Kind
    if (typeof path !== "string" || typeof kind !== "number") continue
    for (let at = path.lastIndexOf("/"); at > 0; at = path.lastIndexOf("/", at - 1))
      holding.add(path.slice(0, at))
    const where = place(path)
    if (where === undefined) continue
    if (kind === ADDED && where === "under") added.push(path)
    else if (kind === CHANGED) (where === "under" ? changedUnder : changedAbove).push(path)
    else if (kind === DELETED) deleted.push(path)
  }
  const unsure = [...changedUnder, ...changedAbove].filter((p) => !holding.has(p))
  const inSandbox = new Map(
    unsure.length === 0 ? [] : await typesIn(docker, sandboxId, unsure, "the sandbox"),
  )
  for (const path of holding) inSandbox.set(path, "d")
  // An ancestor still a directory in the sandbox needs no look at the image.
  const above = changedAbove.filter((p) => inSandbox.get(p) !== "d")
  const ask = [...deleted, ...changedUnder, ...above]
  const restore: string[] = []
  if (ask.length > 0) {
    stillWanted()
    const helper = await startHelper(docker, sandboxId, image, volume)
    try {
      const inImage = await typesIn(docker, helper.id, ask, "the image")
      const aboveSet = new Set(above)
      for (const path of deleted) if (inImage.has(path)) restore.push(path)
      for (const path of [...changedUnder, ...above]) {
        const original = inImage.get(path)
        // Changed yet not in the image: made by the agent all the same (but a directory above
        // the pristine ones is not the seal's to remove).
        if (original === undefined) {
          if (!aboveSet.has(path)) added.push(path)
        } else if (!(original === "d" && inSandbox.get(path) === "d")) restore.push(path)
      }
      stillWanted()
      await removeAll(docker, sandboxId, added)
      for (const part of chunks(topmost([...restore].sort()))) {
        stillWanted()
        const copied = await pipeArchive(
          docker,
          helper.id,
          [
            `${TOOLCHAIN_BIN}/tar`,
            "-c",
            "-f",
            "-",
            "-C",
            "/",
            "--",
            ...part.map((p) => p.slice(1)),
          ],
          sandboxId,
        )
        if (copied.exitCode !== 0)
          throw new RestoreFailed(
            `tar of the image's files exited ${copied.exitCode}: ${copied.stderr.trim().slice(0, 500)}`,
          )
      }
    } finally {
      await helper.remove({ force: true, v: true }).catch(() => undefined)
    }
  } else {
    stillWanted()
    await removeAll(docker, sandboxId, added)
  }
  return { restored: [...restore].sort(), removed: [...added].sort() }
}

const removeAll = async (docker: Dockerode, sandboxId: string, paths: ReadonlyArray<string>) => {
  for (const part of chunks(topmost([...paths].sort()))) {
    const removed = await collect(docker, sandboxId, [`${TOOLCHAIN_BIN}/rm`, "-rf", "--", ...part])
    if (removed.exitCode !== 0)
      throw new RestoreFailed(
        `rm of added files exited ${removed.exitCode}: ${removed.stderr.trim().slice(0, 500)}`,
      )
  }
}
