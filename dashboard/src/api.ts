/**
 * The dashboard calls the public API like any client: /api/v1 with the X-API-KEY header. An error
 * answer becomes an ApiFailure carrying the API's own {status, type, title, detail}; a 401
 * errors/unauthorized (the key revoked or wrong) signs the dashboard out with that reason.
 */
import { currentKey, signOut } from './session.ts';

export class ApiFailure extends Error {
  readonly status: number;
  readonly type: string;
  readonly title: string;
  readonly detail: string;

  constructor(status: number, type: string, title: string, detail: string) {
    super(`${title}: ${detail}`);
    this.status = status;
    this.type = type;
    this.title = title;
    this.detail = detail;
  }
}

/** Any thrown value as a sentence for the page. */
export const describeError = (err: unknown): string =>
  err instanceof ApiFailure ? `${err.title}: ${err.detail}` : err instanceof Error ? err.message : String(err);

async function failure(response: Response): Promise<ApiFailure> {
  try {
    const body = (await response.json()) as Partial<Record<'status' | 'type' | 'title' | 'detail', unknown>>;
    if (typeof body.title === 'string' && typeof body.detail === 'string')
      return new ApiFailure(response.status, String(body.type), body.title, body.detail);
  } catch {
    // not the API's error shape
  }
  return new ApiFailure(response.status, 'errors/unexpected_error', `HTTP ${response.status}`, response.statusText);
}

/** One API call with `key` (default: the signed-in key); the raw Response when it succeeded. */
export async function callApi(
  method: string,
  path: string,
  options: { body?: unknown; key?: string } = {},
): Promise<Response> {
  const key = options.key ?? currentKey();
  if (!key) throw new ApiFailure(401, 'errors/unauthorized', 'Unauthorized', 'Not signed in.');
  const headers: Record<string, string> = { 'X-API-KEY': key };
  if (options.body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(`/api/v1${path}`, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    credentials: 'omit',
    cache: 'no-store',
  });
  if (response.ok) return response;
  const error = await failure(response);
  // The signed-in key stopped working: sign out and say why. A key being tried at sign-in is not stored.
  if (error.type === 'errors/unauthorized' && options.key === undefined) signOut(error.detail);
  throw error;
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  return (await (await callApi(method, path, { body })).json()) as T;
}

/** Query string from the defined, non-empty values. */
export function query(params: Record<string, string | number | boolean | null | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params))
    if (value !== undefined && value !== null && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}

export interface List<T> {
  object: string;
  data: T[];
  has_more: boolean;
  cursor?: string | null;
}
