/**
 * The suggestion for a mistyped option name ("Did you mean ...?"): the known name closest to it, if
 * one is close enough to be a likely typo.
 */

/** Levenshtein distance: single-character insertions, deletions and substitutions. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

/**
 * The candidate closest to `word`, compared case-insensitively, if it is close enough to be a
 * likely typo: within an edit distance of max(2, ⌊length/3⌋), or one containing the other (at
 * least 3 characters long). Ties go to the earlier candidate. `undefined` when none is close.
 */
export function nearestName(word: string, candidates: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  const threshold = Math.max(2, Math.floor(word.length / 3));
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const other = candidate.toLowerCase();
    const distance = editDistance(lower, other);
    const contains = Math.min(lower.length, other.length) >= 3 && (other.includes(lower) || lower.includes(other));
    if ((distance <= threshold || contains) && distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}
