import type { Difficulty, GeneratedTask, TaskFamily } from "../family.ts"
import { py, pytestFile, type TestCase } from "../pytest.ts"
import type { Rng } from "../rng.ts"
import { bashScript, createFiles } from "../shell.ts"
import { URL_PATHS } from "../vocabulary.ts"

const MONTHS = [
  "Jan",
  "Feb",
  "Mar",
  "Apr",
  "May",
  "Jun",
  "Jul",
  "Aug",
  "Sep",
  "Oct",
  "Nov",
  "Dec",
] as const
const SIZES = { easy: 40, medium: 80, hard: 120 } as const
const STATUSES = [
  200, 200, 200, 200, 201, 204, 301, 304, 400, 401, 403, 404, 404, 500, 502, 503,
] as const

interface Request {
  readonly ip: string
  readonly day: number
  readonly hour: number
  readonly minute: number
  readonly second: number
  readonly method: string
  readonly path: string
  readonly status: number
  readonly bytes: number | undefined
}

const pad = (n: number) => String(n).padStart(2, "0")

const generate = (rng: Rng, difficulty: Difficulty): GeneratedTask => {
  const medium = difficulty !== "easy"
  const hard = difficulty === "hard"
  const month = rng.int(0, 11)
  const year = rng.pick([2023, 2024])
  const firstDay = rng.int(1, 25)
  const days = hard ? 3 : medium ? 2 : 1
  const ips = Array.from(
    { length: rng.int(5, 8) },
    () =>
      `${rng.pick([10, 172, 192, 203])}.${rng.int(0, 255)}.${rng.int(0, 255)}.${rng.int(1, 254)}`,
  )
  const weights = ips.map((_, i) => (i + 1) * (i + 2))
  const pickIp = () => {
    let r = rng.int(0, weights.reduce((a, b) => a + b, 0) - 1)
    for (let i = 0; i < ips.length; i++) {
      r -= weights[i] as number
      if (r < 0) return ips[i] as string
    }
    return ips[0] as string
  }
  const peak = rng.int(8, 20)
  const make = (): Request => {
    const path = rng.pick(URL_PATHS)
    return {
      ip: pickIp(),
      day: rng.int(0, days - 1),
      hour: rng.chance(0.3) ? peak : rng.int(0, 23),
      minute: rng.int(0, 59),
      second: rng.int(0, 59),
      method: rng.pick(["GET", "GET", "GET", "POST", "PUT", "DELETE"]),
      path: hard && path === "/search" ? `/search?q=${rng.int(1, 99)}` : path,
      status: rng.pick(STATUSES),
      bytes: hard && rng.chance(0.1) ? undefined : rng.int(0, 50000),
    }
  }
  const count = (items: ReadonlyArray<string>) => {
    const m = new Map<string, number>()
    for (const i of items) m.set(i, (m.get(i) ?? 0) + 1)
    return m
  }
  const ranked = (m: Map<string, number>) =>
    [...m.entries()].sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1))
  // Redraw until the answers are unambiguous: no ties among the top four IPs, one busiest hour.
  let requests: Array<Request> = []
  for (;;) {
    requests = Array.from({ length: SIZES[difficulty] }, make)
    requests.push({ ...make(), status: 500 }, { ...make(), status: 503 })
    const ipRank = ranked(count(requests.map((r) => r.ip)))
    const hourRank = ranked(count(requests.map((r) => pad(r.hour))))
    const strictlyDecreasing = (rank: ReadonlyArray<[string, number]>, k: number) =>
      rank.length > k &&
      rank
        .slice(0, k + 1)
        .every((e, i, all) => i === 0 || (all[i - 1] as [string, number])[1] > e[1])
    if (strictlyDecreasing(ipRank, 3) && strictlyDecreasing(hourRank, 1)) break
  }
  const ordered = [...requests].sort(
    (a, b) => a.day - b.day || a.hour - b.hour || a.minute - b.minute || a.second - b.second,
  )
  const line = (r: Request) =>
    `${r.ip} - - [${pad(firstDay + r.day)}/${MONTHS[month]}/${year}:${pad(r.hour)}:${pad(r.minute)}:${pad(r.second)} +0000] "${r.method} ${r.path} HTTP/1.1" ${r.status} ${r.bytes ?? "-"}`
  // Rotated files: the oldest lines are in the highest-numbered file.
  const files = hard ? 3 : medium ? 2 : 1
  const chunks: Array<Array<Request>> = Array.from({ length: files }, () => [])
  ordered.forEach((r, i) => {
    chunks[files - 1 - Math.floor((i * files) / ordered.length)]?.push(r)
  })
  const fileName = (i: number) => (i === 0 ? "logs/access.log" : `logs/access.log.${i}`)

  const statusCounts = [...count(requests.map((r) => String(r.status))).entries()]
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([s, n]) => `${s} ${n}`)
  const topIps = ranked(count(requests.map((r) => r.ip)))
    .slice(0, 3)
    .map(([ip, n]) => `${n} ${ip}`)
  const errorPaths = [
    ...new Set(requests.filter((r) => r.status >= 500).map((r) => r.path.split("?")[0] as string)),
  ].sort()
  const bytes = requests.reduce((s, r) => s + (r.bytes ?? 0), 0)
  const busiest = (ranked(count(requests.map((r) => pad(r.hour))))[0] as [string, number])[0]
  const perDay = [
    ...count(requests.map((r) => `${year}-${pad(month + 1)}-${pad(firstDay + r.day)}`)).entries(),
  ]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([d, n]) => `${d},${n}`)

  const sources = hard
    ? "`logs/access.log`, `logs/access.log.1` and the gzip-compressed `logs/access.log.2.gz` (older, rotated logs)"
    : medium
      ? "`logs/access.log` and the older, rotated `logs/access.log.1`"
      : "`logs/access.log`"
  const instruction = [
    `A web server wrote its access log in Common Log Format to ${sources}. Each line looks like:`,
    "",
    "```",
    line(requests[0] as Request),
    "```",
    "",
    `(client IP, two dashes, the time, the request line, the status code and the response size in bytes${hard ? "; a size of `-` means 0" : ""}). Analyse ${files > 1 ? "all of the requests together" : "the requests"} and write these files into a new folder \`report/\`:`,
    "",
    "1. `status_counts.txt`: one line `<status> <count>` per status code that occurs, ordered by status code.",
    "2. `top_ips.txt`: the 3 client IPs with the most requests, as `<count> <ip>`, most requests first.",
    `3. \`error_paths.txt\`: the distinct request paths that got a 5xx status, one per line, sorted in byte order${hard ? "; drop any query string (the part from `?` on)" : ""}.`,
    "4. `bytes.txt`: the total number of bytes sent, as a bare integer.",
    ...(medium
      ? [
          "5. `busiest_hour.txt`: the hour of the day (two digits, `00` to `23`) with the most requests.",
        ]
      : []),
    ...(hard
      ? [
          "6. `per_day.csv`: a header line `date,requests`, then one line per day as `YYYY-MM-DD,<count>`, oldest first.",
        ]
      : []),
  ].join("\n")

  const solution = bashScript([
    "export LC_ALL=C",
    "mkdir -p report",
    `{ ${[...Array(files).keys()]
      .reverse()
      .map((i) => (hard && i === 2 ? `zcat ${fileName(i)}.gz` : `cat ${fileName(i)}`))
      .join("; ")}; } > /tmp/all.log`,
    "awk '{print $9}' /tmp/all.log | sort -n | uniq -c | awk '{print $2, $1}' > report/status_counts.txt",
    "awk '{print $1}' /tmp/all.log | sort | uniq -c | sort -k1,1nr -k2,2 | awk 'NR <= 3 {print $1, $2}' > report/top_ips.txt",
    "awk '$9 >= 500 {split($7, p, \"?\"); print p[1]}' /tmp/all.log | sort -u > report/error_paths.txt",
    'awk \'{s += ($10 == "-" ? 0 : $10)} END {printf "%d\\n", s}\' /tmp/all.log > report/bytes.txt',
    ...(medium
      ? [
          "awk '{split($4, t, \":\"); print t[2]}' /tmp/all.log | sort | uniq -c | sort -k1,1nr | awk 'NR == 1 {print $2}' > report/busiest_hour.txt",
        ]
      : []),
    ...(hard
      ? [
          "{",
          "  echo date,requests",
          '  awk \'BEGIN {split("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec", m, " "); for (i in m) num[m[i]] = sprintf("%02d", i)}',
          '    {split(substr($4, 2, 11), d, "/"); print d[3] "-" num[d[2]] "-" d[1]}\' /tmp/all.log | sort | uniq -c | awk \'{print $2 "," $1}\'',
          "} > report/per_day.csv",
        ]
      : []),
  ])

  const helpers = [
    "",
    "def report(name):",
    '    return [" ".join(l.split()) for l in (APP / "report" / name).read_text().splitlines() if l.strip()]',
  ]
  const tests: Array<TestCase> = [
    {
      name: "status_counts",
      doc: "status_counts.txt counts each status code, in status order",
      body: [`assert report("status_counts.txt") == ${py(statusCounts)}`],
    },
    {
      name: "top_ips",
      doc: "top_ips.txt has the three busiest clients with their counts",
      body: [`assert report("top_ips.txt") == ${py(topIps)}`],
    },
    {
      name: "error_paths",
      doc: "error_paths.txt lists the paths that got a 5xx",
      body: [`assert report("error_paths.txt") == ${py(errorPaths)}`],
    },
    {
      name: "total_bytes",
      doc: "bytes.txt has the total response size",
      body: [`assert report("bytes.txt") == [${py(String(bytes))}]`],
    },
  ]
  if (medium)
    tests.push({
      name: "busiest_hour",
      doc: "busiest_hour.txt names the hour with the most requests",
      body: [`assert report("busiest_hour.txt") == [${py(busiest)}]`],
    })
  if (hard)
    tests.push({
      name: "requests_per_day",
      doc: "per_day.csv counts requests per calendar day",
      body: [`assert report("per_day.csv") == ${py(["date,requests", ...perDay])}`],
    })
  if (files > 1)
    tests.push({
      name: "rotated_logs_are_included",
      doc: "the counts cover the rotated log files too",
      body: [
        'total = sum(int(l.split()[1]) for l in report("status_counts.txt"))',
        `assert total == ${requests.length}`,
      ],
    })

  const logFiles = chunks.map((c, i) => ({
    path: fileName(i),
    content: `${c.map(line).join("\n")}\n`,
  }))
  return {
    instruction,
    setup: bashScript([...createFiles(logFiles), ...(hard ? [`gzip ${fileName(2)}`] : [])]),
    solution,
    ...pytestFile(tests, helpers),
  }
}

export const logReport: TaskFamily = {
  name: "log-report",
  summary:
    "analyse Common Log Format access logs (rotated, gzipped): status counts, top IPs, 5xx paths, bytes, per day",
  tags: ["logs", "awk", "sort", "uniq", "gzip"],
  generate,
}
