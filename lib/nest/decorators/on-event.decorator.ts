import { REDFLOW_ON_EVENT } from '../redflow.constants';

/**
 * Starts the `@Workflow` method on every `emitEvent(eventName, payload)`, with the payload as
 * input: one run per event across all replicas. Repeatable.
 */
export function OnEvent(eventName: string): MethodDecorator {
  return (_target, _key, descriptor: PropertyDescriptor) => {
    const events: string[] = Reflect.getMetadata(REDFLOW_ON_EVENT, descriptor.value) ?? [];
    Reflect.defineMetadata(REDFLOW_ON_EVENT, [...events, eventName], descriptor.value);
    return descriptor;
  };
}
