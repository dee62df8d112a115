// The one registry of error codes the gateway can return (STYLE 2, DESIGN invariant 6). Every
// error leaves through sendError with the spec's object {error:{message,type,code}} plus the
// request id. test/http/errors.test.ts checks each code is documented in docs/errors.md.
// Retired codes are never reused: mark them retired here instead of deleting them.

export const ERROR_TYPE = 'switchyard_api_error';

export interface ErrorDef {
  status: number;
  /** Default message; callers pass a specific one where it helps the user act. */
  message: string;
  /** Administrative routes only. */
  admin?: true;
  /** Named in the spec for routes not built yet; never returned today. */
  reserved?: true;
}

export const ERRORS = {
  invalid_token: { status: 401, message: 'the API key is missing, invalid, expired or disabled' },
  no_access_to_model: { status: 403, message: 'this API key may not use the model' },
  realname_required: {
    status: 403,
    message: 'the model requires real-name verification of the account',
  },
  temp_blacklisted: { status: 403, message: 'this source is temporarily restricted' },
  insufficient_user_quota: {
    status: 403,
    message: 'insufficient_user_quota: the balance cannot cover this request',
  },
  account_disabled: { status: 403, message: 'the account is disabled' },
  invalid_parameter_error: { status: 400, message: 'the request body is invalid' },
  model_not_found: {
    status: 404,
    message: 'the model does not exist or is not open for this endpoint',
  },
  not_found: { status: 404, message: 'no such route' },
  method_not_allowed: { status: 405, message: 'method not allowed on this route' },
  request_too_large: { status: 413, message: 'the request body is too large' },
  unsupported_media_type: { status: 415, message: 'unsupported content type' },
  rate_limited: { status: 429, message: 'rate limit reached for this model' },
  channel_capacity_exceeded: {
    status: 429,
    message: 'every channel for this model is at capacity',
  },
  upstream_error: { status: 502, message: 'the upstream failed' },
  upstream_timeout: { status: 504, message: 'the upstream did not answer in time' },
  service_unavailable: {
    status: 503,
    message: 'a dependency of the gateway is unavailable; try again shortly',
  },
  internal_error: { status: 500, message: 'internal error' },
  AUTH_INSUFFICIENT_PRIVILEGE: {
    status: 403,
    message: 'this admin token may not perform the operation',
    admin: true,
  },
  ROUTE_POLICY_FAILED: { status: 500, message: 'route policy failed', admin: true, reserved: true },
  AUTH_SESSION_LIMIT: {
    status: 409,
    message: 'too many console sessions',
    admin: true,
    reserved: true,
  },
  AUTH_SESSION_ISSUANCE_LIMIT: {
    status: 429,
    message: 'session issuance limit reached',
    admin: true,
    reserved: true,
  },
  INVOICE_SERVICE_UNAVAILABLE: {
    status: 502,
    message: 'invoice service unavailable',
    admin: true,
    reserved: true,
  },
  INVALID_INVOICE_ID: { status: 400, message: 'invalid invoice id', admin: true, reserved: true },
  SUPPLIER_UNAVAILABLE: {
    status: 502,
    message: 'supplier unavailable',
    admin: true,
    reserved: true,
  },
  UPSTREAM_MODELS_FAILED: {
    status: 502,
    message: 'listing upstream models failed',
    admin: true,
    reserved: true,
  },
  ATTACHMENT_UNAVAILABLE: {
    status: 404,
    message: 'attachment unavailable',
    admin: true,
    reserved: true,
  },
} as const satisfies Record<string, ErrorDef>;

export type ErrorCode = keyof typeof ERRORS;

/** An error the gateway means to return; anything else thrown becomes internal_error. */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Extra response headers (Retry-After, x-ratelimit-*). */
  readonly headers: Readonly<Record<string, string>> | null;

  constructor(
    code: ErrorCode,
    message?: string,
    headers: Readonly<Record<string, string>> | null = null,
  ) {
    super(message ?? ERRORS[code].message);
    this.name = 'GatewayError';
    this.code = code;
    this.status = ERRORS[code].status;
    this.headers = headers;
  }
}

export type ErrorStyle = 'openai' | 'anthropic';

/** The body of an error response: the spec's object; on the messages route also Anthropic's shape. */
export function errorBody(
  code: ErrorCode,
  message: string,
  requestId: string,
  style: ErrorStyle,
): string {
  const error = { message, type: ERROR_TYPE, code, request_id: requestId };
  return JSON.stringify(
    style === 'anthropic' ? { type: 'error', error, request_id: requestId } : { error },
  );
}
