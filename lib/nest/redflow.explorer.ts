import { Injectable, type Type } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';

import { ConfigurationError, type InputSchema, type WorkflowContext, type WorkflowRegistry } from '../core';
import { checkSchemaUsable } from '../core/definition/validation';
import type { RunEventListenerMetadata } from './decorators/on-run-event.decorator';
import { workflowName } from './decorators/workflow.decorator';
import { RedflowMetadataAccessor } from './redflow-metadata.accessor';
import { assertNoScheduleDecorator } from './schedule-interop';
import { runWithSteps } from './step-context';

type Handler = (this: unknown, ...args: unknown[]) => unknown;

/** An `@OnRunEvent` method, bound to its provider. */
export interface RunEventListener extends RunEventListenerMetadata {
  /** "Class.method", for logs. */
  where: string;
  call: (...args: unknown[]) => unknown;
}

/**
 * Finds `@Workflow` methods on the app's providers and defines them in a registry. It only
 * discovers and validates; the orchestrator owns what runs.
 */
@Injectable()
export class RedflowExplorer {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly accessor: RedflowMetadataAccessor,
  ) {}

  /**
   * Defines every discovered workflow in `registry` and returns the `@OnRunEvent` listeners;
   * throws `ConfigurationError` on mistakes.
   */
  explore(registry: WorkflowRegistry): RunEventListener[] {
    const listeners: RunEventListener[] = [];
    const definedBy = new Map<string, string>();
    // One object can be registered under several tokens (`useValue: obj` twice, or a `useFactory`
    // returning another provider's instance). Its workflows are the same ones, so each instance is
    // explored once (deduplication by instance) instead of failing with "defined twice".
    const explored = new WeakSet<object>();
    for (const wrapper of this.discovery.getProviders()) {
      // `useExisting` aliases point at a provider that is explored under its own token.
      if (wrapper.isAlias) continue;
      const isStatic = wrapper.isDependencyTreeStatic();
      const value: unknown = isStatic ? wrapper.instance : undefined;
      // Only objects carry methods: null/undefined values and primitives (`useValue: 42`, a factory
      // returning a string) are skipped, and so are functions (`useValue: SomeClass`).
      const instance = typeof value === 'object' && value !== null ? value : undefined;
      let prototype: object | null | undefined;
      // Like @nestjs/bullmq: the class is the instance's for `useValue` (no metatype) and `useFactory`
      // (the metatype is the factory, and `inject` is set), and the metatype for class providers.
      if (!wrapper.metatype || wrapper.inject) {
        // A request-scoped factory has no instance outside a request and cannot be inspected.
        if (!instance) continue;
        prototype = Object.getPrototypeOf(instance) as object | null;
      } else {
        prototype = instance ? (Object.getPrototypeOf(instance) as object | null) : (wrapper.metatype as { prototype?: object }).prototype;
      }
      if (!prototype) continue;
      if (instance) {
        if (explored.has(instance)) continue;
        explored.add(instance);
      }
      const className = (prototype as { constructor?: { name?: string } }).constructor?.name || String(wrapper.name);
      checkSignalSchemas(prototype, className);
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const handler = (prototype as Record<string, Handler>)[method];
        const where = `${className}.${method}`;
        const runEvents = this.accessor.getRunEventListeners(handler);
        if (runEvents.length) {
          if (!isStatic || !instance) {
            throw new ConfigurationError(
              `${where} has @OnRunEvent in a request-scoped provider. Run events come outside any request: make ${className} a default-scoped provider.`,
            );
          }
          for (const listener of runEvents) listeners.push({ ...listener, where, call: (...args) => handler.apply(instance, args) });
        }
        const options = this.accessor.getWorkflow(handler);
        const events = this.accessor.getEvents(handler);
        const crons = this.accessor.getCrons(handler);
        if (!options) {
          if (events.length || crons.length) {
            throw new ConfigurationError(
              `${where} has @${events.length ? 'OnEvent' : 'Cron'} but no @Workflow. Add @Workflow() to ${where}: triggers start workflows.`,
            );
          }
          continue;
        }
        assertNoScheduleDecorator(handler, where);
        if (!isStatic || !instance) {
          throw new ConfigurationError(
            `${where} is a @Workflow in a request-scoped provider. Workflows run outside any request: make ${className} a default-scoped provider and pass request data in the input.`,
          );
        }
        const name = workflowName(options, className, method);
        const previous = definedBy.get(name);
        if (previous) throw new ConfigurationError(`Workflow "${name}" is defined twice (${previous} and ${where}). Rename one of them.`);
        definedBy.set(name, where);
        const { input, onFailure, name: _name, ...workflowOptions } = options;
        const failureHook = typeof onFailure === 'string' ? (prototype as Record<string, Handler>)[onFailure] : onFailure;
        if (typeof onFailure === 'string' && typeof failureHook !== 'function') {
          throw new ConfigurationError(
            `onFailure of ${where} names "${onFailure}", which is not a method of ${className}. Name a method of the same provider.`,
          );
        }
        checkSchemaUsable(`Workflow "${name}" validates its input`, input);
        registry.define(
          name,
          {
            ...workflowOptions,
            schema: input,
            event: events.map((event) => ({ name: event })),
            cron: crons,
            onFailure: failureHook ? (ctx) => (failureHook as Handler).call(instance, ctx) : undefined,
          },
          (ctx: WorkflowContext<unknown>) => runWithSteps(ctx.step, () => handler.call(instance, ctx)),
        );
      }
    }
    for (const listener of listeners) if (listener.workflowClass) listener.workflows = this.workflowsOf(listener.workflowClass, listener.where);
    return listeners;
  }

  /** The workflow names of a class given to `@OnRunEvent` (all its `@Workflow` methods, or one). */
  private workflowsOf({ type, method }: { type: Type<unknown>; method?: string }, where: string): string[] {
    const prototype = type.prototype as Record<string, Handler>;
    const methods = method === undefined ? this.scanner.getAllMethodNames(prototype) : [method];
    const names = methods.flatMap((m) => {
      const options = typeof prototype[m] === 'function' ? this.accessor.getWorkflow(prototype[m]) : undefined;
      return options ? [workflowName(options, type.name, m)] : [];
    });
    if (!names.length) {
      throw new ConfigurationError(
        method === undefined
          ? `@OnRunEvent of ${where} listens to the workflows of ${type.name}, which has no @Workflow method. Give a class with @Workflow methods, or workflow names.`
          : `@OnRunEvent of ${where} listens to ${type.name}.${method}, which is not a @Workflow method. Decorate it with @Workflow(), or fix the name.`,
      );
    }
    return names;
  }
}

/**
 * At startup, the DTO classes of a workflow provider's static `signals` (see RedflowClient.signal)
 * can validate: class-validator and class-transformer are installed (`ConfigurationError` naming
 * the signal otherwise, instead of an error at the first signal sent).
 */
function checkSignalSchemas(prototype: object, className: string): void {
  const signals = (prototype as { constructor?: { signals?: unknown } }).constructor?.signals;
  if (!signals || typeof signals !== 'object') return;
  for (const [signal, schema] of Object.entries(signals as Record<string, InputSchema>)) {
    checkSchemaUsable(`Signal "${signal}" of ${className} validates its payload`, schema);
  }
}
