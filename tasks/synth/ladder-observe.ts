/**
 * Observation steps for the ladder (families/ladder-observe.ts): each is a look, one command that
 * changes nothing and prints a value, then an act, one command that needs that value. The
 * instruction never says the value: it is drawn on the hidden stream (Draw.hidden), so the same
 * instruction stands for many workdirs, and only an agent that reads the look's output can act.
 *
 * Each step is built in two phases, the visible names first and the hidden ones after, so that a
 * task of several steps draws every name its instruction says before any hidden one: another
 * hidden salt then changes the workdir and the reference, never the instruction.
 *
 * Where the act copies a name from the look's output it writes it in the form the output prints
 * it (after a `/`, at a line's start): the same tokens, so what is copied is exactly what was read.
 */
import {
  append,
  copy,
  count,
  type Draw,
  linesOf,
  moveInto,
  remove,
  type Step,
} from "./ladder-world.ts"

/** The visible phase of an observation step: draws its named parts, returns the hidden phase. */
export type ObserveStep = (draw: Draw) => () => Step

/** Files a looked-in folder holds besides the one the task is about: guessing stays unlikely. */
const DECOYS = 2

/** On the hidden stream: files in `dir`, the decoys among them, and the one the task is about. */
const hiddenFileIn = (d: Draw, dir: string): string =>
  d.hidden(() => d.pick(Array.from({ length: 1 + DECOYS }, () => d.sourceIn(dir))))

/**
 * `<pointer>` names a file in folder `<from>`; move that file into folder `<to>` (cat → mv).
 */
export const pointerMove: ObserveStep = (d) => {
  const pointer = d.newFile()
  const from = d.existingDir()
  const to = d.existingDir()
  d.fill(pointer, "")
  return () => {
    const target = hiddenFileIn(d, from)
    const name = target.slice(from.length + 1)
    d.fill(pointer, `${name}\n`)
    const move = moveInto(target, to)
    return {
      sentence: `The file ${pointer} names a file in the folder ${from}. Move that file into the folder ${to}.`,
      look: `cat ${pointer}`,
      command: `mv ${target} ${to}`,
      apply: move.apply,
    }
  }
}

/** One file in folder `<dir>` is empty; delete it (find -empty → rm). */
export const emptyDelete: ObserveStep = (d) => {
  const dir = d.existingDir()
  return () => {
    const empty = hiddenFileIn(d, dir)
    d.fill(empty, "")
    return {
      sentence: `One file in the folder ${dir} is empty. Delete that file.`,
      look: `find ${dir} -empty`,
      command: `rm ${empty}`,
      apply: remove(empty).apply,
    }
  }
}

/** `<pointer>` holds the path of a file; copy that file to `<to>` (cat → cp). */
export const pointerCopy: ObserveStep = (d) => {
  const pointer = d.newFile()
  const dir = d.existingDir()
  const to = d.newFile()
  d.fill(pointer, "")
  return () => {
    const target = hiddenFileIn(d, dir)
    d.fill(pointer, `${target}\n`)
    return {
      sentence: `The file ${pointer} holds the path of a file. Copy that file to ${to}.`,
      look: `cat ${pointer}`,
      command: `cp ${target} ${to}`,
      apply: copy(target, to).apply,
    }
  }
}

/**
 * One of a few folders holds a file named `<key>`; copy it to `<to>` (find -name → cp). The look
 * prints `./<folder>/<key>`, which the act copies whole.
 */
export const findCopy: ObserveStep = (d) => {
  const key = d.newFile()
  const to = d.newFile()
  return () => {
    const path = d.hidden(() => {
      const dirs = Array.from({ length: 1 + DECOYS }, () => d.existingDir())
      const held = `${d.pick(dirs)}/${key}`
      d.fill(held, d.lines())
      return held
    })
    return {
      sentence: `One of the folders holds a file named ${key}. Copy that file to ${to}.`,
      look: `find . -name ${key}`,
      command: `cp ./${path} ${to}`,
      apply: copy(path, to).apply,
    }
  }
}

/** Count the lines of `<file>`, write the number to `<to>` with echo (wc -l → echo). */
export const countEcho: ObserveStep = (d) => {
  const file = d.newFile()
  const to = d.newFile()
  d.fill(file, "")
  return () => {
    const content = d.hidden(() => d.lines())
    d.fill(file, content)
    const lines = linesOf(content).length
    const step = count(file, to)
    return {
      sentence: `Find how many lines ${file} has, and write that number to ${to}.`,
      look: `wc -l ${file}`,
      command: `echo ${lines} > ${to}`,
      apply: step.apply,
    }
  }
}

/** `<file>` holds one word; add that word as a line to `<target>` (cat → echo >>). */
export const readAppend: ObserveStep = (d) => {
  const file = d.newFile()
  const target = d.source()
  d.fill(file, "")
  return () => {
    const value = d.hidden(() => d.value())
    d.fill(file, `${value}\n`)
    const step = append(target, value)
    return {
      sentence: `The file ${file} holds one word. Add that word as a line to ${target}.`,
      look: `cat ${file}`,
      command: `echo ${value} >> ${target}`,
      apply: step.apply,
    }
  }
}

/** The observation steps by name, for chains drawn at random (rung 7). */
export const OBSERVE_STEPS: Readonly<Record<string, ObserveStep>> = {
  "pointer-move": pointerMove,
  "empty-delete": emptyDelete,
  "pointer-copy": pointerCopy,
  "find-copy": findCopy,
  "count-echo": countEcho,
  "read-append": readAppend,
}

/** Builds the steps of a task: every visible phase first, then every hidden one, in order. */
export const observeChain = (d: Draw, steps: ReadonlyArray<ObserveStep>): ReadonlyArray<Step> => {
  const hidden = steps.map((step) => step(d))
  return hidden.map((phase) => phase())
}
