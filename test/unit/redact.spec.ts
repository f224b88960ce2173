import { maskSecrets, SECRET_KEY } from '../../lib/dashboard/redact';

describe('maskSecrets', () => {
  it('replaces the values of secret keys at any depth, inside arrays too, and keeps every other value', () => {
    const input = {
      user: 'ada',
      password: 'hunter2',
      card: { number: '4242', cvcToken: 'abc', expiry: { month: 4, year: 2031 } },
      headers: [{ Authorization: 'Bearer x' }, { accept: 'json', 'X-Api-Key': 'k1' }],
      nested: [[{ client_secret: { deep: 'object' } }, 7, null, 'text']],
      count: 3,
      ok: true,
      none: null,
    };
    expect(maskSecrets(input)).toEqual({
      user: 'ada',
      password: '***',
      card: { number: '4242', cvcToken: '***', expiry: { month: 4, year: 2031 } },
      headers: [{ Authorization: '***' }, { accept: 'json', 'X-Api-Key': '***' }],
      nested: [[{ client_secret: '***' }, 7, null, 'text']],
      count: 3,
      ok: true,
      none: null,
    });
  });

  it('does not change its argument, and returns a copy that shares no object with it', () => {
    const input = { password: 'hunter2', list: [{ token: 't', keep: { a: 1 } }] };
    const before = JSON.parse(JSON.stringify(input)) as typeof input;
    const masked = maskSecrets(input);
    expect(input).toEqual(before);
    expect(masked.list).not.toBe(input.list);
    expect(masked.list[0].keep).not.toBe(input.list[0].keep);
    expect(masked.list[0].keep).toEqual({ a: 1 });
  });

  it('returns primitives, null and undefined as they are', () => {
    expect(maskSecrets('password')).toBe('password');
    expect(maskSecrets(42)).toBe(42);
    expect(maskSecrets(null)).toBeNull();
    expect(maskSecrets(undefined)).toBeUndefined();
    expect(maskSecrets(['token', 'secret'])).toEqual(['token', 'secret']);
  });

  it('keeps a "__proto__" key of parsed JSON as a plain key, without touching prototypes', () => {
    const input = JSON.parse('{"__proto__": {"token": "t", "polluted": true}}') as Record<string, unknown>;
    const masked = maskSecrets(input);
    expect(Object.getPrototypeOf(masked)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(masked, '__proto__')?.value).toEqual({ token: '***', polluted: true });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('takes another test of key names', () => {
    expect(maskSecrets({ ssn: '123', password: 'kept', inner: [{ ssn: '456' }] }, (key) => key === 'ssn')).toEqual({
      ssn: '***',
      password: 'kept',
      inner: [{ ssn: '***' }],
    });
  });

  it('SECRET_KEY: matches secret-looking names in any case, not ordinary ones', () => {
    const secret = [
      'password',
      'PASSWD',
      'dbPass',
      'apiKey',
      'api_key',
      'x-api-key',
      'accessToken',
      'clientSecret',
      'Authorization',
      'Cookie',
      'credentials',
      'private_key',
      'privateKey',
    ];
    const ordinary = ['name', 'email', 'amount', 'key', 'id', 'author', 'cookbook'];
    expect(secret.filter((k) => !SECRET_KEY.test(k))).toEqual([]);
    expect(ordinary.filter((k) => SECRET_KEY.test(k))).toEqual([]);
  });
});
