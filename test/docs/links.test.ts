/**
 * The documentation's links: every relative link in README.md, docs/ and the repository's other
 * markdown files resolves to a file or folder inside the repository, and every #anchor to a
 * heading of its target (as GitHub renders heading ids). README.md stays a front door that
 * reaches every page of docs/.
 */
import { execFileSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { describe, expect, it } from "vitest"

const ROOT = resolve(import.meta.dirname, "../..")

// Task instructions are data an agent reads, not documentation of this repository.
const isDoc = (path: string): boolean =>
  path.endsWith(".md") && !path.endsWith("/instruction.md") && !path.startsWith("node_modules/")

const walk = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    if (name === "node_modules" || name.startsWith(".")) return []
    const path = join(dir, name)
    return statSync(path).isDirectory() ? walk(path) : [relative(ROOT, path)]
  })

/** Tracked and new (not ignored) markdown files; a plain walk where git is not at hand. */
const markdownFiles = (): string[] => {
  let listed: string[]
  try {
    listed = execFileSync(
      "git",
      ["ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md"],
      { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] },
    )
      .split("\0")
      .filter((p) => p !== "" && existsSync(join(ROOT, p)))
  } catch {
    listed = walk(ROOT)
  }
  return listed.filter(isDoc).sort()
}

/** The lines outside fenced code blocks (those inside become empty lines). */
const unfenced = (markdown: string): string[] => {
  const out: string[] = []
  let fence: string | undefined
  for (const line of markdown.split("\n")) {
    const opener = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1]
    if (fence !== undefined) {
      if (opener !== undefined && opener[0] === fence[0] && opener.length >= fence.length) {
        fence = undefined
      }
      out.push("")
    } else if (opener !== undefined) {
      fence = opener
      out.push("")
    } else {
      out.push(line)
    }
  }
  return out
}

/** The text outside fenced code blocks and inline code spans, where links are links. */
const prose = (markdown: string): string =>
  unfenced(markdown)
    .map((line) => line.replace(/(`+)[\s\S]*?\1/g, ""))
    .join("\n")

/** Link targets: inline `[text](target "title")` and reference definitions `[id]: target`. */
const linkTargets = (markdown: string): string[] => {
  const text = prose(markdown)
  const inline = [...text.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)].map(
    (m) => m[1] ?? "",
  )
  const defined = [...text.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)].map(
    (m) => m[1] ?? "",
  )
  return [...inline, ...defined]
}

/** A heading's id as GitHub renders it (github-slugger on the heading's text). */
const slug = (heading: string): string =>
  heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/`/g, "")
    .replace(/\*\*|\*|~~/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, "")
    .replace(/ /g, "-")

/** Every anchor a markdown file offers: its headings' ids (repeats numbered) and HTML ids. */
const anchors = (markdown: string): Set<string> => {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const line of unfenced(markdown)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1]
    if (heading !== undefined) {
      const base = slug(heading)
      const n = seen.get(base) ?? 0
      seen.set(base, n + 1)
      out.add(n === 0 ? base : `${base}-${n}`)
    }
    for (const m of line.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) out.add(m[1] ?? "")
  }
  return out
}

/** What is wrong with each relative link of `file` (a path relative to the repository root). */
const brokenLinks = (file: string, markdown: string): string[] => {
  const problems: string[] = []
  for (const target of linkTargets(markdown)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue
    const [pathPart = "", anchor] = target.split("#", 2)
    const path = decodeURIComponent(pathPart)
    const absolute = path === "" ? join(ROOT, file) : resolve(ROOT, dirname(file), path)
    const inside = relative(ROOT, absolute)
    if (inside.startsWith(`..${sep}`) || inside === "..") {
      problems.push(`${file}: ${target} leads outside the repository`)
      continue
    }
    if (!existsSync(absolute)) {
      problems.push(`${file}: ${target} does not exist`)
      continue
    }
    if (anchor !== undefined && anchor !== "" && absolute.endsWith(".md")) {
      if (!anchors(readFileSync(absolute, "utf8")).has(decodeURIComponent(anchor))) {
        problems.push(`${file}: ${target} names no heading of ${inside}`)
      }
    }
  }
  return problems
}

describe("documentation links", () => {
  it("finds the links the checker is meant to check, and only those", () => {
    const sample = [
      "See [the CLI](docs/cli.md#t1-up-options) and [home](#top).",
      "`[not a link](nowhere.md)` and [web](https://example.org)",
      "```sh",
      "[in a fence](nowhere.md)",
      "```",
      "[ref]: docs/grpc.md",
    ].join("\n")
    expect(linkTargets(sample)).toEqual([
      "docs/cli.md#t1-up-options",
      "#top",
      "https://example.org",
      "docs/grpc.md",
    ])
  })

  it("computes heading ids as GitHub does", () => {
    expect(slug("`t1 up [options]`")).toBe("t1-up-options")
    expect(slug("gRPC API: `t1.v1.JobService`")).toBe("grpc-api-t1v1jobservice")
    expect(slug("The task ladder (`tasks/ladder`)")).toBe("the-task-ladder-tasksladder")
    expect(slug("SFT → eval → RL")).toBe("sft--eval--rl")
    expect([...anchors("# A\n## A\n```\n# not a heading\n```\n")]).toEqual(["a", "a-1"])
  })

  it("reports a missing file, a missing heading and a link out of the repository", () => {
    const text = "[a](docs/missing.md) [b](README.md#no-such-heading) [c](../outside/DESIGN.md)"
    expect(brokenLinks("README.md", text)).toEqual([
      "README.md: docs/missing.md does not exist",
      "README.md: README.md#no-such-heading names no heading of README.md",
      "README.md: ../outside/DESIGN.md leads outside the repository",
    ])
  })

  it("every relative link and anchor in the repository's markdown resolves", () => {
    const files = markdownFiles()
    expect(files).toContain("README.md")
    expect(files.filter((f) => f.startsWith("docs/")).length).toBeGreaterThan(0)
    const problems = files.flatMap((f) => brokenLinks(f, readFileSync(join(ROOT, f), "utf8")))
    expect(problems).toEqual([])
  })

  it("README.md is a front door: at most 250 lines, linking every page of docs/", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8")
    expect(readme.split("\n").length - 1).toBeLessThanOrEqual(250)
    const linked = new Set(
      linkTargets(readme).map((t) => resolve(ROOT, decodeURIComponent(t.split("#")[0] ?? ""))),
    )
    const pages = readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md"))
    expect(pages.filter((p) => !linked.has(join(ROOT, "docs", p)))).toEqual([])
  })
})
