/** The spec's error shape: {status, type, title, detail}. Every failure the API returns goes through here. */

export const ERROR_KINDS = {
  invalid_parameters: { status: 400, title: 'Invalid parameters' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  invalid_credentials: { status: 401, title: 'Invalid credentials' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  already_exists: { status: 409, title: 'Already exists' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  provider_rejected: { status: 422, title: 'Rejected by the provider' },
  idempotency_key_reused: { status: 422, title: 'Idempotency key reused' },
  rate_limited: { status: 429, title: 'Too many requests' },
  unexpected_error: { status: 500, title: 'Unexpected error' },
  provider_error: { status: 502, title: 'Mail provider error' },
} as const;

export type ErrorKind = keyof typeof ERROR_KINDS;

export interface ErrorBody {
  status: number;
  type: string;
  title: string;
  detail: string;
}

export class ApiError extends Error {
  readonly kind: ErrorKind;
  readonly detail: string;
  readonly headers: Record<string, string>;

  constructor(kind: ErrorKind, detail: string, headers: Record<string, string> = {}) {
    super(`${kind}: ${detail}`);
    this.kind = kind;
    this.detail = detail;
    this.headers = headers;
  }

  get status(): number {
    return ERROR_KINDS[this.kind].status;
  }
}

export function errorBody(kind: ErrorKind, detail: string): ErrorBody {
  const { status, title } = ERROR_KINDS[kind];
  return { status, type: `errors/${kind}`, title, detail };
}

export function errorResponse(kind: ErrorKind, detail: string, headers: Record<string, string> = {}): Response {
  const body = errorBody(kind, detail);
  return Response.json(body, { status: body.status, headers });
}

/**
 * The gateway had the request but no answer came: it may or may not have been carried out. A send
 * that fails this way must be resolved later, never sent again (send/idempotency.ts).
 */
export class OutcomeUnknown extends ApiError {
  constructor(detail: string) {
    super('provider_error', detail);
  }
}

/**
 * A send that certainly handed nothing over (the gateway's refusal, no gateway holding the account,
 * the budget spent before its turn): the one failure after which a send's record and its
 * Idempotency-Key may be forgotten. Any other failure of a send leaves its outcome unknown.
 */
export class NothingSent extends ApiError {}

export const notFound = (what: string) => new ApiError('not_found', `${what} not found`);
export const invalid = (detail: string) => new ApiError('invalid_parameters', detail);

/** Is this a known error kind name (e.g. relayed from the gateway)? */
export function isErrorKind(value: unknown): value is ErrorKind {
  return typeof value === 'string' && value in ERROR_KINDS;
}
