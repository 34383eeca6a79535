import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles } from "../shell.ts"
import { ADJECTIVES, CATEGORIES, NOUNS, PRODUCTS } from "../vocabulary.ts"

const SIZES = { easy: 8, medium: 14, hard: 20 } as const

interface Item {
  readonly sku: string
  readonly name: string
  readonly category: string
  readonly qty: number
  /** Cents; undefined = field missing (hard). */
  readonly price: number | undefined
  /** undefined = field missing (hard), meaning false. */
  readonly discontinued: boolean | undefined
}

const money = (cents: number) => Number((cents / 100).toFixed(2))

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const hard = difficulty === "hard"
  const medium = difficulty !== "easy"
  const categories = rng.sample(CATEGORIES, hard ? 4 : 3)
  const skus = new Set<string>()
  const items: Array<Item> = []
  while (items.length < SIZES[difficulty]) {
    const sku = `${rng.pick(NOUNS).slice(0, 3).toUpperCase()}-${rng.int(1000, 9999)}`
    if (skus.has(sku)) continue
    skus.add(sku)
    items.push({
      sku,
      name: `${rng.pick(ADJECTIVES)} ${rng.pick(PRODUCTS)}`,
      category: rng.pick(categories),
      qty: rng.int(0, 60),
      price: hard && rng.chance(0.15) ? undefined : rng.int(99, 19999),
      discontinued: hard && rng.chance(0.3) ? undefined : items.length % 4 === 1 || rng.chance(0.1),
    })
  }
  const active = items.filter((i) => i.discontinued !== true)
  const threshold = rng.int(5, 15)
  const value = (i: Item) => i.qty * (i.price ?? 0)
  // A unique maximum, so that most_valuable is well defined.
  const ranked = [...active].sort((a, b) => value(b) - value(a))
  if (ranked.length > 1 && value(ranked[0] as Item) === value(ranked[1] as Item)) {
    const top = ranked[0] as Item
    items[items.indexOf(top)] = { ...top, qty: top.qty + 1, price: top.price ?? 100 }
  }
  const finalActive = items.filter((i) => i.discontinued !== true)
  const report = {
    total_items: finalActive.length,
    total_quantity: finalActive.reduce((s, i) => s + i.qty, 0),
    categories: [...new Set(finalActive.map((i) => i.category))].sort(),
    low_stock: finalActive
      .filter((i) => i.qty < threshold)
      .map((i) => i.sku)
      .sort(),
    value_by_category: Object.fromEntries(
      [...new Set(finalActive.map((i) => i.category))]
        .sort()
        .map((c) => [
          c,
          money(finalActive.filter((i) => i.category === c).reduce((s, i) => s + value(i), 0)),
        ]),
    ),
    most_valuable: [...finalActive].sort((a, b) => value(b) - value(a))[0]?.sku ?? "",
    discontinued: items
      .filter((i) => i.discontinued === true)
      .map((i) => i.sku)
      .sort(),
  }
  const keys: Array<keyof typeof report> = [
    "total_items",
    "total_quantity",
    "categories",
    ...(medium ? (["low_stock", "value_by_category"] as const) : []),
    ...(hard ? (["most_valuable", "discontinued"] as const) : []),
  ]

  const itemJson = (i: Item) => ({
    sku: i.sku,
    name: i.name,
    category: i.category,
    qty: i.qty,
    ...(i.price === undefined ? {} : { price: money(i.price) }),
    ...(i.discontinued === undefined ? {} : { discontinued: i.discontinued }),
  })
  const warehouse = `${rng.pick(NOUNS)}-${rng.int(1, 9)}`
  const document = hard
    ? {
        warehouse,
        sections: ["A", "B", "C"].map((aisle, s) => ({
          aisle,
          items: items.filter((_, i) => i % 3 === s).map(itemJson),
        })),
      }
    : { warehouse, items: items.map(itemJson) }

  const describe: Record<keyof typeof report, string> = {
    total_items: "`total_items`: the number of active items",
    total_quantity: "`total_quantity`: the sum of `qty` over active items",
    categories:
      "`categories`: the distinct categories of active items, as a list sorted alphabetically",
    low_stock: `\`low_stock\`: the skus of active items with \`qty\` below ${threshold}, sorted alphabetically`,
    value_by_category:
      "`value_by_category`: an object mapping each category of active items to the total value (qty × price) of its active items, rounded to 2 decimals",
    most_valuable:
      "`most_valuable`: the sku of the active item with the highest value (qty × price)",
    discontinued: "`discontinued`: the skus of discontinued items, sorted alphabetically",
  }
  const instruction = [
    hard
      ? "`inventory.json` describes a warehouse whose items are grouped in `sections`; each section has an `items` list."
      : "`inventory.json` describes a warehouse; its `items` list holds one object per item.",
    `An item is active unless its \`discontinued\` field is true.${hard ? " Some items lack fields: a missing `discontinued` means false and a missing `price` means 0." : ""}`,
    "",
    "Write `report.json`, a JSON object with exactly these keys:",
    "",
    ...keys.map((k) => `- ${describe[k]}`),
  ].join("\n")

  const solution = bashScript([
    "python3 - <<'PY'",
    "import json",
    "",
    'doc = json.load(open("inventory.json"))',
    hard ? 'items = [i for s in doc["sections"] for i in s["items"]]' : 'items = doc["items"]',
    'active = [i for i in items if not i.get("discontinued", False)]',
    'value = lambda i: i["qty"] * i.get("price", 0)',
    'cats = sorted({i["category"] for i in active})',
    "report = {",
    '    "total_items": len(active),',
    '    "total_quantity": sum(i["qty"] for i in active),',
    '    "categories": cats,',
    ...(medium
      ? [
          `    "low_stock": sorted(i["sku"] for i in active if i["qty"] < ${threshold}),`,
          '    "value_by_category": {c: round(sum(value(i) for i in active if i["category"] == c), 2) for c in cats},',
        ]
      : []),
    ...(hard
      ? [
          '    "most_valuable": max(active, key=value)["sku"],',
          '    "discontinued": sorted(i["sku"] for i in items if i.get("discontinued", False)),',
        ]
      : []),
    "}",
    'json.dump(report, open("report.json", "w"), indent=2)',
    "PY",
  ])

  const helpers = [
    `WANT = ${py(report)}`,
    "",
    "",
    "def report():",
    '    return json.loads((APP / "report.json").read_text())',
  ]
  const check: Record<keyof typeof report, ReadonlyArray<string>> = {
    total_items: ['assert report()["total_items"] == WANT["total_items"]'],
    total_quantity: ['assert report()["total_quantity"] == WANT["total_quantity"]'],
    categories: ['assert report()["categories"] == WANT["categories"]'],
    low_stock: ['assert report()["low_stock"] == WANT["low_stock"]'],
    value_by_category: [
      'got = report()["value_by_category"]',
      'assert sorted(got) == sorted(WANT["value_by_category"])',
      'for k, v in WANT["value_by_category"].items():',
      "    assert abs(float(got[k]) - v) < 0.011, k",
    ],
    most_valuable: ['assert report()["most_valuable"] == WANT["most_valuable"]'],
    discontinued: ['assert report()["discontinued"] == WANT["discontinued"]'],
  }
  const tests: Array<TestCase> = [
    {
      name: "report_has_exactly_the_keys",
      doc: "report.json is a JSON object with exactly the requested keys",
      body: [
        "got = report()",
        "assert isinstance(got, dict)",
        `assert sorted(got) == ${py([...keys].sort())}`,
      ],
    },
    ...keys.map((k) => ({ name: k, doc: `report.json has the right ${k}`, body: check[k] })),
  ]
  return {
    instruction,
    setup: bashScript(
      createFiles([{ path: "inventory.json", content: `${JSON.stringify(document, null, 2)}\n` }]),
    ),
    solution,
    ...pytestFile(tests, helpers),
  }
}

export const jsonReport: TaskFamily = {
  name: "json-report",
  summary: "summarise a nested inventory JSON into a report object (counts, sums, filters, argmax)",
  tags: ["json", "python", "aggregation"],
  generate,
}
