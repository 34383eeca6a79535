/**
 * What a ladder task's tests check, independent of the language they run in: each check renders
 * as a pytest test (the reference semantics) and as a bash test (what ladder tasks ship, see
 * bash-tests.ts); tasks/ladder's tests run both on the same workdirs and require them to agree.
 */
import { type BashTestCase, bashTestScript } from "./bash-tests.ts"
import { py, pytestFile, type TestCase } from "./pytest.ts"
import { shellQuote } from "./shell.ts"

/** One checked aspect of the workdir; paths are relative to it. */
export type Check =
  | { readonly kind: "isFile"; readonly path: string }
  /** The file's content is "" (touch). */
  | { readonly kind: "isEmptyFile"; readonly path: string }
  /** The content without surrounding whitespace is `value`. */
  | { readonly kind: "holds"; readonly path: string; readonly value: string }
  /** The last line is `line`. */
  | { readonly kind: "endsWithLine"; readonly path: string; readonly line: string }
  /** The lines but the last are `lines`. */
  | {
      readonly kind: "linesBeforeLast"
      readonly path: string
      readonly lines: ReadonlyArray<string>
    }
  /** The first whitespace-separated word is `word`. */
  | { readonly kind: "firstWord"; readonly path: string; readonly word: string }
  /** There is a line, and every line contains `word`. */
  | { readonly kind: "everyLineHas"; readonly path: string; readonly word: string }
  /** Every one of `lines` is a line of the file. */
  | { readonly kind: "hasLines"; readonly path: string; readonly lines: ReadonlyArray<string> }
  /** The content is exactly `content`. */
  | { readonly kind: "content"; readonly path: string; readonly content: string }
  | { readonly kind: "isDir"; readonly path: string }
  /** A folder with no entries, hidden ones included. */
  | { readonly kind: "emptyDir"; readonly path: string }
  /** Nothing exists at the path (a dangling link counts as nothing, as Path.exists says). */
  | { readonly kind: "gone"; readonly path: string }

export interface LadderTest {
  /** snake_case, without the test_ prefix. */
  readonly name: string
  readonly doc: string
  readonly check: Check
}

/**
 * Runs before every test: the files the task leaves alone keep their content, and every
 * non-hidden path of the workdir is one of `allowed`.
 */
export interface LadderGuard {
  readonly kept: Readonly<Record<string, string>>
  readonly allowed: ReadonlyArray<string>
}

// pytest

const PY_PREAMBLE = `import glob
from pathlib import Path

import pytest

APP = Path("/app")
`

const pyRead = (path: string) => `(APP / ${py(path)}).read_text()`

const pythonBody = (c: Check): Array<string> => {
  const at = `(APP / ${py(c.path)})`
  switch (c.kind) {
    case "isFile":
      return [`assert ${at}.is_file()`]
    case "isEmptyFile":
      return [`assert ${pyRead(c.path)} == ""`]
    case "holds":
      return [`assert ${pyRead(c.path)}.strip() == ${py(c.value)}`]
    case "endsWithLine":
      return [`assert ${pyRead(c.path)}.splitlines()[-1:] == [${py(c.line)}]`]
    case "linesBeforeLast":
      return [`assert ${pyRead(c.path)}.splitlines()[:-1] == ${py([...c.lines])}`]
    case "firstWord":
      return [`assert ${pyRead(c.path)}.split()[0] == ${py(c.word)}`]
    case "everyLineHas":
      return [
        `lines = ${pyRead(c.path)}.splitlines()`,
        `assert lines and all(${py(c.word)} in line for line in lines)`,
      ]
    case "hasLines":
      return [`assert set(${py([...c.lines])}) <= set(${pyRead(c.path)}.splitlines())`]
    case "content":
      return [`assert ${pyRead(c.path)} == ${py(c.content)}`]
    case "isDir":
      return [`assert ${at}.is_dir()`]
    case "emptyDir":
      return [`assert list(${at}.iterdir()) == []`]
    case "gone":
      return [`assert not ${at}.exists()`]
  }
}

/**
 * The tests as a pytest file (tests/test_outputs.py). `glob` lists the workdir without hidden
 * entries, where a harness may keep its own files (`t1 tasks check --driver local` puts
 * `.t1-check/` there).
 */
export const ladderPytest = (tests: ReadonlyArray<LadderTest>, guard: LadderGuard) =>
  pytestFile(
    tests.map((t): TestCase => ({ name: t.name, doc: t.doc, body: pythonBody(t.check) })),
    [
      `KEPT = ${py(guard.kept)}`,
      `ALLOWED = set(${py([...guard.allowed])})`,
      "",
      "",
      "@pytest.fixture(autouse=True)",
      "def guard():",
      "    assert all((APP / p).read_text() == c for p, c in KEPT.items())",
      '    assert set(glob.glob("**", root_dir=APP, recursive=True)) <= ALLOWED',
    ],
    PY_PREAMBLE,
  )

// bash

const q = shellQuote

/** Always single-quoted: a quoted part of a bash regex matches literally. */
const literal = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`

/** A file's bytes are exactly `content`. */
const same = (path: string, content: string) => `load ${q(path)} && [ "$text" = ${q(content)} ]`

const bashBody = (c: Check): Array<string> => {
  // Tests run in the workdir, and fork no process (see bash-tests.ts).
  const p = q(c.path)
  switch (c.kind) {
    case "isFile":
      return [`[ -f ${p} ]`]
    case "isEmptyFile":
      return [`[ -f ${p} ] && [ ! -s ${p} ]`]
    case "holds":
      // Quoted parts of a bash regex match literally; [[:space:]] takes newlines too.
      return [`load ${p} && [[ $text =~ ^[[:space:]]*${literal(c.value)}[[:space:]]*$ ]]`]
    case "endsWithLine":
      return [`lines ${p} && [ \${#L[@]} -gt 0 ] && [ "\${L[-1]}" = ${q(c.line)} ]`]
    case "linesBeforeLast":
      return [
        `lines ${p} && [ \${#L[@]} -eq ${c.lines.length + 1} ]`,
        ...c.lines.map((line, i) => `[ "\${L[${i}]}" = ${q(line)} ]`),
      ].map((l, i, all) => (i < all.length - 1 ? `${l} &&` : l))
    case "firstWord":
      // Word splitting on whitespace, without globbing the words.
      return [
        `load ${p} || return 1`,
        "set -f; W=($text); set +f",
        `[ "\${W[0]-}" = ${q(c.word)} ]`,
      ]
    case "everyLineHas":
      return [
        `lines ${p} && [ \${#L[@]} -gt 0 ] || return 1`,
        `for l in "\${L[@]}"; do [[ $l == *${q(c.word)}* ]] || return 1; done`,
      ]
    case "hasLines":
      return [`lines ${p}`, ...c.lines.map((line) => `has_line ${q(line)}`)].map((l, i, all) =>
        i < all.length - 1 ? `${l} &&` : l,
      )
    case "content":
      return [same(c.path, c.content)]
    case "isDir":
      return [`[ -d ${p} ]`]
    case "emptyDir":
      return [`empty_dir ${p}`]
    case "gone":
      return [`[ ! -e ${p} ]`]
  }
}

/** The guard in bash: `**` (globstar, no dotglob) lists what Python's recursive glob does. */
const bashGuard = (guard: LadderGuard): Array<string> => [
  ...Object.entries(guard.kept).map(([path, content]) => `${same(path, content)} || return 1`),
  `for p in **; do case $p in ${guard.allowed.length === 0 ? '""' : guard.allowed.map(q).join("|")}) ;; *) return 1 ;; esac; done`,
]

/** The tests as a bash script (tests/test.sh) writing a CTRF report. */
export const ladderBash = (tests: ReadonlyArray<LadderTest>, guard: LadderGuard) =>
  bashTestScript(
    tests.map((t): BashTestCase => ({ name: t.name, doc: t.doc, body: bashBody(t.check) })),
    bashGuard(guard),
  )
