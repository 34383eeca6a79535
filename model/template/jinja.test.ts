import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { parseTokenizerConfig } from "./config.ts"
import { ChatTemplateError } from "./errors.ts"
import { JinjaChatTemplate, type TemplateMessage } from "./jinja.ts"

interface Fixtures {
  readonly cases: ReadonlyArray<{
    readonly name: string
    readonly messages: ReadonlyArray<TemplateMessage>
    readonly add_generation_prompt: boolean
  }>
  readonly tools: ReadonlyArray<unknown>
  readonly templates: Readonly<
    Record<
      string,
      {
        readonly config: string
        readonly null_content: string | null
        readonly variants: ReadonlyArray<Readonly<Record<string, unknown>>>
      }
    >
  >
}

const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url)
const fixtures = JSON.parse(readFileSync(fixture("conversations.json"), "utf8")) as Fixtures
const reference = JSON.parse(readFileSync(fixture("rendered.json"), "utf8")) as Record<
  string,
  Record<string, string>
>
const root = new URL("../../", import.meta.url)

describe("JinjaChatTemplate against Python jinja2 as transformers renders (fixtures/rendered.json)", () => {
  for (const [name, spec] of Object.entries(fixtures.templates)) {
    const file = new URL(spec.config, root)
    const template = new JinjaChatTemplate(
      parseTokenizerConfig(readFileSync(file, "utf8"), spec.config),
    )
    for (const c of fixtures.cases) {
      for (const variant of spec.variants) {
        const key =
          c.name +
          Object.keys(variant)
            .sort()
            .map((k) => `+${k}`)
            .join("")
        it(`${name}: ${key}`, () => {
          const messages = c.messages.map((m) =>
            m.content === null ? { ...m, content: spec.null_content } : m,
          )
          const { tools, ...variables } = variant
          const rendered = template.render(messages, {
            addGenerationPrompt: c.add_generation_prompt,
            ...(tools === true ? { tools: fixtures.tools } : {}),
            variables,
          })
          expect(rendered).toBe(reference[name]?.[key])
        })
      }
    }
  }
})

describe("bad templates", () => {
  it("refuses a tokenizer_config.json without a chat template, naming the file", () => {
    expect(() =>
      parseTokenizerConfig(JSON.stringify({ eos_token: "</s>" }), "gpt2/tokenizer_config.json"),
    ).toThrow(/^gpt2\/tokenizer_config.json: no chat_template/)
  })

  it("picks the default of named templates, and refuses a list without one", () => {
    const config = parseTokenizerConfig(
      JSON.stringify({
        chat_template: [
          { name: "default", template: "{{ messages[0].content }}" },
          { name: "tool_use", template: "tools" },
        ],
      }),
      "c.json",
    )
    expect(config.chatTemplate).toBe("{{ messages[0].content }}")
    expect([...config.namedTemplates.keys()]).toEqual(["default", "tool_use"])
    expect(() =>
      parseTokenizerConfig(
        JSON.stringify({ chat_template: [{ name: "rag", template: "x" }] }),
        "c.json",
      ),
    ).toThrow(/no "default"/)
  })

  it("a template that raises is a ChatTemplateError with the template's message", () => {
    const template = new JinjaChatTemplate(
      parseTokenizerConfig(
        JSON.stringify({
          chat_template:
            "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}ok",
        }),
        "m/tokenizer_config.json",
      ),
    )
    expect(template.render([{ role: "user", content: "hi" }])).toBe("ok")
    const e = (() => {
      try {
        template.render([{ role: "system", content: "x" }])
      } catch (error) {
        return error
      }
    })()
    expect(e).toBeInstanceOf(ChatTemplateError)
    expect(String((e as Error).message)).toMatch(
      /^m\/tokenizer_config.json: chat_template raised: .*Conversation roles must alternate/,
    )
  })

  it("a template that does not parse is a ChatTemplateError at load", () => {
    expect(
      () =>
        new JinjaChatTemplate(
          parseTokenizerConfig(
            JSON.stringify({ chat_template: "{% for m in messages %}" }),
            "t.json",
          ),
        ),
    ).toThrow(/^t.json: chat_template does not parse/)
  })
})
