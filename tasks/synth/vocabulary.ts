/** Word lists the families draw names and text from (lowercase ASCII letters unless noted). */

const words = (text: string): ReadonlyArray<string> => text.split(/\s+/).filter((w) => w !== "")

export const NOUNS = words(`
  anchor badger beacon bridge canyon cedar cipher comet copper crystal delta ember falcon
  feather fjord forest garden glacier harbor hazel island jasper kernel lantern ledger
  lemon marble meadow meteor nectar orbit otter pebble pepper pillar planet quartz raven
  ribbon river saddle signal summit thistle timber tundra valley velvet willow walnut
  zephyr maple basalt coral
`)

export const ADJECTIVES = words(`
  amber bold brisk calm clever crisp dusty eager fancy gentle golden hidden humble keen
  lively lucky mellow misty noble plain proud quiet rapid rusty silent silver steady sunny
  swift tidy vivid wild witty young
`)

export const VERBS = words(`
  builds carries checks collects covers draws finds follows gathers holds keeps lifts
  marks moves opens paints reads sends shapes shows starts takes turns watches writes
`)

export const FIRST_NAMES = words(`
  ada alan alice amara bruno carla chen dara diego elena emil farah grace hana ivan jonas
  kai lena leo maya mei nadia omar priya quinn rosa sami tara umar vera wen yara zoe
`)

export const LAST_NAMES = words(`
  abbott baker castro dalton ellis fischer garcia hughes ito jensen kowalski lopez morgan
  nakamura okafor patel quigley rossi santos tanaka ueda varga walsh xu young zimmer
`)

export const REGIONS = words(`
  north south east west central coastal highland lowland metro
`)

export const PRODUCTS = words(`
  anvil bucket candle drill easel funnel gasket hammer kettle ladder mallet nozzle pliers
  rivet shovel trowel valve wrench
`)

export const DEPARTMENTS = words(`
  engineering finance legal marketing operations research sales support
`)

export const CATEGORIES = words(`
  tools garden kitchen office outdoor storage lighting safety
`)

export const URL_PATHS = words(`
  / /index.html /login /logout /api/items /api/orders /api/users /static/app.js
  /static/site.css /search /cart /checkout /about /health
`)

/** A name like "silent-harbor" or "silent_harbor". */
export const compoundName = (pick: <T>(items: ReadonlyArray<T>) => T, separator = "-"): string =>
  `${pick(ADJECTIVES)}${separator}${pick(NOUNS)}`
