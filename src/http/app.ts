// The fastify application: request ids, body parsing with exact 4xx errors, the one error
// function, and every route of the endpoint registry. Authentication runs before routing, so an
// unauthenticated call does no upstream work and costs nothing (spec 5.6, DESIGN invariant 4).
import Fastify, {
  LogController,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { FastifyBaseLogger } from 'fastify';
import { LimiterUnavailableError } from '../limits/limiter.ts';
import type { GatewayContext } from '../relay/context.ts';
import { lazyChildLogger } from '../telemetry/lazy-child-logger.ts';
import type { RequestObserver } from '../relay/observer.ts';
import { relayModelRoute, strike, styleOf, type Caller } from '../relay/relay.ts';
import { keyAllowsModel } from '../store/model-patterns.ts';
import type { RoutingTable } from '../table/types.ts';
import { ENDPOINTS, type EndpointDef } from './endpoints.ts';
import { errorBody, ERRORS, GatewayError, type ErrorCode, type ErrorStyle } from './errors.ts';
import { pricingPayload } from './pricing.ts';
import { requestIdFrom } from './request-id.ts';

declare module 'fastify' {
  interface FastifyRequest {
    rawBodyLength: number;
    errorStyle: ErrorStyle;
    /** Set by the route's onRequest hook, before the body is read. */
    caller: Caller | null;
    obs: RequestObserver | null;
  }
}

/** The one function every error leaves through (DESIGN invariant 6). */
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

function toGatewayError(err: unknown): GatewayError | null {
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

/** The client's address; X-Forwarded-For is believed only from configured trusted proxies. */
export function clientIp(req: FastifyRequest, table: RoutingTable): string {
  const peer = req.socket.remoteAddress ?? 'unknown';
  const trusted = table.gateway.trustedProxies;
  if (trusted.length === 0 || !trusted.includes(peer)) return peer;
  const xff = req.headers['x-forwarded-for'];
  const list = (Array.isArray(xff) ? xff.join(',') : (xff ?? ''))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  // Walk from the nearest hop back: the first address that is not a trusted proxy is the client.
  for (let i = list.length - 1; i >= 0; i--) {
    const hop = list[i]!;
    if (!trusted.includes(hop)) return hop;
  }
  return list[0] ?? peer;
}

function credentialOf(req: FastifyRequest, def: EndpointDef): string | null {
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && auth.startsWith('Bearer ')) return auth.slice(7).trim() || null;
  if (def.auth === 'anthropic') {
    const k = req.headers['x-api-key'];
    if (typeof k === 'string' && k.length > 0) return k;
  }
  return null;
}

async function authenticate(
  ctx: GatewayContext,
  table: RoutingTable,
  def: EndpointDef,
  req: FastifyRequest,
  obs: RequestObserver,
): Promise<Caller> {
  const ipSource = `ip:${clientIp(req, table)}`;
  const banned = await ctx.limiter.isBlacklisted(ipSource);
  if (banned !== null) {
    obs.rejected('blacklist', 'temp_blacklisted');
    throw new GatewayError(
      'temp_blacklisted',
      `this source is temporarily restricted until ${new Date(banned.untilMs).toISOString()}`,
    );
  }
  const plaintext = credentialOf(req, def);
  const result = plaintext === null ? null : await ctx.keys.authenticate(plaintext, req.socket);
  if (result === null || !result.ok) {
    obs.rejected('auth', 'invalid_token');
    await strike(ctx, table, ipSource, 'auth_failure');
    if (result !== null && !result.ok && result.reason === 'account_disabled')
      throw new GatewayError('account_disabled');
    const why =
      result === null
        ? 'no API key was sent'
        : `the API key is ${result.reason === 'unknown_key' ? 'invalid' : result.reason === 'key_expired' ? 'expired' : 'disabled'}`;
    throw new GatewayError('invalid_token', why);
  }
  const key = result.key;
  const source = table.limits.blacklistSource === 'key' ? `key:${key.id}` : ipSource;
  if (source !== ipSource) {
    const keyBan = await ctx.limiter.isBlacklisted(source);
    if (keyBan !== null) {
      obs.rejected('blacklist', 'temp_blacklisted');
      throw new GatewayError(
        'temp_blacklisted',
        `this key is temporarily restricted until ${new Date(keyBan.untilMs).toISOString()}`,
      );
    }
  }
  // Spec 9.2 pins 2023-06-01; newer SDKs send a later date for the same protocol, which upstreams
  // still receive as 2023-06-01. A missing or malformed version is the client's mistake.
  const version = req.headers['anthropic-version'];
  if (
    def.auth === 'anthropic' &&
    (typeof version !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(version) || version < '2023-06-01')
  ) {
    obs.rejected('validation', 'invalid_parameter_error');
    throw new GatewayError(
      'invalid_parameter_error',
      'the anthropic-version header is required (2023-06-01)',
    );
  }
  obs.identify({ accountId: key.accountId, keyId: key.id, model: null });
  return {
    keyId: key.id,
    accountId: key.accountId,
    allowedModels: key.allowedModels,
    realnameVerified: result.realnameVerified,
    source,
  };
}

function modelObject(m: RoutingTable['modelList'][number], created: number): object {
  return {
    id: m.name,
    object: 'model',
    created,
    owned_by: m.ownedBy,
    supported_endpoints: m.endpoints,
  };
}

async function handle(
  ctx: GatewayContext,
  def: EndpointDef,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<void> {
  const table = ctx.tables.current;
  if (def.handler === 'pricing') {
    reply.header('cache-control', 'public, max-age=30').send(pricingPayload(table, Date.now()));
    return;
  }
  const obs = req.obs!;
  const caller = req.caller!;
  let status = 200;
  try {
    const created = Math.floor(table.compiledAtMs / 1000);
    switch (def.handler) {
      case 'models': {
        const data = table.modelList
          .filter((m) => keyAllowsModel(caller.allowedModels, m.name))
          .map((m) => modelObject(m, created));
        reply.send({ object: 'list', data });
        return;
      }
      case 'model': {
        const name = (req.params as { model: string }).model;
        const m = table.models.get(name);
        if (m === undefined || !keyAllowsModel(caller.allowedModels, name)) {
          throw new GatewayError(
            'model_not_found',
            `model "${name}" does not exist or this key may not use it`,
          );
        }
        reply.send(modelObject(m, created));
        return;
      }
      case 'no_model_route':
        throw new GatewayError(
          'not_found',
          `${req.url.split('?')[0]} is not open on this gateway: no upstream channel is connected for it`,
        );
      case 'task_fetch':
        throw new GatewayError(
          'not_found',
          `task "${(req.params as { id: string }).id}" does not exist`,
        );
      default:
        if (def.body === 'multipart' || def.body === 'none' || def.body === 'any') {
          // Endpoints with no adapter yet: no model can open them (the compiler refuses), so the
          // answer is the clear "not open" error, never a fallback to another endpoint.
          throw new GatewayError(
            'model_not_found',
            `the ${def.kind} endpoint is not open for any model on this gateway`,
          );
        }
        await relayModelRoute(ctx, def, req, reply, caller, obs);
    }
  } catch (err) {
    const gw = toGatewayError(err);
    if (gw === null) throw err;
    status = gw.status;
    if (reply.sent || reply.raw.headersSent) return;
    sendError(reply, gw, req.id, req.errorStyle);
  } finally {
    obs.finish(reply.sent ? reply.statusCode : status);
  }
}

/**
 * Blacklist and key checks run in onRequest, before fastify reads the body: a banned source or a
 * request without a valid key costs no body parsing (up to the 10 MB limit) and gets its 401/403
 * even when the body is malformed (spec 5.6).
 */
async function admitCaller(
  ctx: GatewayContext,
  def: EndpointDef,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply | undefined> {
  const obs = ctx.observe(req.id, def.name, req.method, req.headers);
  req.obs = obs;
  try {
    req.caller = await authenticate(ctx, ctx.tables.current, def, req, obs);
    return undefined;
  } catch (err) {
    const gw = toGatewayError(err);
    if (gw === null) throw err;
    sendError(reply, gw, req.id, req.errorStyle);
    obs.finish(gw.status);
    return reply;
  }
}

export interface AppOptions {
  logger: FastifyBaseLogger;
  bodyLimit: number;
}

export function buildApp(
  ctx: GatewayContext,
  opts: AppOptions,
  extra: (app: FastifyInstance) => void,
): FastifyInstance {
  const app = Fastify({
    loggerInstance: opts.logger,
    bodyLimit: opts.bodyLimit,
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    // The access line is written once per request by the observer (src/telemetry), not by fastify.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyChildLogger,
    return503OnClosing: true,
    forceCloseConnections: true,
  });

  app.decorateRequest('rawBodyLength', 0);
  app.decorateRequest('errorStyle', 'openai');
  app.decorateRequest('caller', null);
  app.decorateRequest('obs', null);
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    if (req.url.startsWith('/v1/messages')) req.errorStyle = 'anthropic';
  });

  // JSON bodies are parsed here, so malformed JSON is our 400 and the byte length is kept for the
  // reservation's input bound.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body: Buffer, done) => {
    req.rawBodyLength = body.length;
    if (body.length === 0) {
      done(new GatewayError('invalid_parameter_error', 'the request body is empty'), undefined);
      return;
    }
    try {
      done(null, JSON.parse(body.toString('utf8')));
    } catch (err) {
      done(
        new GatewayError('invalid_parameter_error', `malformed JSON: ${(err as Error).message}`),
        undefined,
      );
    }
  });
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (req, body: Buffer, done) => {
    req.rawBodyLength = body.length;
    done(null, body);
  });

  app.setErrorHandler((err, req, reply) => {
    const gw = toGatewayError(err);
    if (gw !== null) {
      // A body that could not be read (malformed, too large) after the caller was admitted.
      req.obs?.rejected('validation', gw.code);
      sendError(reply, gw, req.id, req.errorStyle);
      req.obs?.finish(gw.status);
      return;
    }
    req.log.error({ err }, 'unhandled error');
    sendError(
      reply,
      new GatewayError('internal_error', `internal error (request id ${req.id})`),
      req.id,
      req.errorStyle,
    );
  });
  app.setNotFoundHandler((req, reply) => {
    sendError(
      reply,
      new GatewayError('not_found', `no route ${req.method} ${req.url.split('?')[0]}`),
      req.id,
      req.errorStyle,
    );
  });

  for (const def of ENDPOINTS) {
    const methods =
      def.method === 'ANY' ? (['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const) : [def.method];
    app.route({
      method: [...methods],
      url: def.path,
      ...(def.auth === 'none'
        ? {}
        : {
            onRequest: (req: FastifyRequest, reply: FastifyReply) =>
              admitCaller(ctx, def, req, reply),
          }),
      handler: (req, reply) => handle(ctx, def, req, reply),
    });
  }
  extra(app);
  return app;
}

export { ERRORS, styleOf };
export type { ErrorCode };
