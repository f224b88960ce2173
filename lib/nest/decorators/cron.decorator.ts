import type { CronTrigger } from '../../core';
import { REDFLOW_CRON } from '../redflow.constants';

/**
 * Starts the `@Workflow` method on a cron schedule: exactly one run per tick across all replicas
 * (unlike `@nestjs/schedule`, whose cron runs in every process). Accepts croner expressions, with
 * an optional seconds field, and `@nestjs/schedule`'s `CronExpression` values. Repeatable.
 */
export function Cron(expression: string, options: Omit<CronTrigger, 'expression'> = {}): MethodDecorator {
  return (_target, _key, descriptor: PropertyDescriptor) => {
    const crons: CronTrigger[] = Reflect.getMetadata(REDFLOW_CRON, descriptor.value) ?? [];
    Reflect.defineMetadata(REDFLOW_CRON, [...crons, { ...options, expression }], descriptor.value);
    return descriptor;
  };
}
