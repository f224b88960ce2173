// The page's one door to the server: GET reads and POST actions of the dashboard's JSON API
// (docs/dashboard-api.md). Errors carry the server's code (REDIS_UNAVAILABLE, RUN_NOT_FOUND, ...)
// and its one sentence.

const base = document.body.dataset.base ?? '';
const csrf = document.querySelector<HTMLMetaElement>('meta[name="redflow-csrf"]')?.content ?? '';

export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
    readonly status: number | undefined,
  ) {
    super(message);
  }
}

async function request<T>(path: string, init?: RequestInit): Promise<T> {
  let res: Response;
  try {
    res = await fetch(`${base}/api${path}`, init);
  } catch (error) {
    throw new ApiError(error instanceof Error ? error.message : String(error), undefined, undefined);
  }
  const body = (await res.json().catch(() => ({}))) as { message?: string; code?: string };
  if (!res.ok) throw new ApiError(body.message || `The server answered ${res.status}.`, body.code, res.status);
  return body as T;
}

/** A read. */
export const get = <T>(path: string): Promise<T> => request<T>(path);

/** An action: JSON, with the page's token, same-origin: what the server checks against CSRF. */
export const act = <T = Record<string, unknown>>(path: string): Promise<T> =>
  request<T>(path, { method: 'POST', headers: { 'content-type': 'application/json', 'x-redflow-csrf': csrf }, body: '{}' });

/** The address of a download (a whole payload). */
export const href = (path: string): string => `${base}/api${path}`;

/** `a=1&b=2` from an object, leaving out empty values. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined && value !== null && value !== '') q.set(key, String(value));
  return q.toString();
}
