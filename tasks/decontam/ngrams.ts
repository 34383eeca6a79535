/**
 * Word n-grams for decontamination. Normalisation: lower case; tokens are runs of [a-z0-9_]
 * (so punctuation, quotes and shell/Python syntax are separators); a token made only of digits
 * becomes `<num>`. Numbers are masked on purpose: two tasks that differ only in their numbers
 * (a port, a count, a seed-drawn threshold) are the same task for contamination purposes.
 * Names are not masked: a held-out task that reuses a template with different words still
 * shares every template n-gram, which is what the report should surface.
 */
export const tokenize = (text: string): Array<string> =>
  (text.toLowerCase().match(/[a-z0-9_]+/g) ?? []).map((t) => (/^\d+$/.test(t) ? "<num>" : t))

/**
 * The set of word n-grams of `text`. A text shorter than n words contributes its whole token
 * sequence as one gram, so that tiny instructions are still compared.
 */
export const ngrams = (text: string, n: number): Set<string> => {
  const tokens = tokenize(text)
  const out = new Set<string>()
  if (tokens.length === 0) return out
  if (tokens.length < n) {
    out.add(tokens.join(" "))
    return out
  }
  for (let i = 0; i + n <= tokens.length; i++) out.add(tokens.slice(i, i + n).join(" "))
  return out
}
