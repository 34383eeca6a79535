import { XMLParser, XMLValidator } from "fast-xml-parser"
import { type TestCaseResult, type TestOutcome, truncateUtf8 } from "./outcome.ts"

/**
 * pytest's JUnit XML report (run with `-o junit_family=xunit1`, which adds each test's `file`)
 * as per-test results. Returns undefined when the text is not a well-formed report.
 */
export const parseJunitXml = (xml: string): ReadonlyArray<TestCaseResult> | undefined => {
  if (XMLValidator.validate(xml) !== true) return undefined
  const parser = new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: "",
    textNodeName: "#text",
    parseTagValue: false,
    parseAttributeValue: false,
    trimValues: false,
    htmlEntities: true,
    isArray: (name) => ARRAYS.has(name),
  })
  let document: unknown
  try {
    document = parser.parse(xml)
  } catch {
    return undefined
  }
  const root = record(document)
  if (root === undefined || (root.testsuites === undefined && root.testsuite === undefined))
    return undefined
  const cases: TestCaseResult[] = []
  collectCases(root, cases)
  return cases
}

const ARRAYS = new Set(["testsuites", "testsuite", "testcase", "failure", "error", "skipped"])

type XmlNode = Readonly<Record<string, unknown>>

const record = (value: unknown): XmlNode | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as XmlNode)
    : undefined

const nodes = (value: unknown): ReadonlyArray<XmlNode> => {
  if (!Array.isArray(value)) return []
  const found: XmlNode[] = []
  for (const v of value as ReadonlyArray<unknown>) {
    const node = record(v)
    if (node !== undefined) found.push(node)
  }
  return found
}

const text = (node: XmlNode, key: string): string => {
  const v = node[key]
  return typeof v === "string" ? v : ""
}

/** Suites nest (testsuites > testsuite > testsuite…); cases can sit at any level. */
const collectCases = (node: XmlNode, into: TestCaseResult[]): void => {
  for (const c of nodes(node.testcase)) {
    const result = testCase(c)
    if (result !== undefined) into.push(result)
  }
  for (const child of [...nodes(node.testsuites), ...nodes(node.testsuite)])
    collectCases(child, into)
}

const testCase = (node: XmlNode): TestCaseResult | undefined => {
  const name = text(node, "name")
  // A nameless case is the test that was running when pytest was interrupted: it has no result.
  if (name === "") return undefined
  const problem = (kind: string) => nodes(node[kind])[0]
  const error = problem("error")
  const failure = problem("failure")
  const skipped = problem("skipped")
  const [outcome, detail]: [TestOutcome, XmlNode | undefined] =
    error !== undefined
      ? ["error", error]
      : failure !== undefined
        ? ["failed", failure]
        : skipped !== undefined
          ? ["skipped", skipped]
          : ["passed", undefined]
  const seconds = Number.parseFloat(text(node, "time"))
  return {
    name: caseName(text(node, "file"), text(node, "classname"), name),
    outcome,
    durationMs: Number.isFinite(seconds) && seconds > 0 ? Math.round(seconds * 1000) : 0,
    message: detail === undefined ? "" : truncateUtf8(messageOf(detail)),
  }
}

/** The attribute's one-line message, then the body (traceback), as pytest's summary shows. */
const messageOf = (detail: XmlNode): string => {
  const message = text(detail, "message")
  const body = text(detail, "#text")
  if (message === "") return body
  if (body === "" || body === message) return message
  return `${message}\n\n${body}`
}

/**
 * A pytest node id from xunit1 attributes: `file` "sub/test_x.py" and `classname`
 * "sub.test_x.TestK" give "sub/test_x.py::TestK::name". A collection error has an empty
 * classname and is named after its file.
 */
const caseName = (file: string, classname: string, name: string): string => {
  if (file === "") return classname === "" ? name : `${classname}::${name}`
  if (classname === "") return file
  const module = file.replace(/\.py$/, "").replaceAll("/", ".")
  const classes = classname.startsWith(`${module}.`) ? classname.slice(module.length + 1) : ""
  return classes === "" ? `${file}::${name}` : `${file}::${classes.replaceAll(".", "::")}::${name}`
}
