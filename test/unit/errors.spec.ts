import { nextAttemptAt } from '../../lib/core/definition/retry';
import type { RunInfo } from '../../lib/core/definition/workflow';
import * as errors from '../../lib/core/errors';
import {
  CanceledError,
  ConfigurationError,
  CorruptRunDataError,
  errorClasses,
  errorClassNamed,
  IdempotencyConflictError,
  InputValidationError,
  InvalidCronError,
  isRetryable,
  isWriteRefusedReply,
  NonDeterminismError,
  NonRetriableError,
  OutputSerializationError,
  PayloadTooLargeError,
  RateLimitExceededError,
  RedflowError,
  RedisScriptError,
  RedisUnavailableError,
  RedisWriteRefusedError,
  RetryAfterError,
  RunCrashedError,
  RunNotEndedError,
  RunNotFoundError,
  RunNotResumableError,
  RunStalledError,
  RunTerminatedError,
  RunTimeoutError,
  SignalBufferFullError,
  StepHeartbeatTimeoutError,
  TimeoutError,
  UnknownWorkflowError,
  WorkflowRunError,
} from '../../lib/core/errors';

const PERMANENT = [
  new NonRetriableError('no'),
  new InputValidationError('wf', [{ message: 'bad' }]),
  new OutputSerializationError('The output of step "a"', '$', 'NaN (JSON would store null)'),
  new PayloadTooLargeError('The input of workflow "wf"', 10, 5),
  new CorruptRunDataError('r1', 'no workflow field'),
  new UnknownWorkflowError('wf'),
  new CanceledError('r1', 'user'),
  new ConfigurationError('bad option'),
  new InvalidCronError('wf', '* *', 'Europe/Paris', 'too few fields'),
  new RateLimitExceededError('too many'),
  new IdempotencyConflictError('wf', 'k', 'r0'),
  new RunNotFoundError('r1'),
  new SignalBufferFullError('r1', 's', 1000),
  new RunNotResumableError('r1', 'running'),
  new RunTerminatedError('r1', 'stuck'),
  new RunCrashedError('r1', 3, 'worker-a'),
  new RunNotEndedError('r1', 'running'),
  new RunTimeoutError('r1', 'wf', 500),
  new NonDeterminismError('r1', 2, 'charge', 'charge-card'),
];

const RETRYABLE = [
  new TimeoutError('Step "a"', 100),
  new StepHeartbeatTimeoutError('a', 100),
  new RetryAfterError('later', '30s'),
  new RunStalledError('stalled'),
  new WorkflowRunError('boom', 'TypeError'),
  new RedisUnavailableError('127.0.0.1:6379', 'connect ECONNREFUSED'),
  new RedisWriteRefusedError('claim', 'OOM command not allowed'),
  new RedisScriptError('claim', 'ERR boom'),
  new RedflowError('plain'),
];

const run: RunInfo = { id: 'r1', workflow: 'wf', queue: 'default', attempt: 1, maxAttempts: 5 };
const NOW = 1_000_000;

describe('the error table', () => {
  it('lists every error class lib/core/errors exports, under its own name', () => {
    const exported = Object.values(errors).filter(
      (value): value is typeof RedflowError => typeof value === 'function' && (value === RedflowError || value.prototype instanceof RedflowError),
    );
    const listed = errorClasses().map((info) => info.cls);
    expect(new Set(listed)).toEqual(new Set(exported));
    expect(listed).toHaveLength(exported.length);
    for (const cls of exported) expect(errorClassNamed(cls.name)?.cls).toBe(cls);
  });

  it('has no entry for a name that is not one of ours', () => {
    expect(errorClassNamed('TypeError')).toBeUndefined();
    expect(errorClassNamed('')).toBeUndefined();
  });

  it('marks exactly the permanent classes as not retryable', () => {
    const permanent = errorClasses()
      .filter((info) => !info.retryable)
      .map((info) => info.cls.name)
      .sort();
    expect(permanent).toEqual(PERMANENT.map((e) => e.constructor.name).sort());
  });
});

describe('isRetryable', () => {
  it.each(PERMANENT.map((e) => [e.name, e]))('%s is permanent', (_name, error) => {
    expect(isRetryable(error)).toBe(false);
  });

  it.each(RETRYABLE.map((e) => [e.name, e]))('%s is retryable', (_name, error) => {
    expect(isRetryable(error)).toBe(true);
  });

  it('retries errors that are not ours, and values that are not errors', () => {
    expect(isRetryable(new Error('x'))).toBe(true);
    expect(isRetryable(new TypeError('x'))).toBe(true);
    expect(isRetryable('a string')).toBe(true);
    expect(isRetryable(undefined)).toBe(true);
    expect(isRetryable(null)).toBe(true);
    expect(isRetryable({ name: 'NonRetriableError' })).toBe(true);
  });

  it('follows subclasses to the nearest listed class', () => {
    class PaymentDeclined extends NonRetriableError {}
    class BadSetting extends ConfigurationError {}
    class Flaky extends TimeoutError {}
    expect(isRetryable(new PaymentDeclined('declined'))).toBe(false);
    expect(isRetryable(new BadSetting('bad'))).toBe(false);
    expect(isRetryable(new Flaky('Step "a"', 5))).toBe(true);
  });
});

describe('nextAttemptAt', () => {
  it('never retries a ConfigurationError, nor an InvalidCronError', () => {
    expect(nextAttemptAt(undefined, run, new ConfigurationError('bad option'), NOW)).toBeNull();
    expect(nextAttemptAt({ delay: 10 }, run, new InvalidCronError('wf', 'x', undefined, 'bad'), NOW)).toBeNull();
  });

  it.each(PERMANENT.map((e) => [e.name, e]))('never retries %s', (_name, error) => {
    expect(nextAttemptAt({ delay: 10, shouldRetry: () => true }, run, error, NOW)).toBeNull();
  });

  it('retries a retryable error after the policy delay', () => {
    expect(nextAttemptAt({ delay: '2s' }, run, new TimeoutError('Step "a"', 5), NOW)).toBe(NOW + 2000);
    expect(nextAttemptAt({ delay: 10 }, run, new Error('x'), NOW)).toBe(NOW + 10);
  });

  it('retries a RetryAfterError after its own delay', () => {
    expect(nextAttemptAt({ delay: 10 }, run, new RetryAfterError('later', '30s'), NOW)).toBe(NOW + 30_000);
    expect(nextAttemptAt(undefined, run, new RetryAfterError('later', 250), NOW)).toBe(NOW + 250);
    expect(nextAttemptAt(undefined, run, new RetryAfterError('later', new Date(NOW + 5)), NOW)).toBe(NOW + 5);
  });

  it('stops after the last attempt', () => {
    expect(nextAttemptAt({ delay: 10 }, { ...run, attempt: 5 }, new Error('x'), NOW)).toBeNull();
  });
});

describe('RetryAfterError', () => {
  it.each([
    ['-1', -1, 'delay -1 is not valid'],
    ['NaN', NaN, 'delay NaN is not valid'],
    ['Infinity', Infinity, 'delay Infinity is not valid'],
    ["'abc'", 'abc', 'delay "abc" is not valid'],
    ['an invalid Date', new Date('x'), 'delay an invalid Date is not valid'],
    ['null', null, 'delay null is not valid'],
    ['an object', { ms: 5 }, 'delay an object is not valid'],
    ['true', true, 'delay a boolean is not valid'],
  ])('throws a TypeError for %s', (_label, delay, text) => {
    let thrown: unknown;
    try {
      new RetryAfterError('later', delay as number);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TypeError);
    expect(thrown).not.toBeInstanceOf(RedflowError);
    expect((thrown as Error).message).toContain(`RetryAfterError ${text}`);
    expect((thrown as Error).message).toContain('Use milliseconds (a finite number from 0 to 10 years), a duration string such as');
    expect((thrown as Error).message).toContain('or a valid Date at most 10 years ahead.');
    expect(isRetryable(thrown)).toBe(true);
  });

  it.each([
    ['0', 0],
    ['1500', 1500],
    ['1.5', 1.5],
    ["'30s'", '30s'],
    ["'500ms'", '500ms'],
    ["'2h'", '2h'],
    ['a valid Date', new Date(0)],
  ])('accepts %s', (_label, delay) => {
    const error = new RetryAfterError('rate limited', delay);
    expect(error.delay).toBe(delay);
    expect(error.message).toBe('rate limited');
    expect(error.name).toBe('RetryAfterError');
  });
});

describe('Redis error classes', () => {
  it('RedisUnavailableError names the address and says what to do', () => {
    const error = new RedisUnavailableError('10.0.0.5:6379', 'connect ECONNREFUSED');
    expect(error).toBeInstanceOf(RedflowError);
    expect(error.name).toBe('RedisUnavailableError');
    expect(error.address).toBe('10.0.0.5:6379');
    expect(error.detail).toBe('connect ECONNREFUSED');
    expect(error.message).toBe(
      'Redis at 10.0.0.5:6379 is unavailable (connect ECONNREFUSED). Check that Redis is running and reachable from this host (REDIS_URL or the connection option). A call that timed out may still be applied when Redis comes back: retry it with an idempotency key.',
    );
  });

  it('RedisWriteRefusedError names the script and the reply', () => {
    const error = new RedisWriteRefusedError('claim', "OOM command not allowed when used memory > 'maxmemory'.");
    expect(error.name).toBe('RedisWriteRefusedError');
    expect(error.script).toBe('claim');
    expect(error.reply).toBe("OOM command not allowed when used memory > 'maxmemory'.");
    expect(error.message).toBe(
      `Redis refused a write in script "claim": OOM command not allowed when used memory > 'maxmemory'. Free memory or raise maxmemory (OOM), connect to the primary instead of a replica (READONLY), or fix the disk Redis persists to (MISCONF). Workers pause and resume by themselves once writes succeed.`,
    );
  });

  it('RedisScriptError keeps only the first line of the reply', () => {
    const error = new RedisScriptError(
      'finish',
      'ERR user_script:3: attempt to compare nil with number\nlocal attempt = tonumber(ARGV[1])\nif attempt > 3 then',
    );
    expect(error.name).toBe('RedisScriptError');
    expect(error.script).toBe('finish');
    expect(error.reply).toBe('ERR user_script:3: attempt to compare nil with number');
    expect(error.message).toBe('Redis script "finish" failed: ERR user_script:3: attempt to compare nil with number.');
    expect(error.message).not.toContain('tonumber');
  });

  it('RedisScriptError cuts a long reply to 300 characters', () => {
    const error = new RedisScriptError('finish', `ERR ${'x'.repeat(1000)}`);
    expect(error.reply).toHaveLength(300);
    expect(error.reply.startsWith('ERR xxx')).toBe(true);
    expect(error.reply.endsWith('…')).toBe(true);
    expect(error.message).toBe(`Redis script "finish" failed: ${error.reply}.`);
  });

  it('RedisWriteRefusedError trims its reply the same way', () => {
    const error = new RedisWriteRefusedError('claim', `READONLY You can't write against a read only replica.\nscript body`);
    expect(error.reply).toBe("READONLY You can't write against a read only replica.");
    expect(error.message).not.toContain('script body');
  });
});

describe('isWriteRefusedReply', () => {
  it.each([
    "OOM command not allowed when used memory > 'maxmemory'.",
    "READONLY You can't write against a read only replica.",
    'MISCONF Redis is configured to save RDB snapshots, but it is currently not able to persist on disk.',
    "ERR Error running script (call to f_abc): @user_script:12: @user_script: 12: -OOM command not allowed when used memory > 'maxmemory'.",
    "ERR Error running script (call to f_abc): @user_script:7: @user_script: 7: -READONLY You can't write against a read only replica.",
    "OOM command not allowed when used memory > 'maxmemory'. script: 1b2c, on @user_script:12.",
  ])('is true for %s', (reply) => {
    expect(isWriteRefusedReply(reply)).toBe(true);
  });

  it.each([
    'WRONGTYPE Operation against a key holding the wrong kind of value',
    'ERR user_script:1: Script attempted to access nonexistent global variable',
    'NOSCRIPT No matching script. Please use EVAL.',
    'ERR bad key ROOM 12',
    '',
  ])('is false for %s', (reply) => {
    expect(isWriteRefusedReply(reply)).toBe(false);
  });
});

describe('constructor arguments are fields', () => {
  it('keeps what the message was built from', () => {
    expect(new CorruptRunDataError('r1', 'no workflow field')).toMatchObject({ runId: 'r1', detail: 'no workflow field' });
    expect(new TimeoutError('Step "a"', 100)).toMatchObject({ what: 'Step "a"', timeoutMs: 100 });
    expect(new InvalidCronError('wf', '* *', 'UTC', 'too few fields')).toMatchObject({
      workflow: 'wf',
      expression: '* *',
      timezone: 'UTC',
      reason: 'too few fields',
    });
    expect(new UnknownWorkflowError('wf', 'in Redis')).toMatchObject({ workflow: 'wf', where: 'in Redis' });
    expect(new OutputSerializationError('The output of step "a"', '$.x', 'NaN (JSON would store null)')).toMatchObject({
      what: 'The output of step "a"',
      path: '$.x',
      reason: 'NaN (JSON would store null)',
    });
  });
});
