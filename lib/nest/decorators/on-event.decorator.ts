import { checkUserName } from '../../core/definition/option-checks';
import { REDFLOW_ON_EVENT } from '../redflow.constants';
import { methodLabel } from './workflow.decorator';

/**
 * Starts the `@Workflow` method on every `emitEvent(eventName, payload)`, with the payload as
 * input: one run per event across all replicas. Repeatable. A name that is not a non-empty string
 * throws `ConfigurationError` when the class is decorated.
 */
export function OnEvent(eventName: string): MethodDecorator {
  return (target, key, descriptor: PropertyDescriptor) => {
    checkUserName(eventName, `@OnEvent name of ${methodLabel(target, key)}`);
    const events: string[] = Reflect.getMetadata(REDFLOW_ON_EVENT, descriptor.value) ?? [];
    Reflect.defineMetadata(REDFLOW_ON_EVENT, [...events, eventName], descriptor.value);
    return descriptor;
  };
}
