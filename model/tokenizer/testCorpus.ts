import type { Tokenizer } from "./tokenizer.ts"
import { trainTokenizer } from "./train.ts"

/** A small deterministic corpus shaped like terminal-agent traffic (shell, code, prose). */
export function terminalCorpus(repeat = 20): string[] {
  const lines = [
    "$ ls -la /home/user/project",
    "total 48\ndrwxr-xr-x  5 user user 4096 Jan  1 12:00 .\n-rw-r--r--  1 user user  220 README.md",
    "def main():\n    print('hello world')\n    return 0\n",
    "The quick brown fox jumps over the lazy dog. It's what they'll say; we've seen it.",
    "error: cannot find module 'foo' imported from /src/index.ts:12:3",
    '  File "test.py", line 42, in test_parse\n    assert parse("1+2") == 3\nAssertionError',
    "export function add(a: number, b: number): number {\n  return a + b\n}",
    'git commit -m "fix: handle empty input" && git push origin main',
    "Ünïcödé text — café, naïve, 東京, emoji 🙂 and tabs\tbetween\twords",
  ]
  const out: string[] = []
  for (let i = 0; i < repeat; i++) for (const l of lines) out.push(`${l} ${i}\n`)
  return out
}

let cached: Tokenizer | undefined

/** One tokenizer trained on terminalCorpus, shared by the tests. */
export function testTokenizer(): Tokenizer {
  cached ??= trainTokenizer(terminalCorpus(), { vocabSize: 600 })
  return cached
}
