/**
 * Calendar rules for schedules that a cron expression cannot say ("the last Friday of the month",
 * "every other Tuesday"): RFC 5545 RRULE text, through the `rrule` package, an optional peer
 * loaded on first use. A rule's text must start with its DTSTART (with a TZID for local times):
 * its ticks count from there, the same in every process. Pure.
 */
import { ConfigurationError } from '../errors';

/** What this module uses of a parsed rule (an `RRule` or `RRuleSet` of the `rrule` package). */
export interface CalendarRule {
  after(date: Date, inclusive?: boolean): Date | null;
  before(date: Date, inclusive?: boolean): Date | null;
}

interface RRuleModule {
  rrulestr(text: string): CalendarRule;
}

let rruleModule: RRuleModule | undefined;
/** Parsed rules by text (a schedule's rule is parsed on every tick otherwise). */
const parsed = new Map<string, CalendarRule>();
const PARSED_MAX = 1_000;

function loadRRule(what: string): RRuleModule {
  if (rruleModule) return rruleModule;
  try {
    rruleModule = require('rrule') as RRuleModule;
  } catch {
    throw new ConfigurationError(`${what} is a calendar rule (rrule), which needs the optional peer rrule: run "npm install rrule".`);
  }
  return rruleModule;
}

/** The rule of `text`, or `ConfigurationError` naming `what` (a rule without DTSTART, or one RFC 5545 refuses). */
export function parseCalendarRule(text: unknown, what: string): CalendarRule {
  if (typeof text !== 'string') throw new ConfigurationError(`${what} must be RFC 5545 rule text, got ${typeof text}.`);
  const cached = parsed.get(text);
  if (cached) return cached;
  if (!/^DTSTART[:;]/.test(text.trim())) {
    throw new ConfigurationError(
      `${what} must start with its DTSTART line, such as "DTSTART;TZID=Europe/Paris:20270101T090000\\nRRULE:FREQ=MONTHLY;BYDAY=-1FR": its ticks count from it, the same in every process.`,
    );
  }
  let rule: CalendarRule;
  try {
    rule = loadRRule(what).rrulestr(text.trim());
    rule.after(new Date(0)); // an invalid part (a bad TZID, say) throws on the first computation
  } catch (error) {
    if (error instanceof ConfigurationError) throw error;
    throw new ConfigurationError(`${what} is not a valid RFC 5545 rule: ${(error as Error).message}.`);
  }
  if (parsed.size >= PARSED_MAX) parsed.clear();
  parsed.set(text, rule);
  return rule;
}

/** The first tick of a rule after `after` (ms), or undefined when it has none left (COUNT, UNTIL). */
export function nextRuleTick(rule: CalendarRule, after: number): number | undefined {
  return rule.after(new Date(after), false)?.getTime();
}

/** Up to `count` ticks of a rule at or before `at`, newest first. */
export function lastRuleTicks(rule: CalendarRule, at: number, count: number): number[] {
  const ticks: number[] = [];
  for (let d = rule.before(new Date(at), true); d && ticks.length < count; d = rule.before(d, false)) ticks.push(d.getTime());
  return ticks;
}
