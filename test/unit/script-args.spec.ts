import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { SCRIPT_ARGS, scriptArgv, type ScriptArgs } from '../../lib/core/store/script-args';
import { scriptArgs, scriptFile, SCRIPTS, type ScriptName } from '../../lib/core/store/scripts/script-loader';

/**
 * Each script declares its ARGV once, in its header (`-- ARGV: base runId ...`), and the caller
 * builds every call's ARGV from `SCRIPT_ARGS` in that order: the two must name the same arguments
 * in the same order, or a call would hand a script one value in place of another. No Redis needed.
 */

const DIR = join(__dirname, '..', '..', 'lib', 'core', 'store', 'scripts');
const names = Object.keys(SCRIPTS) as ScriptName[];

describe('script arguments', () => {
  it("each script's declared ARGV and its TypeScript declaration agree: the same names, in the same order, as many", () => {
    expect(Object.keys(SCRIPT_ARGS).sort()).toEqual([...names].sort());
    for (const name of names) expect([name, scriptArgs(name)]).toEqual([name, [...SCRIPT_ARGS[name]]]);
  });

  it('only the last declared argument may take the rest of ARGV, and no name is declared twice', () => {
    for (const name of names) {
      const declared = scriptArgs(name);
      const rest = declared.filter((arg) => arg.startsWith('...'));
      expect([name, rest.length <= 1 && (rest.length === 0 || declared[declared.length - 1] === rest[0])]).toEqual([name, true]);
      expect([name, new Set(declared.map((arg) => arg.replace(/^\.\.\./, ''))).size]).toEqual([name, declared.length]);
    }
  });

  it("a script's header and code use no ARGV position past its declared ones (unless it takes the rest)", () => {
    for (const name of names) {
      const declared = scriptArgs(name);
      if (declared.some((arg) => arg.startsWith('...'))) continue;
      const lua = readFileSync(join(DIR, scriptFile(name)), 'utf8');
      const used = [...lua.matchAll(/ARGV\[(\d+)\]/g)].map((m) => Number(m[1]));
      expect([name, Math.max(...used) <= declared.length]).toEqual([name, true]);
    }
  });

  it('builds the ARGV of a call in the declared order, the rest last', () => {
    for (const name of names) {
      const declared = SCRIPT_ARGS[name] as readonly string[];
      const args: Record<string, unknown> = {};
      for (const arg of declared) args[arg.replace(/^\.\.\./, '')] = arg.startsWith('...') ? ['r1', 'r2'] : arg;
      const argv = scriptArgv(name, args as unknown as ScriptArgs<typeof name>);
      const expected = declared.flatMap((arg) => (arg.startsWith('...') ? ['r1', 'r2'] : [arg]));
      expect([name, argv]).toEqual([name, expected]);
    }
  });
});
