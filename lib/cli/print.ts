/**
 * What the CLI prints, and how run data looks once printed: control characters escaped (`\x1b`),
 * so stored data cannot move the cursor or recolour the screen.
 */

/** Writes one line to stdout. */
export const out = (text: string): void => {
  process.stdout.write(`${text}\n`);
};

/** Writes one line to stderr. */
export const warn = (text: string): void => {
  process.stderr.write(`${text}\n`);
};

/**
 * Characters a terminal may act on instead of showing: C0 controls (ESC starts colour and cursor
 * sequences, CR and BS overwrite what was printed), DEL, C1 controls (0x9b is an 8-bit CSI), line
 * and paragraph separators, and the bidirectional overrides that reorder the text around them.
 */
// eslint-disable-next-line no-control-regex
const TERMINAL_CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** The same minus C0, which JSON.stringify already escapes. */
const JSON_UNESCAPED_CONTROL = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const NAMED_ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const hex = (char: string, digits: number) => char.charCodeAt(0).toString(16).padStart(digits, '0');

/** `text` with every control character written as visible text: `\n`, `\r`, `\t`, `\x1b`, `\u202e`. */
export function printable(text: string): string {
  return text.replace(TERMINAL_CONTROL, (c) => NAMED_ESCAPES[c] ?? (c <= '\u00ff' ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`));
}

/**
 * Pretty JSON in which the control characters JSON.stringify leaves raw (DEL, C1, separators,
 * bidi overrides) are `\uXXXX` escapes too. They can only occur inside strings, where the escape
 * means the same character, so the output parses back to the same value.
 */
export function safeJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(JSON_UNESCAPED_CONTROL, (c) => `\\u${hex(c, 4)}`);
}

/** A single-line, escaped rendering of a JSON value for text output. */
export const jsonText = (value: unknown): string => printable(JSON.stringify(value) ?? 'undefined');

/** Any value as one printable cell or field. */
export const cell = (value: unknown): string => (value === undefined || value === null ? '' : printable(String(value)));

/** A table with a header line, a rule under it, and one line per row; columns padded to line up. */
export function table(rows: Array<Record<string, unknown>>, columns: string[]): string {
  const cells = rows.map((r) => columns.map((c) => cell(r[c])));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [line(columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

/** A timestamp in ISO 8601, or nothing when there is none. */
export const time = (ms?: number): string => (ms ? new Date(ms).toISOString() : '');

/** What a suspended run waits for, as `RunState.waitingFor` says (shape kept here: the CLI imports no engine type for it). */
interface ShownWait {
  kind: string;
  name?: string;
  until?: number;
}

/**
 * A run's status, with what a scheduled run suspended in a step waits for:
 * `scheduled · waiting for signal "approve"`, `scheduled · waiting for run <id>`,
 * `scheduled · sleeping until <time>`, `scheduled · waiting for a race (waitForAny) until <time>`.
 */
export function statusText(status: string | undefined, waitingFor?: ShownWait): string {
  if (status === undefined || !waitingFor) return status ?? '';
  const until = waitingFor.until ? ` until ${time(waitingFor.until)}` : '';
  const name = waitingFor.name ?? '';
  const what: Record<string, string> = {
    signal: `waiting for signal ${JSON.stringify(name)}${until}`,
    event: `waiting for event ${JSON.stringify(name)}${until}`,
    child: `waiting for run ${name}${until}`,
    sleep: `sleeping${until}`,
    any: `waiting for a race (waitForAny)${until}`,
  };
  return `${status} · ${what[waitingFor.kind] ?? `waiting (${waitingFor.kind})`}`;
}
