// The admin API under /api/: one encapsulated fastify scope whose onRequest hook checks the admin
// token before any body is parsed, and whose error handler writes the spec's error object.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody, GatewayError } from '../http/errors.ts';
import { LimiterUnavailableError } from '../limits/limiter.ts';
import { StoreError } from '../store/store.ts';
import { accountRoutes } from './account-routes.ts';
import { adminPrivilege } from './admin-auth.ts';
import type { AdminDeps } from './admin-deps.ts';
import { blacklistRoutes } from './blacklist-routes.ts';
import { keyRoutes } from './key-routes.ts';
import { usageRoutes } from './usage-routes.ts';

export type { AdminDeps } from './admin-deps.ts';

/** Postgres "numeric value out of range": a balance pushed past int8 (9.2e18 nano-yuan). */
const PG_OUT_OF_RANGE = '22003';

/** Maps what a handler threw to the error the operator sees; null for a bug (500). */
function adminError(err: unknown): GatewayError | null {
  if (err instanceof GatewayError) return err;
  if (err instanceof StoreError) {
    if (err.code === 'not_found') return new GatewayError('not_found', err.message);
    if (err.code === 'invalid_argument' || err.code === 'insufficient_balance') {
      return new GatewayError('invalid_parameter_error', err.message);
    }
    return null;
  }
  if (err instanceof LimiterUnavailableError) {
    return new GatewayError('service_unavailable', 'the shared limiter (Redis) is unavailable');
  }
  const e = err as Partial<FastifyError>;
  if (e.code === PG_OUT_OF_RANGE) {
    return new GatewayError(
      'invalid_parameter_error',
      'amount: the balance would exceed what the store holds',
    );
  }
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new GatewayError('request_too_large');
  if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new GatewayError('unsupported_media_type', 'send the body as application/json');
  }
  // Fastify's own 4xx (malformed JSON, empty JSON body, bad content-length) are the client's.
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new GatewayError('invalid_parameter_error', e.message ?? 'the request is invalid');
  }
  return null;
}

function sendAdminError(req: FastifyRequest, reply: FastifyReply, err: unknown): void {
  let gw = adminError(err);
  if (gw === null) {
    req.log.error({ err }, 'admin route failed');
    gw = new GatewayError('internal_error', `internal error (request id ${req.id})`);
  }
  if (gw.headers !== null) reply.headers(gw.headers);
  reply
    .code(gw.status)
    .header('content-type', 'application/json')
    .send(errorBody(gw.code, gw.message, req.id, 'openai'));
}

/** GET and HEAD read; every other method changes something and needs the full token. */
const READ_METHODS = new Set(['GET', 'HEAD']);

export function registerAdminRoutes(app: FastifyInstance, deps: AdminDeps): void {
  app.register(async (scope) => {
    scope.setErrorHandler((err, req, reply) => sendAdminError(req, reply, err));
    scope.addHook('onRequest', async (req, reply) => {
      // Admin answers carry balances and, once, key plaintexts: no cache may keep them.
      reply.header('cache-control', 'no-store');
      const privilege = adminPrivilege(req.headers.authorization, deps.table().gateway.admin);
      if (privilege === 'readonly' && !READ_METHODS.has(req.method)) {
        throw new GatewayError(
          'AUTH_INSUFFICIENT_PRIVILEGE',
          'the read-only admin token may not change anything',
        );
      }
    });

    scope.get('/api/status', async () => deps.status());
    accountRoutes(scope, deps);
    keyRoutes(scope, deps);
    usageRoutes(scope, deps);
    blacklistRoutes(scope, deps);
  });
}
