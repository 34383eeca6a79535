/**
 * shell-block: the format for the small embedded model. The agent writes optional prose, then one
 * fenced ```bash block; its content is one command (it may span lines) run as one unit, to
 * completion. `<|done|>` anywhere in the reply (a special token of the tokenizer; a plain string
 * here) declares the task complete: with a block, the block runs and then the episode completes;
 * alone, the episode completes.
 *
 * Decisions:
 * - Fences: ``` or ~~~ (three or more) at the start of a line, indentation allowed; the info
 *   string's first word must be bash, sh, shell or nothing to make a command block. A closing
 *   fence is the same character, at least as long, with nothing after it but spaces. Blocks in
 *   other languages (```python, ```text) are prose: not run, but named in the feedback when the
 *   reply has no command.
 * - More than one command block is malformed (ambiguous: the agent should see the output of each
 *   command before the next), as are an unclosed fence (any language) and an empty block.
 * - CRLF and lone CR become LF; `<|done|>` is removed wherever it stands (also inside the block,
 *   so a script cannot contain that string); leading and trailing blank lines of the block are
 *   dropped, other whitespace kept (it can matter inside heredocs); the opening fence's
 *   indentation is removed from the block's lines. Text after the block is ignored.
 */

import { solutionCommands } from "../../../tasks/solution/index.ts"
import type { ActionFormat, ParsedAction } from "./format.ts"

export const DONE_TOKEN = "<|done|>"

const SHELL_LANGUAGES = new Set(["", "bash", "sh", "shell"])

const HOW = "Reply with one ```bash block, or <|done|> when the task is complete."

export const SHELL_BLOCK_PROMPT = `## How to act

Each turn, think briefly, then give exactly one command in a fenced block:

\`\`\`bash
<command>
\`\`\`

The command runs in a persistent bash shell: the working directory, variables and background jobs carry over between turns. You then see its output and exit code. A block may hold several lines; they run together as one script. There is no terminal input, so do not start interactive programs (editors, pagers, prompts): pass flags such as -y, and write files with heredocs or redirects.

When the task is complete, reply with ${DONE_TOKEN}. You may put ${DONE_TOKEN} after a final block: the block runs, then the task ends.`

interface Block {
  readonly language: string
  readonly content: string
}

type Scan =
  | { readonly kind: "ok"; readonly blocks: ReadonlyArray<Block> }
  | { readonly kind: "unclosed"; readonly language: string }

const OPEN = /^([ \t]*)(`{3,}|~{3,})(.*)$/
const CLOSE = /^[ \t]*(`{3,}|~{3,})[ \t]*$/

const scanFences = (text: string): Scan => {
  const lines = text.split("\n")
  const blocks: Array<Block> = []
  for (let k = 0; k < lines.length; k++) {
    const open = OPEN.exec(lines[k] ?? "")
    if (open === null) continue
    const indent = (open[1] ?? "").length
    const fence = open[2] ?? "```"
    const info = (open[3] ?? "").trim()
    // A backtick fence's info string has no backticks (else it is inline code: ```ls```).
    if (fence[0] === "`" && info.includes("`")) continue
    const language = (info.split(/\s/, 1)[0] ?? "").toLowerCase()
    const body: Array<string> = []
    let closed = false
    for (k++; k < lines.length; k++) {
      const line = lines[k] ?? ""
      const close = CLOSE.exec(line)
      const marks = close?.[1]
      if (marks !== undefined && marks[0] === fence[0] && marks.length >= fence.length) {
        closed = true
        break
      }
      // Drop up to the opening fence's indentation.
      let cut = 0
      while (cut < indent && (line[cut] === " " || line[cut] === "\t")) cut++
      body.push(line.slice(cut))
    }
    if (!closed) return { kind: "unclosed", language }
    blocks.push({ language, content: body.join("\n") })
  }
  return { kind: "ok", blocks }
}

const trimBlankLines = (text: string): string => {
  const lines = text.split("\n")
  while (lines.length > 0 && (lines[0] ?? "").trim() === "") lines.shift()
  while (lines.length > 0 && (lines[lines.length - 1] ?? "").trim() === "") lines.pop()
  return lines.join("\n")
}

const malformed = (reason: string, feedback: string): ParsedAction => ({
  kind: "malformed",
  reason,
  feedback,
})

export const parseShellBlock = (text: string): ParsedAction => {
  const normalized = text.replace(/\r\n?/g, "\n")
  const done = normalized.includes(DONE_TOKEN)
  const scan = scanFences(normalized.split(DONE_TOKEN).join(""))
  if (scan.kind === "unclosed") {
    const fence = `\`\`\`${scan.language}`
    return malformed(
      "unclosed code fence",
      `Your ${fence} block was not closed with a line of \`\`\`, so nothing was run. ${HOW}`,
    )
  }
  const commands = scan.blocks.filter((b) => SHELL_LANGUAGES.has(b.language))
  if (commands.length > 1) {
    return malformed(
      `${commands.length} command blocks`,
      `Your reply had ${commands.length} \`\`\`bash blocks, so nothing was run. Reply with exactly one \`\`\`bash block (it may hold several lines), or <|done|> when the task is complete.`,
    )
  }
  const block = commands[0]
  if (block === undefined) {
    if (done) return { kind: "complete" }
    const other = scan.blocks[0]
    if (other !== undefined) {
      return malformed(
        `no command block (only \`\`\`${other.language})`,
        `No command found: only \`\`\`bash blocks are run, and your reply had a \`\`\`${other.language} block. ${HOW}`,
      )
    }
    return malformed("no command block", `No command found. ${HOW}`)
  }
  const script = trimBlankLines(block.content)
  if (script.trim() === "") {
    return malformed(
      "empty command block",
      `Your \`\`\`bash block was empty, so nothing was run. ${HOW}`,
    )
  }
  return { kind: "commands", commands: [{ keystrokes: script }], taskComplete: done }
}

/** A fence longer than any run of backticks that starts a line of `script`. */
const fenceFor = (script: string): string => {
  let longest = 0
  for (const m of script.matchAll(/^[ \t]*(`{3,})/gm))
    longest = Math.max(longest, m[1]?.length ?? 0)
  return "`".repeat(Math.max(3, longest + 1))
}

export const renderShellBlockSolution = (script: string): ReadonlyArray<string> => {
  const commands = solutionCommands(script)
  if (commands.length === 0) return [DONE_TOKEN]
  return commands.map((command, k) => {
    const fence = fenceFor(command)
    const turn = `${fence}bash\n${command}\n${fence}`
    return k === commands.length - 1 ? `${turn}\n${DONE_TOKEN}` : turn
  })
}

export const shellBlock: ActionFormat = {
  name: "shell-block",
  systemPrompt: SHELL_BLOCK_PROMPT,
  parse: parseShellBlock,
  renderSolution: renderShellBlockSolution,
}

/**
 * The same actions under a two-sentence prompt (~25 tokens instead of ~300): for small policies
 * that learn the format from their warm start, where the prompt is most of every sequence's cost.
 */
export const SHELL_BLOCK_SHORT_PROMPT = `Reply with one \`\`\`bash block per turn; when done, ${DONE_TOKEN}.`

export const shellBlockShort: ActionFormat = {
  ...shellBlock,
  name: "shell-block-short",
  systemPrompt: SHELL_BLOCK_SHORT_PROMPT,
}
