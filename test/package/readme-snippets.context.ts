import type { RunHandle, WorkflowClient } from '../../lib/core';

/**
 * What the snippets of README.md and of the docs use without defining it, as the text around them
 * describes it: a client created earlier, a run id, the user's own services. Compiled with every
 * snippet by readme-snippets.spec.ts; a snippet that declares one of these names uses its own.
 */
declare global {
  /** `createClient(...)`, or the injected `RedflowClient`. */
  var client: WorkflowClient;
  var runId: string;
  var handle: RunHandle<unknown>;
  /** The user's payment provider. */
  var payments: {
    charge(order: string, options?: { idempotencyKey: string }): Promise<{ chargeId: string }>;
    refund(chargeId: string): Promise<void>;
    createLink(): Promise<string>;
  };
  /** The user's stock service. */
  var inventory: { reserve(order: string): Promise<{ reservationId: string }>; release(reservationId: string): Promise<void> };
  /** The user's carrier. */
  var shipping: { ship(order: string): Promise<{ trackingId: string }> };
  var metrics: { increment(name: string, tags: Record<string, string | number | boolean>): void };
  var log: { info(message: string): void };
  function charge(orderId: string): Promise<{ chargeId: string }>;
  function sendEmail(to: string): Promise<{ id: string }>;
  function buildReport(input: { kind: string }): Promise<{ rows: number }>;
}

export {};
