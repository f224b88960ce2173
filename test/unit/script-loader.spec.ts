import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { loadScript, PROLOGUE_INCLUDE, scriptFile, SCRIPTS, type ScriptName } from '../../lib/core/store/scripts/script-loader';

/**
 * The Lua scripts as files: one per state transition, named `<name>-<numKeys>.lua`, each carrying
 * the shared functions of `includes/` it uses and no others. No Redis needed.
 */

const DIR = join(__dirname, '..', '..', 'lib', 'core', 'store', 'scripts');
const INCLUDES = join(DIR, 'includes');
const names = Object.keys(SCRIPTS) as ScriptName[];
const read = (file: string) => readFileSync(file, 'utf8');
/** Lua without its comments, so that names mentioned in prose do not count as uses. */
const code = (lua: string) => lua.replace(/--[^\n]*/g, '');
const definedIn = (lua: string) => [...code(lua).matchAll(/^local (?:function )?([A-Za-z_]\w*)/gm)].map((m) => m[1]);

describe('Lua scripts', () => {
  it('each script file is <name>-<number of KEYS>.lua of a script the loader knows, and each known script has its file', () => {
    const files = readdirSync(DIR)
      .filter((f) => f.endsWith('.lua'))
      .sort();
    expect(files).toEqual(names.map(scriptFile).sort());
    for (const name of names) expect(scriptFile(name)).toBe(`${name}-${SCRIPTS[name]}.lua`);
  });

  it('no script reads the Redis clock: time comes from the caller (its Clock, virtual in tests), never from TIME', () => {
    for (const name of names) expect([name, /redis\.call\(\s*['"]TIME['"]/i.test(code(loadScript(name)))]).toEqual([name, false]);
  });

  it('a script that emits events ends by writing them, with one XADD', () => {
    for (const name of names) {
      const lua = code(loadScript(name));
      if (!/emit_event\(/.test(lua)) continue;
      expect([name, lua.trimEnd().endsWith('flush_events()\nreturn redflow_reply')]).toEqual([name, true]);
      expect([name, lua.match(/redis\.call\('XADD'/g)?.length]).toEqual([name, 1]);
    }
  });

  it('assembles every script with each shared function defined once, before the script body', () => {
    for (const name of names) {
      const lua = loadScript(name);
      expect(lua).not.toMatch(/--!include/);
      const functions = [...code(lua).matchAll(/^local function ([A-Za-z_]\w*)/gm)].map((m) => m[1]);
      expect([name, functions.filter((f, i) => functions.indexOf(f) !== i)]).toEqual([name, []]);
    }
  });

  it('every include a script carries is used by it: no script carries a shared function it does not need', () => {
    // The prologue is in every script (it takes the event stream's MAXLEN off ARGV); the others only where used.
    const includes = readdirSync(INCLUDES).filter((f) => f.endsWith('.lua') && f !== PROLOGUE_INCLUDE);
    const used = new Set<string>();
    for (const name of names) {
      const lua = code(loadScript(name));
      for (const file of includes) {
        const text = code(read(join(INCLUDES, file)));
        if (!lua.includes(text.trim())) continue;
        // Some name the include defines appears in the assembled script outside the include.
        const rest = lua.replace(text.trim(), '');
        const defined = definedIn(text);
        expect([name, file, defined.some((fn) => new RegExp(`\\b${fn}\\b`).test(rest))]).toEqual([name, file, true]);
        used.add(file);
      }
    }
    expect(includes.filter((file) => !used.has(file))).toEqual([]);
  });

  it('every script starts with the prologue that takes the event stream MAXLEN off the end of ARGV', () => {
    const prologue = read(join(INCLUDES, PROLOGUE_INCLUDE)).trim();
    for (const name of names) expect([name, loadScript(name).startsWith(prologue)]).toEqual([name, true]);
  });

  it('ending a run is written once, in includes/end-run.lua: no other file sets a finish time', () => {
    const all = [...readdirSync(DIR).filter((f) => f.endsWith('.lua')), ...readdirSync(INCLUDES).map((f) => `includes/${f}`)];
    const setting = all.filter(
      (file) => /'finishedAt',/.test(code(read(join(DIR, file)))) && !/HMGET|HDEL/.test(code(read(join(DIR, file))).match(/.*'finishedAt',.*/)![0]),
    );
    expect(setting).toEqual(['includes/end-run.lua']);
    for (const name of ['finish', 'reap'] as const) expect([name, code(read(join(DIR, scriptFile(name)))).includes('end_run(')]).toEqual([name, true]);
    // Canceling (cancelRun, or an event of a cancelOn) goes through cancel_run, which ends runs with end_run.
    expect(code(read(join(DIR, scriptFile('cancel'))))).toContain('cancel_run(');
    expect(code(read(join(INCLUDES, 'cancel.lua')))).toContain('end_run(');
    expect(code(read(join(INCLUDES, 'fan-out.lua')))).toContain('cancel_run(');
    expect(code(read(join(INCLUDES, 'admit.lua')))).toContain('end_run(');
  });

  it('deleting a run is written once, in includes/delete-run.lua: no other file deletes a run hash', () => {
    const all = [...readdirSync(DIR).filter((f) => f.endsWith('.lua')), ...readdirSync(INCLUDES).map((f) => `includes/${f}`)];
    const deleting = all.filter((file) => /'DEL',\s*(runKey|k_run\()/.test(code(read(join(DIR, file)))));
    expect(deleting).toEqual(['includes/delete-run.lua']);
    for (const name of ['cleanup', 'prune'] as const) expect([name, code(read(join(DIR, scriptFile(name)))).includes('delete_run(')]).toEqual([name, true]);
  });

  it('step records are built, recognized and read in includes/step-record.lua only', () => {
    const all = [...readdirSync(DIR).filter((f) => f.endsWith('.lua')), ...readdirSync(INCLUDES).map((f) => `includes/${f}`)];
    const ways = {
      // '[1,' .. seq, '[3': a record's head, built or compared (kinds 0 to 5)
      head: /'\[\d/,
      // '[' .. kind: a record built from its parts
      built: /'\[' \.\./,
      // '^%[5,%d+,', ',(%d+)%]$': a Lua pattern over a JSON array, that is a step or tries record
      pattern: /'[^'\n]*%[[[\]][^'\n]*'/,
      // cjson.decode: only of the registry JSON sent by sync-registry, of an error's JSON, of a worker's entry and of a cron's definition
      decoded: /cjson\.decode/,
    };
    const decodesOther: Record<string, string> = {
      'sync-registry-3.lua': 'cjson.decode(ARGV[i])',
      'includes/cron.lua': 'pcall(cjson.decode, def)',
      'includes/run-events.lua': 'pcall(cjson.decode, errorJson)',
      'presence-1.lua': 'pcall(cjson.decode, entries[j + 1])',
    };
    const found = all.flatMap((file) => {
      const lua = code(read(join(DIR, file)));
      return Object.entries(ways)
        .filter(([way, pattern]) => pattern.test(way === 'decoded' && decodesOther[file] ? lua.replace(decodesOther[file], '') : lua))
        .map(([way]) => `${file}: ${way}`);
    });
    expect(found.filter((f) => !f.startsWith('includes/step-record.lua:'))).toEqual([]);
    expect(found).toEqual(expect.arrayContaining(['includes/step-record.lua: head', 'includes/step-record.lua: pattern']));
  });

  it('the step-record check above sees each way a record used to be read outside step-record.lua', () => {
    const readers = [
      `local deadline = tonumber(string.match(waiting, '^%[5,%d+,%d+,"[^"]*",(%d+),') or '0')`,
      `local deadline = tonumber(string.match(waiting, ',(%d+)%]$') or '0')`,
      `local ok, attempt, at = string.match(value, '^%[([01]),%d+,(%d+),(%d+),')`,
      `local attempt, due, rest = string.match(value, '^%[%d+,(%d+),%d+,(%d+),(.*)%]$')`,
      `local decoded = select(2, pcall(cjson.decode, value))`,
      `if string.sub(record, 1, 2) == '[5' then`,
    ];
    const ways = [/'\[\d/, /'\[' \.\./, /'[^'\n]*%[[[\]][^'\n]*'/, /cjson\.decode/];
    for (const line of readers) expect([line, ways.some((way) => way.test(line))]).toEqual([line, true]);
  });

  it('a first claim replies with every field the worker reads from a claimed run (CLAIM_FIELDS in claim.lua)', () => {
    const lua = readFileSync(join(DIR, 'includes', 'claim.lua'), 'utf8');
    const list = /local CLAIM_FIELDS = \{([^}]*)\}/.exec(lua)?.[1] ?? '';
    const claimFields = new Set([...list.matchAll(/'([^']+)'/g)].map((m) => m[1]));
    expect(claimFields.size).toBeGreaterThan(10);
    const read = new Set<string>();
    for (const file of ['worker/run-executor.ts', 'store/run-record.ts']) {
      const source = readFileSync(join(__dirname, '..', '..', 'lib', 'core', file), 'utf8');
      // run-record.ts: only what readTraceContext reads from a claimed hash.
      const part = file.endsWith('run-record.ts') ? source.slice(source.indexOf('export function readTraceContext')) : source;
      for (const m of part.matchAll(/\bhash\.(\w+)/g)) read.add(m[1]);
    }
    // Read only for a compensating run (never a first claim), or written during an attempt
    // (`cancelOn`, by register-cancel-on): a first attempt has neither.
    const notOnFirstClaim = new Set(['error', 'compensate', 'cancelOn']);
    expect([...read].filter((f) => !claimFields.has(f) && !notOnFirstClaim.has(f))).toEqual([]);
    expect(read.has('input') && read.has('workflow') && read.has('traceparent')).toBe(true);
  });
});
