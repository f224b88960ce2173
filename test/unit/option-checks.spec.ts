import { nearestName } from '../../lib/core/definition/nearest-name';
import {
  assertKnownKeys,
  assertWorkflowOptionKeys,
  checkDuration,
  checkIdempotencyKey,
  checkInteger,
  checkPositiveCount,
  checkResourceName,
  checkTimestamp,
  checkUserName,
  describeValue,
  MAX_DURATION_MS,
  WORKFLOW_OPTION_KEYS,
} from '../../lib/core/definition/option-checks';
import { ConfigurationError } from '../../lib/core/errors';

/** The error `fn` throws; fails the test if it throws nothing or not a ConfigurationError. */
function thrown(fn: () => unknown): ConfigurationError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).name).toBe('ConfigurationError');
    return error as ConfigurationError;
  }
  throw new Error('expected a ConfigurationError, nothing was thrown');
}

const MiB = 'x'.repeat(1024 * 1024);
const TEN_YEARS = 10 * 365 * 24 * 60 * 60 * 1000;

describe('describeValue', () => {
  it.each([
    [NaN, 'NaN'],
    [Infinity, 'Infinity'],
    [-1, '-1'],
    [1e20, '100000000000000000000'],
    ['5x', '"5x"'],
    ['', '""'],
    [null, 'null'],
    [undefined, 'undefined'],
    [[1], 'an array'],
    [{ a: 1 }, 'an object'],
    [() => 1, 'a function'],
    [10n, '10n'],
    [new Date(Number.NaN), 'an invalid Date'],
    [new Date(0), '1970-01-01T00:00:00.000Z'],
  ])('%p is %s', (value, text) => {
    expect(describeValue(value)).toBe(text);
  });

  it('shortens long strings to their start and length', () => {
    expect(describeValue(MiB)).toBe(`"${'x'.repeat(32)}"… (a string of 1048576 characters)`);
  });
});

describe('nearestName', () => {
  const known = ['maxAttempts', 'maxConcurrency', 'queue', 'retries'];

  it('suggests the closest name within the edit distance', () => {
    expect(nearestName('maxAtempts', known)).toBe('maxAttempts');
    expect(nearestName('qeueu', known)).toBe('queue');
    expect(nearestName('wroker', ['worker', 'defaults'])).toBe('worker');
  });

  it('ignores case', () => {
    expect(nearestName('timeZone', ['id', 'timezone', 'input'])).toBe('timezone');
    expect(nearestName('MAXCONCURRENCY', known)).toBe('maxConcurrency');
  });

  it('accepts a prefix or substring of at least 3 characters', () => {
    expect(nearestName('concurrency', known)).toBe('maxConcurrency');
    expect(nearestName('retriesPolicy', known)).toBe('retries');
    expect(nearestName('ma', ['maxAttemptsAndMore'])).toBeUndefined();
  });

  it('picks the closest of several candidates, and the first on a tie', () => {
    expect(nearestName('perod', ['period', 'periods'])).toBe('period');
    expect(nearestName('ab', ['ax', 'ay'])).toBe('ax');
  });

  it('suggests nothing for a far-off name', () => {
    expect(nearestName('availableAt', ['emitAt', 'idempotencyKey', 'idempotencyTtl'])).toBeUndefined();
    expect(nearestName('zzzzzz', known)).toBeUndefined();
    expect(nearestName('x', [])).toBeUndefined();
  });
});

describe('assertKnownKeys', () => {
  const known = ['emitAt', 'idempotencyKey', 'idempotencyWindow'];

  it('accepts undefined and objects with known keys only', () => {
    expect(() => assertKnownKeys('emitEvent options', undefined, known)).not.toThrow();
    expect(() => assertKnownKeys('emitEvent options', {}, known)).not.toThrow();
    expect(() => assertKnownKeys('emitEvent options', { emitAt: 1, idempotencyKey: 'k' }, known)).not.toThrow();
    expect(() => assertKnownKeys('emitEvent options', Object.create(null), known)).not.toThrow();
  });

  it('names an unknown key with the nearest known one', () => {
    expect(thrown(() => assertKnownKeys('emitEvent options', { emitAt: 1, idempotencyKy: 'k' }, known)).message).toBe(
      'Unknown option "idempotencyKy" in emitEvent options. Did you mean "idempotencyKey"? Known options: emitAt, idempotencyKey, idempotencyWindow.',
    );
  });

  it('names a far-off key without a suggestion', () => {
    expect(thrown(() => assertKnownKeys('emitEvent options', { availableAt: 1 }, known)).message).toBe(
      'Unknown option "availableAt" in emitEvent options. Known options: emitAt, idempotencyKey, idempotencyWindow.',
    );
  });

  it('flags an unknown key even when its value is undefined', () => {
    expect(thrown(() => assertKnownKeys('emitEvent options', { emitAT: undefined }, known)).message).toContain('Did you mean "emitAt"?');
  });

  it('shows a hint instead of a suggestion for keys that belong elsewhere', () => {
    expect(thrown(() => assertKnownKeys('@Cron options', { expression: '* * * * *' }, ['id'], { expression: 'Pass it as the first argument.' })).message).toBe(
      'Unknown option "expression" in @Cron options. Pass it as the first argument. Known options: id.',
    );
  });

  it.each([
    [null, 'null'],
    ['5s', '"5s"'],
    [42, '42'],
    [[], 'an array'],
    [new Date(0), '1970-01-01T00:00:00.000Z'],
    [new Map(), 'an object'],
  ])('rejects the non-object %p', (value, text) => {
    expect(thrown(() => assertKnownKeys('emitEvent options', value, known)).message).toBe(`emitEvent options must be an object, got ${text}.`);
  });
});

describe('assertWorkflowOptionKeys', () => {
  it('accepts every known option', () => {
    const options = {
      queue: 'q',
      retries: { maxAttempts: 2, delay: 10, shouldRetry: () => true },
      debounce: { period: '1s', timeout: '5s', key: 'k' },
      throttle: { limit: 1, period: '1s', key: 'k' },
      rateLimit: { limit: 1, period: '1s' },
      cron: [{ id: 'a', expression: '* * * * *', timezone: 'UTC', input: null }],
      event: [{ name: 'e' }],
    };
    expect(() => assertWorkflowOptionKeys('options of workflow "w"', options)).not.toThrow();
    expect(WORKFLOW_OPTION_KEYS).toContain('mutex');
  });

  it('checks the nested option objects', () => {
    expect(thrown(() => assertWorkflowOptionKeys('options of workflow "w"', { retries: { maxAttempt: 2 } })).message).toBe(
      'Unknown option "maxAttempt" in retries of options of workflow "w". Did you mean "maxAttempts"? Known options: maxAttempts, delay, shouldRetry.',
    );
    expect(thrown(() => assertWorkflowOptionKeys('options of workflow "w"', { debounce: { perod: 1, key: 'k' } })).message).toContain(
      'Unknown option "perod" in debounce of options of workflow "w". Did you mean "period"?',
    );
    expect(thrown(() => assertWorkflowOptionKeys('options of workflow "w"', { throttle: { limits: 1, period: 1 } })).message).toContain(
      'Unknown option "limits" in throttle of options of workflow "w". Did you mean "limit"?',
    );
    expect(thrown(() => assertWorkflowOptionKeys('options of workflow "w"', { rateLimit: { limit: 1, window: 1 } })).message).toContain(
      'Unknown option "window" in rateLimit of options of workflow "w". Known options: limit, period, key.',
    );
    expect(thrown(() => assertWorkflowOptionKeys('options of workflow "w"', { cron: [{ expression: '* * * * *', timeZone: 'UTC' }] })).message).toContain(
      'Unknown option "timeZone" in cron[0] of options of workflow "w". Did you mean "timezone"?',
    );
    expect(thrown(() => assertWorkflowOptionKeys('options of workflow "w"', { retries: 3 })).message).toBe(
      'retries of options of workflow "w" must be an object, got 3.',
    );
    expect(thrown(() => assertWorkflowOptionKeys('options of workflow "w"', { cron: { expression: '* * * * *' } })).message).toBe(
      'cron of options of workflow "w" must be an array, got an object.',
    );
  });
});

describe('checkDuration', () => {
  const range = 'leaseMs must be a duration > 0 and at most 10 years (a number of ms or a string like "5s"), got';

  it('returns milliseconds for numbers and duration strings', () => {
    expect(MAX_DURATION_MS).toBe(TEN_YEARS);
    expect(checkDuration(1, 'leaseMs')).toBe(1);
    expect(checkDuration(1500, 'leaseMs')).toBe(1500);
    expect(checkDuration('500ms', 'leaseMs')).toBe(500);
    expect(checkDuration('5s', 'leaseMs')).toBe(5_000);
    expect(checkDuration(' 1.5m ', 'leaseMs')).toBe(90_000);
    expect(checkDuration('2h', 'leaseMs')).toBe(7_200_000);
    expect(checkDuration('1d', 'leaseMs')).toBe(86_400_000);
    expect(checkDuration(TEN_YEARS, 'leaseMs')).toBe(TEN_YEARS);
    expect(checkDuration('3650d', 'leaseMs')).toBe(TEN_YEARS);
  });

  it('rounds up to whole milliseconds, so a positive duration stays positive', () => {
    expect(checkDuration(0.2, 'leaseMs')).toBe(1);
    expect(checkDuration('0.5ms', 'leaseMs')).toBe(1);
  });

  it.each([
    [NaN, 'NaN'],
    [-1, '-1'],
    [0, '0'],
    [1e20, '100000000000000000000'],
    [Infinity, 'Infinity'],
    [-Infinity, '-Infinity'],
    [TEN_YEARS + 1, String(TEN_YEARS + 1)],
    ['3651d', '"3651d"'],
    ['abc', '"abc"'],
    ['5', '"5"'],
    ['-5s', '"-5s"'],
    ['5 sec', '"5 sec"'],
    ['', '""'],
    [null, 'null'],
    [undefined, 'undefined'],
    [true, 'true'],
    [MiB, `"${'x'.repeat(32)}"… (a string of 1048576 characters)`],
  ])('rejects %p', (value, text) => {
    expect(thrown(() => checkDuration(value, 'leaseMs')).message).toBe(`${range} ${text}.`);
  });

  it('accepts 0 with allowZero, and says so when rejecting', () => {
    expect(checkDuration(0, 'shutdownTimeoutMs', { allowZero: true })).toBe(0);
    expect(checkDuration('0s', 'shutdownTimeoutMs', { allowZero: true })).toBe(0);
    expect(thrown(() => checkDuration(-1, 'shutdownTimeoutMs', { allowZero: true })).message).toBe(
      'shutdownTimeoutMs must be a duration >= 0 and at most 10 years (a number of ms or a string like "5s"), got -1.',
    );
  });
});

describe('checkTimestamp', () => {
  const now = Date.UTC(2030, 0, 1);
  const range = 'emitAt must be a valid Date or epoch milliseconds at most 10 years from now (a past time means now), got';

  it('returns epoch ms of a Date or a number, past times included', () => {
    expect(checkTimestamp(new Date(now + 5), 'emitAt', now)).toBe(now + 5);
    expect(checkTimestamp(now + TEN_YEARS, 'emitAt', now)).toBe(now + TEN_YEARS);
    expect(checkTimestamp(0, 'emitAt', now)).toBe(0);
    expect(checkTimestamp(-1, 'emitAt', now)).toBe(-1);
    expect(checkTimestamp(1.2, 'emitAt', now)).toBe(2);
  });

  it('uses the current time by default', () => {
    expect(checkTimestamp(Date.now() + 1000, 'emitAt')).toBeGreaterThan(0);
    expect(() => checkTimestamp(Date.now() + TEN_YEARS + 60_000, 'emitAt')).toThrow(ConfigurationError);
  });

  it.each([
    [NaN, 'NaN'],
    [Infinity, 'Infinity'],
    [1e20, '100000000000000000000'],
    [new Date(Number.NaN), 'an invalid Date'],
    ['2030-01-01', '"2030-01-01"'],
    ['5s', '"5s"'],
    [null, 'null'],
    [undefined, 'undefined'],
  ])('rejects %p', (value, text) => {
    expect(thrown(() => checkTimestamp(value, 'emitAt', now)).message).toBe(`${range} ${text}.`);
  });

  it('rejects a time more than ten years ahead', () => {
    expect(thrown(() => checkTimestamp(now + TEN_YEARS + 1, 'emitAt', now)).message).toBe(`${range} ${now + TEN_YEARS + 1}.`);
    expect(thrown(() => checkTimestamp(new Date(now + TEN_YEARS + 1), 'emitAt', now)).message).toBe(`${range} ${new Date(now + TEN_YEARS + 1).toISOString()}.`);
  });
});

describe('checkIdempotencyKey', () => {
  it('accepts 1 to 512 characters', () => {
    expect(checkIdempotencyKey('k', 'idempotencyKey')).toBe('k');
    expect(checkIdempotencyKey('k'.repeat(512), 'idempotencyKey')).toBe('k'.repeat(512));
    expect(checkIdempotencyKey('order 1\n', 'idempotencyKey')).toBe('order 1\n');
  });

  it('rejects an empty key, which would be ignored', () => {
    expect(thrown(() => checkIdempotencyKey('', 'idempotencyKey')).message).toBe(
      'idempotencyKey is an empty string: an empty idempotency key would be ignored and every call would start a new run; pass a key of 1 to 512 characters or omit the option.',
    );
  });

  it.each([
    ['k'.repeat(513), `"${'k'.repeat(32)}"… (a string of 513 characters)`],
    [MiB, `"${'x'.repeat(32)}"… (a string of 1048576 characters)`],
    [42, '42'],
    [null, 'null'],
    [undefined, 'undefined'],
  ])('rejects %p', (value, text) => {
    expect(thrown(() => checkIdempotencyKey(value, 'idempotencyKey')).message).toBe(
      `idempotencyKey must be a string of 1 to 512 characters, got ${text}; hash a longer key (e.g. SHA-256) first.`,
    );
  });
});

describe('checkResourceName', () => {
  it('accepts printable names of up to 128 characters', () => {
    for (const name of ['default', 'redflow', 'test:nest:ab12', 'emails-eu.v2/high', 'q'.repeat(128), 'é']) {
      expect(checkResourceName(name, 'prefix')).toBe(name);
    }
  });

  it.each([
    ['', '""'],
    ['q'.repeat(129), `"${'q'.repeat(32)}"… (a string of 129 characters)`],
    [MiB, `"${'x'.repeat(32)}"… (a string of 1048576 characters)`],
    [42, '42'],
    [undefined, 'undefined'],
  ])('rejects the length or type of %p', (value, text) => {
    expect(thrown(() => checkResourceName(value, 'prefix')).message).toBe(`prefix must be a name of 1 to 128 characters, got ${text}.`);
  });

  it.each([
    ['my queue', '"my queue"'],
    ['my\tqueue', '"my\\tqueue"'],
    ['my\nqueue', '"my\\nqueue"'],
    [' queue', '" queue"'],
  ])('rejects whitespace in %p', (value, text) => {
    expect(thrown(() => checkResourceName(value, 'queue')).message).toBe(
      `queue must not contain whitespace, got ${text}: it is part of every Redis key; use "-", "_", "." or ":" instead.`,
    );
  });

  it('rejects control characters', () => {
    expect(thrown(() => checkResourceName('a\u0000b', 'queue')).message).toBe(
      'queue must be printable, got "a\\u0000b" with a control character: it is part of every Redis key.',
    );
    expect(() => checkResourceName('a\u007fb', 'queue')).toThrow(ConfigurationError);
  });

  it.each(['{redflow}', 'a{b', 'b}'])('rejects the hash-tag braces in %p', (value) => {
    expect(thrown(() => checkResourceName(value, 'prefix')).message).toBe(
      `prefix must not contain "{" or "}", got ${JSON.stringify(value)}: braces would change the Redis Cluster hash tag that keeps its keys in one slot.`,
    );
  });

  it('rejects the key pattern "*"', () => {
    expect(thrown(() => checkResourceName('app*', 'prefix')).message).toBe(
      'prefix must not contain "*", got "app*": "*" is a Redis key pattern, so key scans would match other names.',
    );
  });
});

describe('checkInteger and checkPositiveCount', () => {
  it('accepts integers in range', () => {
    expect(checkInteger(0, 'maxRecoveries', 0, 1000)).toBe(0);
    expect(checkInteger(1000, 'maxRecoveries', 0, 1000)).toBe(1000);
    expect(checkPositiveCount(1, 'concurrency')).toBe(1);
    expect(checkPositiveCount(Number.MAX_SAFE_INTEGER, 'concurrency')).toBe(Number.MAX_SAFE_INTEGER);
  });

  it.each([
    [NaN, 'NaN'],
    [-1, '-1'],
    [1001, '1001'],
    [1.5, '1.5'],
    [1e20, '100000000000000000000'],
    [Infinity, 'Infinity'],
    ['5', '"5"'],
  ])('checkInteger rejects %p', (value, text) => {
    expect(thrown(() => checkInteger(value, 'maxRecoveries', 0, 1000)).message).toBe(`maxRecoveries must be an integer from 0 to 1000, got ${text}.`);
  });

  it.each([
    [0, '0'],
    [-1, '-1'],
    [NaN, 'NaN'],
    [Infinity, 'Infinity'],
    [1e20, '100000000000000000000'],
    [2.5, '2.5'],
  ])('checkPositiveCount rejects %p', (value, text) => {
    expect(thrown(() => checkPositiveCount(value, 'concurrency')).message).toBe(`concurrency must be an integer >= 1, got ${text}.`);
  });

  it('checkPositiveCount honours a maximum', () => {
    expect(thrown(() => checkPositiveCount(11, 'limit', 10)).message).toBe('limit must be an integer from 1 to 10, got 11.');
  });
});

describe('checkUserName', () => {
  it('accepts non-empty names with spaces and any printable character', () => {
    for (const name of ['charge', 'charge card', 'order.created', 'user:{42}', '*', 'é✓', 'n'.repeat(512)]) {
      expect(checkUserName(name, 'step name')).toBe(name);
    }
  });

  it.each([
    ['', '""'],
    ['n'.repeat(513), `"${'n'.repeat(32)}"… (a string of 513 characters)`],
    [MiB, `"${'x'.repeat(32)}"… (a string of 1048576 characters)`],
    [42, '42'],
    [undefined, 'undefined'],
    [null, 'null'],
  ])('rejects %p', (value, text) => {
    expect(thrown(() => checkUserName(value, 'step name')).message).toBe(`step name must be a non-empty string of at most 512 characters, got ${text}.`);
  });

  it('honours a custom maximum', () => {
    expect(checkUserName('a'.repeat(128), 'queue', { max: 128 })).toBe('a'.repeat(128));
    expect(thrown(() => checkUserName('a'.repeat(129), 'queue', { max: 128 })).message).toContain('at most 128 characters, got');
  });

  it.each([
    ['a\nb', '"a\\nb"'],
    ['a\tb', '"a\\tb"'],
    ['a\u0000b', '"a\\u0000b"'],
    ['a\u0085b', '"a\u0085b"'],
  ])('rejects the control characters in %p', (value, text) => {
    expect(thrown(() => checkUserName(value, 'step name')).message).toBe(
      `step name must not contain control characters such as a newline or tab, got ${text}.`,
    );
  });

  it('rejects forbidden characters, with the reason', () => {
    expect(thrown(() => checkUserName('charge#2', 'step name', { forbid: '#|', reason: '"#" is reserved' })).message).toBe(
      'step name must not contain "#" or "|", got "charge#2": "#" is reserved.',
    );
    expect(thrown(() => checkUserName('a|b', 'step name', { forbid: '#|' })).message).toBe('step name must not contain "#" or "|", got "a|b".');
    expect(checkUserName('charge-2', 'step name', { forbid: '#|' })).toBe('charge-2');
  });
});
