// The fastify application: request ids, body parsing with exact 4xx errors, and every route of the
// endpoint registry but the JSON model routes, which node's server hands to the model front first
// (model-front.ts). Authentication runs before routing, so an unauthenticated call does no
// upstream work and costs nothing (spec 5.6, DESIGN invariant 4).
import { createServer, type Server } from 'node:http';
import Fastify, {
  LogController,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerFactory,
  type FastifyServerFactoryHandler,
  type FastifyServerOptions,
} from 'fastify';
import type { FastifyBaseLogger } from 'fastify';
import type { GatewayContext } from '../relay/context.ts';
import { lazyChildLogger } from '../telemetry/lazy-child-logger.ts';
import type { RequestObserver } from '../relay/observer.ts';
import { styleOf, type Caller } from '../relay/relay.ts';
import { keyAllowsModel } from '../store/model-patterns.ts';
import type { RoutingTable } from '../table/types.ts';
import { authenticate } from './authenticate.ts';
import { ENDPOINTS, type EndpointDef } from './endpoints.ts';
import { ERRORS, GatewayError, type ErrorCode, type ErrorStyle } from './errors.ts';
import { ModelFront, servedByFront } from './model-front.ts';
import { pricingPayload } from './pricing.ts';
import { requestIdFrom } from './request-id.ts';
import { sendError, toGatewayError } from './send-error.ts';

declare module 'fastify' {
  interface FastifyRequest {
    errorStyle: ErrorStyle;
    /** Set by the route's onRequest hook, before the body is read. */
    caller: Caller | null;
    obs: RequestObserver | null;
  }
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
        // Endpoints with no adapter yet (multipart, websocket, task groups): no model can open
        // them (the compiler refuses), so the answer is the clear "not open" error, never a
        // fallback to another endpoint. The JSON model routes never come here (model-front.ts).
        throw new GatewayError(
          'model_not_found',
          `the ${def.kind} endpoint is not open for any model on this gateway`,
        );
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

/**
 * node's server with the model front ahead of fastify's handler, and the timeouts fastify sets on
 * a server it makes itself (fastify's lib/server.js).
 */
function serverWithFront(front: ModelFront): FastifyServerFactory {
  return (fastifyHandler: FastifyServerFactoryHandler, options: FastifyServerOptions): Server => {
    const server = createServer((req, res) => {
      if (!front.serve(req, res)) fastifyHandler(req, res);
    });
    server.keepAliveTimeout = options.keepAliveTimeout ?? 72_000;
    server.requestTimeout = options.requestTimeout ?? 0;
    server.setTimeout(options.connectionTimeout ?? 0);
    return server;
  };
}

export function buildApp(
  ctx: GatewayContext,
  opts: AppOptions,
  extra: (app: FastifyInstance) => void,
): FastifyInstance {
  const front = new ModelFront(ctx, opts.bodyLimit);
  const app = Fastify({
    serverFactory: serverWithFront(front),
    loggerInstance: opts.logger,
    bodyLimit: opts.bodyLimit,
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    // The access line is written once per request by the observer (src/telemetry), not by fastify.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyChildLogger,
    return503OnClosing: true,
    forceCloseConnections: true,
  });

  app.decorateRequest('errorStyle', 'openai');
  app.decorateRequest('caller', null);
  app.decorateRequest('obs', null);
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    if (req.url.startsWith('/v1/messages')) req.errorStyle = 'anthropic';
  });

  // The bodies of the routes fastify still serves are parsed here, so malformed JSON is our 400.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body: Buffer, done) => {
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
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body: Buffer, done) => {
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

  // Fastify stops taking requests before it closes its connections; so does the front.
  app.addHook('preClose', (done) => {
    front.close();
    done();
  });
  for (const def of ENDPOINTS) {
    if (servedByFront(def)) continue;
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
