import { ConfigurationError, type CronTrigger } from '../../core';
import { checkCronId } from '../../core/definition/cron';
import { assertKnownKeys, CRON_TRIGGER_KEYS, describeValue } from '../../core/definition/option-checks';
import { REDFLOW_CRON } from '../redflow.constants';
import { methodLabel } from './workflow.decorator';

/** Keys of the options of `@Cron`: a `CronTrigger` without `expression` or `rrule`, which are the first argument. */
export const CRON_DECORATOR_OPTION_KEYS = CRON_TRIGGER_KEYS.filter((key) => key !== 'expression' && key !== 'rrule');

/**
 * Starts the `@Workflow` method on a cron schedule: exactly one run per tick across all replicas
 * (unlike `@nestjs/schedule`, whose cron runs in every process). Accepts croner expressions, with
 * an optional seconds field, and `@nestjs/schedule`'s `CronExpression` values; or `{ rrule }`, an
 * RFC 5545 rule for what cron cannot say (its DTSTART line first; needs the optional peer `rrule`).
 * Repeatable. Unknown options or a non-string expression throw `ConfigurationError` when the class
 * is decorated; the expression or rule itself is parsed when the workflow is defined.
 */
export function Cron(schedule: string | { rrule: string }, options: Omit<CronTrigger, 'expression' | 'rrule'> = {}): MethodDecorator {
  return (target, key, descriptor: PropertyDescriptor) => {
    const where = methodLabel(target, key);
    const rule = typeof schedule === 'object' && schedule !== null ? schedule : undefined;
    if (rule) {
      assertKnownKeys(`@Cron rule of ${where}`, rule, ['rrule']);
      if (typeof rule.rrule !== 'string' || !rule.rrule.trim()) {
        throw new ConfigurationError(`@Cron rrule of ${where} must be RFC 5545 rule text starting with its DTSTART line, got ${describeValue(rule.rrule)}.`);
      }
    } else if (typeof schedule !== 'string' || !schedule.trim()) {
      throw new ConfigurationError(
        `@Cron expression of ${where} must be a non-empty string, got ${describeValue(schedule)}; use croner syntax, e.g. "0 9 * * 1-5", or { rrule } for an RFC 5545 rule.`,
      );
    }
    const hint = {
      expression: 'Pass the expression as the first argument of @Cron.',
      rrule: 'Pass the rule as the first argument of @Cron: @Cron({ rrule }).',
    };
    assertKnownKeys(`@Cron options of ${where}`, options, CRON_DECORATOR_OPTION_KEYS, hint);
    if (options.id !== undefined) checkCronId(options.id, `@Cron id of ${where}`);
    if (options.timezone !== undefined && (typeof options.timezone !== 'string' || !options.timezone)) {
      throw new ConfigurationError(`@Cron timezone of ${where} must be an IANA time zone name such as "Europe/Paris", got ${describeValue(options.timezone)}.`);
    }
    const crons: CronTrigger[] = Reflect.getMetadata(REDFLOW_CRON, descriptor.value) ?? [];
    const trigger: CronTrigger = rule ? { ...options, rrule: rule.rrule } : { ...options, expression: schedule as string };
    Reflect.defineMetadata(REDFLOW_CRON, [...crons, trigger], descriptor.value);
    return descriptor;
  };
}
