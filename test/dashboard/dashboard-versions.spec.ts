import { createServer, type Server } from 'node:http';
import request from 'supertest';

import { createDashboardHandler, WorkflowRegistry, type RedflowLogger } from '../../lib';
import { eventually, TestEngine } from '../support/engine';

const silent: RedflowLogger = { log() {}, warn() {}, error() {} };

/** The dashboard's Workflows API shows each version of a workflow, and a version whose runs have no worker. */
describe('dashboard: workflow versions', () => {
  let engine: TestEngine;
  let server: Server;
  beforeEach(() => {
    engine = new TestEngine();
    const handler = createDashboardHandler(engine.client, { path: '/redflow', authorize: () => true }, silent);
    server = createServer((req, res) => void handler(req, res).then((handled) => handled || res.writeHead(404).end()));
  });
  afterEach(() => engine.close());

  function checkout(version: number): WorkflowRegistry {
    const registry = new WorkflowRegistry();
    registry.define('checkout', { version }, async ({ step }) => step.waitForSignal('go', 'go'));
    return registry;
  }

  it('lists the versions with their live workers, and "no worker for checkout v1" while v1 runs wait without one', async () => {
    const v1 = await engine.worker({ registry: checkout(1), logger: silent });
    const handle = await engine.client.runByName('checkout', {});
    await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'scheduled');
    const v2 = await engine.worker({ registry: checkout(2), logger: silent });
    let workflows = (await request(server).get('/redflow/api/workflows').expect(200)).body.workflows as Array<Record<string, unknown>>;
    expect(workflows).toEqual([
      expect.objectContaining({
        name: 'checkout',
        queue: 'default',
        version: 2,
        versions: [expect.objectContaining({ version: 1, workers: [v1.workerId] }), expect.objectContaining({ version: 2, workers: [v2.workerId] })],
      }),
    ]);
    await v1.stop();
    await engine.client.signal(handle.id, 'go');
    workflows = (await request(server).get('/redflow/api/workflows').expect(200)).body.workflows as Array<Record<string, unknown>>;
    expect(workflows[0].versions).toEqual([
      { version: 1, workers: [], updatedAt: expect.any(Number), noWorker: 'no worker for checkout v1' },
      { version: 2, workers: [v2.workerId], updatedAt: expect.any(Number) },
    ]);
    expect((await engine.client.getRun(handle.id))?.status).toBe('queued');
  });
});
