import { ConfigurationError, type CronTrigger } from '../../core';
import { checkCronId } from '../../core/definition/cron';
import { assertKnownKeys, CRON_TRIGGER_KEYS, describeValue } from '../../core/definition/option-checks';
import { REDFLOW_CRON } from '../redflow.constants';
import { methodLabel } from './workflow.decorator';

/** Keys of the options of `@Cron`: a `CronTrigger` without `expression`, which is the first argument. */
export const CRON_DECORATOR_OPTION_KEYS = CRON_TRIGGER_KEYS.filter((key) => key !== 'expression');

/**
 * Starts the `@Workflow` method on a cron schedule: exactly one run per tick across all replicas
 * (unlike `@nestjs/schedule`, whose cron runs in every process). Accepts croner expressions, with
 * an optional seconds field, and `@nestjs/schedule`'s `CronExpression` values. Repeatable.
 * Unknown options or a non-string expression throw `ConfigurationError` when the class is
 * decorated; the expression itself is parsed when the workflow is defined.
 */
export function Cron(expression: string, options: Omit<CronTrigger, 'expression'> = {}): MethodDecorator {
  return (target, key, descriptor: PropertyDescriptor) => {
    const where = methodLabel(target, key);
    if (typeof expression !== 'string' || !expression.trim()) {
      throw new ConfigurationError(
        `@Cron expression of ${where} must be a non-empty string, got ${describeValue(expression)}; use croner syntax, e.g. "0 9 * * 1-5".`,
      );
    }
    assertKnownKeys(`@Cron options of ${where}`, options, CRON_DECORATOR_OPTION_KEYS, { expression: 'Pass the expression as the first argument of @Cron.' });
    if (options.id !== undefined) checkCronId(options.id, `@Cron id of ${where}`);
    if (options.timezone !== undefined && (typeof options.timezone !== 'string' || !options.timezone)) {
      throw new ConfigurationError(`@Cron timezone of ${where} must be an IANA time zone name such as "Europe/Paris", got ${describeValue(options.timezone)}.`);
    }
    const crons: CronTrigger[] = Reflect.getMetadata(REDFLOW_CRON, descriptor.value) ?? [];
    Reflect.defineMetadata(REDFLOW_CRON, [...crons, { ...options, expression }], descriptor.value);
    return descriptor;
  };
}
