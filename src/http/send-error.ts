// Where every error leaves the gateway (DESIGN invariant 6): what a thrown value becomes, and the
// writers of the spec's error object with the request id, on a fastify reply (the routes fastify
// serves) or on node's response (the model front, model-front.ts). Both write the same status,
// headers and body (errorBody); the reply's form keeps fastify's reply lifecycle intact.
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import { LimiterUnavailableError } from '../limits/limiter.ts';
import { errorBody, GatewayError, type ErrorStyle } from './errors.ts';

/** A thrown value as the error the client gets, or null for a bug (answered as internal_error). */
export function toGatewayError(err: unknown): GatewayError | null {
  if (err instanceof GatewayError) return err;
  if (err instanceof LimiterUnavailableError)
    return new GatewayError(
      'service_unavailable',
      'the shared limiter (Redis) is unavailable; try again shortly',
    );
  const code = (err as { code?: string }).code;
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new GatewayError('request_too_large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new GatewayError('unsupported_media_type', 'send the body as application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new GatewayError('invalid_parameter_error', 'the request body is empty');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new GatewayError(
        'invalid_parameter_error',
        'the content-length does not match the body',
      );
    default:
      break;
  }
  const status = (err as { statusCode?: number }).statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new GatewayError('invalid_parameter_error', (err as Error).message);
  }
  return null;
}

/** The error on a fastify reply. */
export function sendError(
  reply: FastifyReply,
  err: GatewayError,
  requestId: string,
  style: ErrorStyle,
): void {
  if (err.headers !== null) reply.headers(err.headers);
  reply
    .code(err.status)
    .header('content-type', 'application/json')
    .send(errorBody(err.code, err.message, requestId, style));
}

/**
 * The error on node's response, for a request fastify never saw. `headers` are the answer's own
 * (x-request-id, x-ratelimit-*): one writeHead, no setHeader before it (model-front.ts).
 */
export function writeError(
  res: ServerResponse,
  err: GatewayError,
  requestId: string,
  style: ErrorStyle,
  headers: Record<string, string>,
): void {
  const body = errorBody(err.code, err.message, requestId, style);
  if (err.headers !== null) for (const name in err.headers) headers[name] = err.headers[name]!;
  headers['content-type'] = 'application/json';
  headers['content-length'] = String(Buffer.byteLength(body));
  res.writeHead(err.status, headers);
  res.end(body);
}
