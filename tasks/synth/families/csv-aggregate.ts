import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles } from "../shell.ts"
import { PRODUCTS, REGIONS } from "../vocabulary.ts"

const SIZES = {
  easy: { rows: 12, regions: 3 },
  medium: { rows: 25, regions: 4 },
  hard: { rows: 40, regions: 5 },
} as const
const MONTHS = ["January", "February", "March", "April", "May", "June"] as const
const SIZES_OF = ["small", "large", "deluxe"] as const

interface Row {
  readonly id: number
  readonly date: string
  readonly region: string
  readonly product: string
  readonly units: number | undefined
  readonly cents: number
}

const cell = (s: string) => (s.includes(",") ? `"${s}"` : s)
const money = (cents: number) =>
  `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}`

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const size = SIZES[difficulty]
  const filtered = difficulty !== "easy"
  const hard = difficulty === "hard"
  const regions = rng.sample(REGIONS, size.regions)
  const monthIndex = rng.int(1, 5)
  const month = String(monthIndex + 1).padStart(2, "0")
  const products = rng
    .sample(PRODUCTS, 5)
    .map((p) => (hard && rng.chance(0.6) ? `${p}, ${rng.pick(SIZES_OF)}` : p))
  const prices = new Map(products.map((p) => [p, rng.int(150, 9999)]))
  let rows: Array<Row> = []
  let id = rng.int(1000, 5000)
  for (let i = 0; i < size.rows; i++) {
    id += rng.int(1, 3)
    const m = filtered && rng.chance(0.35) ? rng.pick([monthIndex, monthIndex + 1]) : monthIndex + 1
    const product = rng.pick(products)
    rows.push({
      id,
      date: `2024-${String(m).padStart(2, "0")}-${String(rng.int(1, 28)).padStart(2, "0")}`,
      region: i < regions.length ? (regions[i] as string) : rng.pick(regions),
      product,
      units: filtered && rng.chance(0.12) ? undefined : rng.int(1, 20),
      cents: prices.get(product) as number,
    })
  }
  const counted = (r: Row) => r.units !== undefined && r.date.startsWith(`2024-${month}`)
  const summarise = () => {
    const by = new Map<string, { orders: number; units: number; cents: number }>()
    for (const r of rows.filter(counted)) {
      const s = by.get(r.region) ?? { orders: 0, units: 0, cents: 0 }
      by.set(r.region, {
        orders: s.orders + 1,
        units: s.units + (r.units as number),
        cents: s.cents + (r.units as number) * r.cents,
      })
    }
    return by
  }
  let by = summarise()
  // Hard sorts by revenue: make the revenues distinct so the order is defined.
  while (hard && new Set([...by.values()].map((s) => s.cents)).size < by.size) {
    const bump = rng.int(0, rows.length - 1)
    rows = rows.map((r, i) =>
      i === bump && r.units !== undefined ? { ...r, units: r.units + 1 } : r,
    )
    by = summarise()
  }
  const summary = [...by.entries()]
    .sort(([a, x], [b, y]) => (hard ? y.cents - x.cents : a < b ? -1 : 1))
    .map(([region, s]) => ({ region, orders: s.orders, units: s.units, revenue: money(s.cents) }))
  const productCents = new Map<string, number>()
  for (const r of rows.filter(counted))
    productCents.set(r.product, (productCents.get(r.product) ?? 0) + (r.units as number) * r.cents)
  const topProduct =
    [...productCents.entries()].sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1))[0]?.[0] ?? ""

  const csv = [
    "order_id,date,region,product,units,unit_price",
    ...rows.map((r) =>
      [r.id, r.date, r.region, cell(r.product), r.units ?? "", money(r.cents)].join(","),
    ),
  ].join("\n")

  const instruction = [
    "`sales.csv` lists orders, one per row, with the columns order_id, date (YYYY-MM-DD), region, product, units and unit_price.",
    ...(hard
      ? ["Product names may contain commas; such fields are double-quoted, as usual in CSV."]
      : []),
    "",
    `Write \`summary.csv\` with the header \`region,orders,units,revenue\` and one row per region: the number of orders, the total units and the revenue (sum of units × unit_price) written with exactly two decimals, e.g. \`1234.50\`.`,
    ...(filtered
      ? [
          `Only count orders from ${MONTHS[monthIndex]} 2024. Rows whose units field is empty are incomplete: skip them. Leave out regions that have no counted order.`,
        ]
      : []),
    hard
      ? "Order the rows by revenue, highest first."
      : "Order the rows by region name, alphabetically.",
    ...(hard
      ? [
          "",
          "Also write `top_product.txt` containing just the name of the product with the highest revenue among the counted orders (exactly as in the CSV, without quotes).",
        ]
      : []),
  ].join("\n")

  const solution = hard
    ? bashScript([
        "python3 - <<'PY'",
        "import csv",
        "from collections import defaultdict",
        "",
        "orders, units, cents, by_product = defaultdict(int), defaultdict(int), defaultdict(int), defaultdict(int)",
        'with open("sales.csv", newline="") as f:',
        "    for row in csv.DictReader(f):",
        `        if not row["date"].startswith("2024-${month}") or not row["units"].strip():`,
        "            continue",
        '        u, c, r = int(row["units"]), round(float(row["unit_price"]) * 100), row["region"]',
        "        orders[r] += 1",
        "        units[r] += u",
        "        cents[r] += u * c",
        '        by_product[row["product"]] += u * c',
        'with open("summary.csv", "w", newline="") as f:',
        '    w = csv.writer(f, lineterminator="\\n")',
        '    w.writerow(["region", "orders", "units", "revenue"])',
        "    for r in sorted(cents, key=lambda r: -cents[r]):",
        '        w.writerow([r, orders[r], units[r], f"{cents[r] // 100}.{cents[r] % 100:02d}"])',
        "top = sorted(by_product.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]",
        'with open("top_product.txt", "w") as f:',
        '    f.write(top + "\\n")',
        "PY",
      ])
    : bashScript([
        "{",
        "  echo region,orders,units,revenue",
        `  awk -F, 'NR > 1${filtered ? ` && $2 ~ /^2024-${month}-/ && $5 != ""` : ""} { o[$3]++; u[$3] += $5; c[$3] += $5 * $6 }`,
        '    END { for (r in o) printf "%s,%d,%d,%.2f\\n", r, o[r], u[r], c[r] }\' sales.csv | LC_ALL=C sort',
        "} > summary.csv",
      ])

  const helpers = [
    "import csv",
    "",
    `SUMMARY = ${py(summary)}`,
    "",
    "",
    "def rows():",
    '    with open(APP / "summary.csv", newline="") as f:',
    "        return [r for r in csv.reader(f) if r]",
    "",
    "",
    "def by_region(column):",
    "    header, *body = rows()",
    "    at = [h.strip() for h in header].index(column)",
    "    return {r[0].strip(): r[at].strip() for r in body}",
  ]
  const tests: Array<TestCase> = [
    {
      name: "header",
      doc: "summary.csv starts with the header region,orders,units,revenue",
      body: ['assert [h.strip() for h in rows()[0]] == ["region", "orders", "units", "revenue"]'],
    },
    {
      name: "one_row_per_region",
      doc: "summary.csv has one row for each region with counted orders",
      body: [
        "got = [r[0].strip() for r in rows()[1:]]",
        'assert sorted(got) == sorted(s["region"] for s in SUMMARY)',
      ],
    },
    {
      name: "order_counts",
      doc: "the orders column counts the orders of each region",
      body: ['assert by_region("orders") == {s["region"]: str(s["orders"]) for s in SUMMARY}'],
    },
    {
      name: "unit_totals",
      doc: "the units column sums the units of each region",
      body: ['assert by_region("units") == {s["region"]: str(s["units"]) for s in SUMMARY}'],
    },
    {
      name: "revenue_totals",
      doc: "the revenue column is the sum of units x unit_price, to the cent",
      body: [
        'got = {k: float(v) for k, v in by_region("revenue").items()}',
        'want = {s["region"]: float(s["revenue"]) for s in SUMMARY}',
        "assert got.keys() == want.keys()",
        "for k in want:",
        "    assert abs(got[k] - want[k]) < 0.005, k",
      ],
    },
    {
      name: "revenue_has_two_decimals",
      doc: "revenue values are written with exactly two decimals",
      body: [
        "import re",
        'values = list(by_region("revenue").values())',
        "assert len(values) > 0",
        'assert all(re.fullmatch(r"\\d+\\.\\d\\d", v) for v in values), values',
      ],
    },
    {
      name: "row_order",
      doc: hard ? "rows are ordered by revenue, highest first" : "rows are ordered by region name",
      body: ['assert [r[0].strip() for r in rows()[1:]] == [s["region"] for s in SUMMARY]'],
    },
    ...(hard
      ? [
          {
            name: "top_product",
            doc: "top_product.txt names the product with the highest revenue",
            body: [`assert (APP / "top_product.txt").read_text().strip() == ${py(topProduct)}`],
          },
        ]
      : []),
  ]
  return {
    instruction,
    setup: bashScript(createFiles([{ path: "sales.csv", content: `${csv}\n` }])),
    solution,
    ...pytestFile(tests, helpers),
  }
}

export const csvAggregate: TaskFamily = {
  name: "csv-aggregate",
  summary:
    "group-by region over sales.csv: counts, sums, revenue to the cent; month filter, quoted fields",
  tags: ["csv", "awk", "python", "aggregation"],
  generate,
}
