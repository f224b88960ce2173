import {
  CanceledError,
  ClientClosedError,
  ConfigurationError,
  CorruptRunDataError,
  errorClasses,
  IdempotencyConflictError,
  InputValidationError,
  InvalidCronError,
  NonDeterminismError,
  NonRetriableError,
  OutputSerializationError,
  PayloadCodecError,
  PayloadKeyError,
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
import { decodeJson, deserializeError, encodeJson, serializeError } from '../../lib/core/store/serialization';

/** One instance of every class in the table, with the fields it must keep through Redis. */
const SAMPLES: Array<[RedflowError, Record<string, unknown>]> = [
  [new RedflowError('plain'), {}],
  [new NonRetriableError('card declined'), {}],
  [
    new InputValidationError('signup', [{ message: 'must be an email', path: ['user', 'email'] }]),
    { workflow: 'signup', issues: [{ message: 'must be an email', path: ['user', 'email'] }] },
  ],
  [
    new OutputSerializationError('The output of step "charge"', '$.items[2]', 'NaN (JSON would store null)'),
    { what: 'The output of step "charge"', path: '$.items[2]', reason: 'NaN (JSON would store null)' },
  ],
  [new PayloadTooLargeError('The input of workflow "big"', 2048, 1024), { what: 'The input of workflow "big"', bytes: 2048, limit: 1024 }],
  [new PayloadCodecError('The input of run "r1"', 'its decode threw: boom.'), { what: 'The input of run "r1"', reason: 'its decode threw: boom.' }],
  [new PayloadKeyError('k1', 'unknown', ['k2']), { keyId: 'k1', reason: 'unknown', knownKeys: ['k2'] }],
  [new CorruptRunDataError('run-1', 'field "input" is not valid JSON'), { runId: 'run-1', detail: 'field "input" is not valid JSON' }],
  [new UnknownWorkflowError('ghost', 'in Redis'), { workflow: 'ghost', where: 'in Redis' }],
  [new CanceledError('run-2', 'user asked'), { runId: 'run-2', reason: 'user asked' }],
  [new ConfigurationError('concurrency must be >= 1'), {}],
  [
    new InvalidCronError('nightly', '61 * * * *', 'Europe/Paris', 'minute out of range'),
    { workflow: 'nightly', expression: '61 * * * *', timezone: 'Europe/Paris', reason: 'minute out of range' },
  ],
  [new RateLimitExceededError('too many starts'), {}],
  [new IdempotencyConflictError('pay', 'order-7', 'run-0'), { workflow: 'pay', idempotencyKey: 'order-7', existingRunId: 'run-0' }],
  [new RunNotFoundError('run-9'), { runId: 'run-9' }],
  [new SignalBufferFullError('run-9', 'approval', 1000), { runId: 'run-9', signal: 'approval', limit: 1000 }],
  [new RunNotResumableError('run-9', 'running'), { runId: 'run-9', status: 'running' }],
  [new NonDeterminismError('run-9', 2, 'charge', 'charge-card'), { runId: 'run-9', position: 2, expected: 'charge', found: 'charge-card' }],
  [new TimeoutError('Step "fetch"', 1500), { what: 'Step "fetch"', timeoutMs: 1500 }],
  [
    new RunTimeoutError('run-3', 'checkout', 7_200_000),
    { runId: 'run-3', workflow: 'checkout', what: 'Run "run-3" of workflow "checkout"', timeoutMs: 7_200_000 },
  ],
  [new StepHeartbeatTimeoutError('import-rows', 30_000), { step: 'import-rows', what: 'Step "import-rows"', timeoutMs: 30_000 }],
  [new RetryAfterError('rate limited', '30s'), { delay: '30s' }],
  [new RunStalledError('worker died 3 times'), {}],
  [new RunCrashedError('run-9', 3, 'billing:host-1:4242:a1b2c3'), { runId: 'run-9', crashes: 3, workerId: 'billing:host-1:4242:a1b2c3' }],
  [new RunTerminatedError('run-9', 'stuck'), { runId: 'run-9', reason: 'stuck' }],
  [new RunNotEndedError('run-9', 'running'), { runId: 'run-9', status: 'running' }],
  [new WorkflowRunError('boom', 'TypeError'), { originalName: 'TypeError' }],
  [new RedisUnavailableError('10.0.0.5:6379', 'connect ECONNREFUSED'), { address: '10.0.0.5:6379', detail: 'connect ECONNREFUSED' }],
  [
    new RedisWriteRefusedError('claim', "OOM command not allowed when used memory > 'maxmemory'."),
    { script: 'claim', reply: "OOM command not allowed when used memory > 'maxmemory'." },
  ],
  [new RedisScriptError('finish', 'ERR bad state'), { script: 'finish', reply: 'ERR bad state' }],
  [new ClientClosedError('Waiting for the result of run "r1"'), { what: 'Waiting for the result of run "r1"' }],
];

function roundTrip(error: unknown): Error {
  return deserializeError(serializeError(error));
}

function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('serializeError / deserializeError', () => {
  it('has a sample for every class in the table', () => {
    expect(new Set(SAMPLES.map(([e]) => e.constructor))).toEqual(new Set(errorClasses().map((info) => info.cls)));
  });

  it.each(SAMPLES.map(([error, fields]) => [error.name, error, fields] as const))('%s keeps its class and fields', (name, error, fields) => {
    const back = roundTrip(error);
    expect(back).toBeInstanceOf(error.constructor as typeof RedflowError);
    expect(back).toBeInstanceOf(RedflowError);
    expect(back).toBeInstanceOf(Error);
    expect(back.name).toBe(name);
    expect(back.message).toBe(error.message);
    expect(back.stack).toBe(error.stack);
    for (const [key, value] of Object.entries(fields)) expect((back as unknown as Record<string, unknown>)[key]).toEqual(value);
    // Nothing more and nothing less than the instance had.
    const dataKeys = (e: object) =>
      Object.keys(e)
        .filter((k) => k !== 'name' && (e as Record<string, unknown>)[k] !== undefined)
        .sort();
    expect(dataKeys(back)).toEqual(dataKeys(error));
  });

  it('keeps the fields through a second round trip', () => {
    const back = roundTrip(roundTrip(new IdempotencyConflictError('pay', 'order-7', 'run-0')));
    expect(back).toBeInstanceOf(IdempotencyConflictError);
    expect(back).toMatchObject({ workflow: 'pay', idempotencyKey: 'order-7', existingRunId: 'run-0' });
  });

  it('reads a RetryAfterError delay that was a Date back as a Date', () => {
    const at = new Date('2030-01-02T03:04:05.678Z');
    const back = roundTrip(new RetryAfterError('later', at)) as RetryAfterError;
    expect(back).toBeInstanceOf(RetryAfterError);
    expect(back.delay).toBeInstanceOf(Date);
    expect((back.delay as Date).toISOString()).toBe('2030-01-02T03:04:05.678Z');
    expect(JSON.parse(serializeError(new RetryAfterError('later', at))).fields).toEqual({ delay: '2030-01-02T03:04:05.678Z' });
  });

  it('leaves out an optional field that was not given', () => {
    const back = roundTrip(new CanceledError('run-2')) as CanceledError;
    expect(back).toBeInstanceOf(CanceledError);
    expect(back.runId).toBe('run-2');
    expect(back.reason).toBeUndefined();
  });

  it('stores fields under "fields" and issues at the top level', () => {
    const stored = JSON.parse(serializeError(new InputValidationError('signup', [{ message: 'required', path: ['name'] }])));
    expect(stored).toEqual({
      name: 'InputValidationError',
      message: 'Input for workflow "signup" is invalid: name: required. Fix the input to match the workflow\'s schema.',
      stack: expect.any(String),
      issues: [{ message: 'required', path: ['name'] }],
      fields: { workflow: 'signup' },
    });
  });

  it('turns an error that is not ours into a WorkflowRunError with its original name', () => {
    const back = roundTrip(new TypeError('x is not a function'));
    expect(back).toBeInstanceOf(WorkflowRunError);
    expect(back.name).toBe('TypeError');
    expect(back.message).toBe('x is not a function');
    expect((back as WorkflowRunError).originalName).toBe('TypeError');
  });

  it('does not store the fields of an error that is not ours', () => {
    const error = Object.assign(new Error('request failed'), { config: { headers: { authorization: 'secret' } } });
    const stored = JSON.parse(serializeError(error));
    expect(stored.fields).toBeUndefined();
    expect(JSON.stringify(stored)).not.toContain('secret');
  });

  it('keeps a subclass of ours that is not in the table as a WorkflowRunError', () => {
    class PaymentDeclined extends NonRetriableError {
      constructor(readonly code: string) {
        super(`declined: ${code}`);
      }
    }
    const back = roundTrip(new PaymentDeclined('51'));
    expect(back).toBeInstanceOf(WorkflowRunError);
    expect(back.name).toBe('PaymentDeclined');
    expect((back as WorkflowRunError).originalName).toBe('PaymentDeclined');
    expect((back as unknown as { code?: string }).code).toBeUndefined();
  });

  it('stores values that are not errors', () => {
    expect(roundTrip('plain string').message).toBe('plain string');
    expect(roundTrip({ code: 42 }).message).toBe('{"code":42}');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(roundTrip(cyclic).message).toBe('[object Object]');
  });

  it('never throws when a field cannot be stored', () => {
    const issues: Array<Record<string, unknown>> = [{ message: 'bad' }];
    issues[0].self = issues;
    const text = serializeError(new InputValidationError('wf', issues as never));
    const back = deserializeError(text);
    expect(back).toBeInstanceOf(InputValidationError);
    expect(back.message).toContain('Input for workflow "wf" is invalid: bad.');
  });

  describe('errors stored before fields were', () => {
    it('reads {name, message, stack, issues}', () => {
      const back = deserializeError(
        JSON.stringify({
          name: 'InputValidationError',
          message: 'Input for workflow "a" is invalid: x.',
          stack: 'InputValidationError: ...\n    at old',
          issues: [{ message: 'x' }],
        }),
      );
      expect(back).toBeInstanceOf(InputValidationError);
      expect(back.message).toBe('Input for workflow "a" is invalid: x.');
      expect(back.stack).toBe('InputValidationError: ...\n    at old');
      expect((back as InputValidationError).issues).toEqual([{ message: 'x' }]);
      expect((back as InputValidationError).workflow).toBeUndefined();
    });

    it('reads a known class without fields', () => {
      const back = deserializeError(JSON.stringify({ name: 'TimeoutError', message: 'Step "a" timed out after 5 ms.' }));
      expect(back).toBeInstanceOf(TimeoutError);
      expect(back.name).toBe('TimeoutError');
      expect(back.message).toBe('Step "a" timed out after 5 ms.');
      expect((back as TimeoutError).timeoutMs).toBeUndefined();
    });

    it('reads an unknown name as a WorkflowRunError', () => {
      const back = deserializeError(JSON.stringify({ name: 'RangeError', message: 'too far', stack: 'RangeError: too far' }));
      expect(back).toBeInstanceOf(WorkflowRunError);
      expect(back).toMatchObject({ name: 'RangeError', message: 'too far', stack: 'RangeError: too far', originalName: 'RangeError' });
    });

    it('reads a WorkflowRunError without originalName', () => {
      const back = deserializeError(JSON.stringify({ name: 'WorkflowRunError', message: 'boom' }));
      expect(back).toBeInstanceOf(WorkflowRunError);
      expect((back as WorkflowRunError).originalName).toBe('WorkflowRunError');
    });

    it('reads unreadable text as a WorkflowRunError', () => {
      for (const text of [undefined, '', '{not json', 'null', '42']) {
        const back = deserializeError(text);
        expect(back).toBeInstanceOf(WorkflowRunError);
        expect(back.message).toBe('The run failed, but its stored error could not be read.');
      }
    });
  });
});

describe('encodeJson', () => {
  const WHAT = 'The output of step "charge"';
  const LIMIT = 1024 * 1024;

  function rejection(value: unknown): OutputSerializationError {
    const error = thrownBy(() => encodeJson(value, WHAT, LIMIT));
    expect(error).toBeInstanceOf(OutputSerializationError);
    return error as OutputSerializationError;
  }

  const cycle: Record<string, unknown> = { name: 'root' };
  cycle.me = cycle;
  const holey: number[] = [];
  holey[0] = 1;
  holey[2] = 3;
  const nested: { order: { lines: Array<Record<string, unknown>> } } = { order: { lines: [{ sku: 'a' }, { sku: 'b' }] } };
  nested.order.lines[1].parent = nested.order;

  it.each([
    ['nested NaN', { items: [1, 2, NaN] }, '$.items[2]', 'NaN (JSON would store null)'],
    ['Infinity', { total: Infinity }, '$.total', 'Infinity (JSON would store null)'],
    ['-Infinity', { a: { b: -Infinity } }, '$.a.b', '-Infinity (JSON would store null)'],
    ['a BigInt', { total: BigInt(1) }, '$.total', 'a BigInt (JSON cannot store BigInts; store it as a string)'],
    ['a function value', { cb: () => 1 }, '$.cb', 'a function (JSON cannot store functions)'],
    ['a symbol value', { tag: Symbol('x') }, '$.tag', 'a symbol (JSON cannot store symbols)'],
    ['a Map', { when: new Map() }, '$.when', 'a Map (JSON would store {}; convert it with Object.fromEntries(map))'],
    ['a Set', { ids: new Set([1]) }, '$.ids', 'a Set (JSON would store {}; convert it with Array.from(set))'],
    ['a WeakMap', { w: new WeakMap() }, '$.w', 'a WeakMap (JSON would store {})'],
    ['a WeakSet', { w: new WeakSet() }, '$.w', 'a WeakSet (JSON would store {})'],
    ['a Uint8Array', { bytes: new Uint8Array([1, 2]) }, '$.bytes', 'a Uint8Array (JSON cannot store binary data; store the bytes as a base64 string)'],
    ['a Buffer', { file: { body: Buffer.from('hi') } }, '$.file.body', 'a Buffer (JSON cannot store binary data; store the bytes as a base64 string)'],
    ['an ArrayBuffer', [new ArrayBuffer(4)], '$[0]', 'an ArrayBuffer (JSON cannot store binary data; store the bytes as a base64 string)'],
    ['undefined in an array', { list: [1, undefined, 3] }, '$.list[1]', 'undefined (JSON would store null)'],
    ['a hole in an array', { list: holey }, '$.list[1]', 'undefined (JSON would store null)'],
    ['an invalid Date', { at: new Date('x') }, '$.at', 'an invalid Date (JSON would store null)'],
    ['a cycle', cycle, '$.me', 'a circular reference to $ (JSON cannot store cycles)'],
    ['a nested cycle', nested, '$.order.lines[1].parent', 'a circular reference to $.order (JSON cannot store cycles)'],
    ['a key that is not an identifier', { 'line items': [{ 'unit-price': NaN }] }, '$["line items"][0]["unit-price"]', 'NaN (JSON would store null)'],
    ['a function at the root', () => 1, '$', 'a function (JSON cannot store functions)'],
    ['NaN at the root', NaN, '$', 'NaN (JSON would store null)'],
    ['a RegExp', { re: /x/ }, '$.re', 'a RegExp (JSON would store {}; store its source as a string)'],
    ['an Error', { err: new Error('x') }, '$.err', 'an Error (JSON would drop its message; store the message as a string)'],
  ])('rejects %s, naming its path', (_label, value, path, reason) => {
    const error = rejection(value);
    expect(error.what).toBe(WHAT);
    expect(error.path).toBe(path);
    expect(error.reason).toBe(reason);
    expect(error.message).toBe(
      `The output of step "charge" cannot be stored as JSON: ${path} is ${reason}. Use plain JSON data: objects, arrays, strings, numbers, booleans, null or Dates (stored as ISO strings).`,
    );
  });

  it('names the first problem in JSON order', () => {
    expect(rejection({ a: 1, b: [0, { c: NaN }], d: new Map() }).path).toBe('$.b[1].c');
  });

  it('checks what a toJSON() method returns', () => {
    expect(rejection({ money: { toJSON: () => ({ amount: NaN }) } }).path).toBe('$.money.amount');
  });

  it('names the path of a getter that throws', () => {
    const value = {
      get broken(): number {
        throw new Error('nope');
      },
    };
    const error = rejection({ inner: value });
    expect(error.path).toBe('$.inner.broken');
    expect(error.reason).toBe('a value that could not be read (nope)');
  });

  it('stores a Date as its ISO string', () => {
    expect(encodeJson({ at: new Date('2030-01-02T03:04:05.678Z') }, WHAT, LIMIT)).toBe('{"at":"2030-01-02T03:04:05.678Z"}');
    expect(encodeJson(new Date(0), WHAT, LIMIT)).toBe('"1970-01-01T00:00:00.000Z"');
  });

  it('leaves out an undefined property, which reads back as undefined', () => {
    const text = encodeJson({ a: 1, b: undefined }, WHAT, LIMIT);
    expect(text).toBe('{"a":1}');
    expect((decodeJson(text, 'r', 'output') as { b?: unknown }).b).toBeUndefined();
  });

  it('stores undefined at the root as the empty string', () => {
    expect(encodeJson(undefined, WHAT, LIMIT)).toBe('');
    expect(decodeJson('', 'r', 'output')).toBeUndefined();
  });

  it('stores null, nested arrays and plain data unchanged', () => {
    expect(encodeJson(null, WHAT, LIMIT)).toBe('null');
    expect(encodeJson({ a: null }, WHAT, LIMIT)).toBe('{"a":null}');
    expect(encodeJson([[1, [2, [3]]], [], ['x', true, null]], WHAT, LIMIT)).toBe('[[1,[2,[3]]],[],["x",true,null]]');
    expect(encodeJson({ s: 'é', n: -1.5, b: false, o: {} }, WHAT, LIMIT)).toBe('{"s":"é","n":-1.5,"b":false,"o":{}}');
  });

  it('stores class instances by their enumerable data', () => {
    class Point {
      constructor(
        readonly x: number,
        readonly y: number,
      ) {}
      get length(): number {
        return Math.hypot(this.x, this.y);
      }
    }
    expect(encodeJson({ p: new Point(3, 4) }, WHAT, LIMIT)).toBe('{"p":{"x":3,"y":4}}');
  });

  it('stores the same object twice when it is not a cycle', () => {
    const shared = { id: 1 };
    expect(encodeJson({ a: shared, b: [shared] }, WHAT, LIMIT)).toBe('{"a":{"id":1},"b":[{"id":1}]}');
  });

  it('still rejects a value over the limit with PayloadTooLargeError', () => {
    const error = thrownBy(() => encodeJson({ blob: 'x'.repeat(200) }, 'The input of workflow "big"', 100));
    expect(error).toBeInstanceOf(PayloadTooLargeError);
    expect(error).toMatchObject({ what: 'The input of workflow "big"', bytes: 211, limit: 100 });
  });

  it('decodes bad stored JSON as CorruptRunDataError', () => {
    const error = thrownBy(() => decodeJson('{oops', 'run-1', 'output'));
    expect(error).toBeInstanceOf(CorruptRunDataError);
    expect(error).toMatchObject({ runId: 'run-1', detail: 'field "output" is not valid JSON' });
  });
});
