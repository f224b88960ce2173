/**
 * Property names whose values are treated as secrets when run data is shown to a person: passwords,
 * tokens, API keys, cookies, credentials and private keys, in any case and as part of a longer name
 * (`cvcToken`, `db_password`, `X-Api-Key`). It errs on the side of hiding: `passport` matches too.
 */
export const SECRET_KEY = /pass(word)?|passwd|token|secret|authorization|api[-_]?key|cookie|credential|private[-_]?key/i;

/** The text that replaces a secret value. */
const MASK = '***';

/**
 * A deep copy of a JSON value in which the value of every object property whose name is a secret
 * (by `isSecretKey`, at any depth, inside arrays too) is replaced by `'***'`; everything else is
 * copied unchanged. Pure: the argument is not modified. Meant for showing run inputs, outputs and
 * errors, which are JSON, so cycles are not handled.
 *
 * @param value a JSON value (object, array or primitive)
 * @param isSecretKey decides whether a property name is a secret. @default a test against {@link SECRET_KEY}
 */
export function maskSecrets<T>(value: T, isSecretKey: (key: string) => boolean = (key) => SECRET_KEY.test(key)): T {
  const copy = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(copy);
    if (node === null || typeof node !== 'object') return node;
    // fromEntries defines own properties, so a "__proto__" key from JSON stays a plain key.
    return Object.fromEntries(Object.entries(node).map(([key, child]) => [key, isSecretKey(key) ? MASK : copy(child)]));
  };
  return copy(value) as T;
}
