// Times, durations and intervals as the page writes them, in UTC or the browser's time zone.

export type TimeZoneMode = 'local' | 'utc';

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** `2026-12-07 12:34:56` in the chosen zone (with ` UTC` when UTC), or '' for no time. */
export function time(ms: number | null | undefined, zone: TimeZoneMode): string {
  if (!ms) return '';
  const d = new Date(ms);
  if (zone === 'utc') {
    return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
  }
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A clock time with milliseconds, for the waterfall's axis and tooltips. */
export function clock(ms: number, zone: TimeZoneMode): string {
  const d = new Date(ms);
  return zone === 'utc'
    ? `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}.${pad(d.getUTCMilliseconds(), 3)}`
    : `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** A duration a person reads: `850 ms`, `2.4 s`, `3 min 5 s`, `2 h 10 min`, `3 d 4 h`. */
export function duration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '';
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  const m = Math.round(s / 60);
  if (m < 1440) return `${Math.floor(m / 60)} h${m % 60 ? ` ${m % 60} min` : ''}`;
  const h = Math.round(m / 60);
  return `${Math.floor(h / 24)} d${h % 24 ? ` ${h % 24} h` : ''}`;
}

/** How long ago, from `now`: `5 s ago`. */
export const ago = (ms: number | null | undefined, now: number): string => (ms ? `${duration(Math.max(0, now - ms))} ago` : '');

/** An interval in the largest unit that divides it: 90000 → "90s", 7200000 → "2h". */
export function interval(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ] as const)
    if (ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

/** The value of a `datetime-local` input for `ms`, in the chosen zone. */
export function toInputTime(ms: number | undefined, zone: TimeZoneMode): string {
  if (!ms) return '';
  const d = new Date(zone === 'utc' ? ms : ms - new Date(ms).getTimezoneOffset() * 60_000);
  return d.toISOString().slice(0, 16);
}

/** Epoch ms of a `datetime-local` input's value, read in the chosen zone. */
export function fromInputTime(value: string, zone: TimeZoneMode): number | undefined {
  if (!value) return undefined;
  const ms = zone === 'utc' ? Date.parse(`${value}:00Z`) : new Date(value).getTime();
  return Number.isFinite(ms) ? ms : undefined;
}
