import { loadScript, SCRIPTS, type ScriptName } from '../../lib/core/store/scripts/script-loader';
import { TestEngine } from '../support/engine';

/**
 * Every script, as the loader assembles it (includes, and the event flush around an emitting
 * script's body), compiles on the Redis the tests use, including the ones a test may not reach.
 */
describe('Lua scripts on Redis', () => {
  let engine: TestEngine;
  beforeAll(() => (engine = new TestEngine()));
  afterAll(() => engine.close());

  it.each(Object.keys(SCRIPTS) as ScriptName[])('%s compiles (SCRIPT LOAD)', async (name) => {
    const sha = (await engine.redis.script('LOAD', loadScript(name))) as string;
    expect(sha).toMatch(/^[0-9a-f]{40}$/);
  });
});
