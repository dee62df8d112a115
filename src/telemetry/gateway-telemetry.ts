// Joins tracing, metrics and logs into what the gateway uses: one RequestObserver per request
// (span tree, metrics, the access line), the config-version gauges, and the /metrics route.
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Span } from '@opentelemetry/api';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { pino } from 'pino';
import type {
  AttemptOutcome,
  RejectedLayer,
  RequestFacts,
  RequestObserver,
  SettledFacts,
} from '../relay/observer.ts';
import type { EndpointKind } from '../table/endpoints.ts';
import type { GatewayEntry } from '../table/types.ts';
import { addCostNano, createGatewayMetrics, type GatewayMetrics } from './gateway-metrics.ts';
import type { RejectedBy } from './labels.ts';
import { accessLogLine, loggerOptions } from './logging.ts';
import { PROMETHEUS_CONTENT_TYPE } from './metrics.ts';
import {
  createTracing,
  endUpstreamAttempt,
  genAiOperation,
  markRejected,
  setGenAiAttributes,
  startRequestTrace,
  type IncomingHeaders,
  type Tracing,
} from './tracing.ts';

export interface TelemetryOptions {
  exporter: 'none' | 'otlp' | 'memory';
  otlpEndpoint: string | null;
  serviceName: string;
  logLevel: string | false;
  /** Where log lines go (default stdout); tests pass a stream to read them. */
  logDestination?: NodeJS.WritableStream | null;
}

export interface MetricsSlots {
  slotsInUse: (channelId: string) => Promise<number>;
  channels: () => string[];
}

export interface Telemetry {
  logger: FastifyBaseLogger;
  tracing: Tracing;
  metrics: GatewayMetrics & {
    limiterDegraded(on: boolean): void;
    channelCooling(channelId: string, cooling: boolean): void;
  };
  observe(
    requestId: string,
    route: string,
    method: string,
    headers: IncomingHeaders,
    version: string,
  ): RequestObserver;
  /** ok: true a successful reload, false a failed one, null the initial load. */
  configVersion(version: string, ok: boolean | null): void;
  /** GET /metrics on the main port (404 when metrics are off or on their own port). */
  registerMetricsRoute(
    app: FastifyInstance,
    settings: () => GatewayEntry['metrics'],
    slots: MetricsSlots,
  ): void;
  /** GET /metrics on a separate port (gateway.metrics.port), so it need not be exposed with /v1. */
  startMetricsServer(
    host: string,
    port: number,
    settings: () => GatewayEntry['metrics'],
    slots: MetricsSlots,
  ): Promise<{ url: string; close(): Promise<void> }>;
  shutdown(): Promise<void>;
}

const REJECTED: Record<RejectedLayer, RejectedBy> = {
  auth: 'auth',
  blacklist: 'blacklist',
  validation: 'validation',
  routing: 'routing',
  permission: 'auth',
  rpm: 'rpm',
  balance: 'balance',
  capacity: 'capacity',
};

/** Route name → endpoint kind, for gen_ai.operation.name (bounded: the registry's routes). */
const KIND_BY_ROUTE: Record<string, EndpointKind> = {
  'POST /v1/chat/completions': 'chat',
  'POST /pg/chat/completions': 'chat',
  'POST /v1/messages': 'messages',
  'POST /v1/responses': 'responses',
  'POST /v1/embeddings': 'embeddings',
  'POST /v1/images/generations': 'images_generations',
  'POST /v1/completions': 'completions',
};

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

export function createTelemetry(opts: TelemetryOptions): Telemetry {
  const logger = (opts.logLevel === false
    ? pino({ enabled: false })
    : opts.logDestination
      ? pino(loggerOptions(opts.logLevel), opts.logDestination)
      : pino(loggerOptions(opts.logLevel))) as unknown as FastifyBaseLogger;
  let currentVersion = '';
  const tracing = createTracing({
    exporter: opts.exporter,
    otlpEndpoint: opts.otlpEndpoint,
    serviceName: opts.serviceName,
    configVersion: () => currentVersion,
  });
  const base = createGatewayMetrics();
  const metrics = Object.assign(base, {
    limiterDegraded(on: boolean): void {
      base.limiterDegraded.labels().set(on ? 1 : 0);
      if (on) base.redisErrors.labels().inc();
    },
    channelCooling(channelId: string, cooling: boolean): void {
      base.channelCooldown.labels(channelId).set(cooling ? 1 : 0);
    },
  });

  async function scrape(
    authorization: string | undefined,
    s: GatewayEntry['metrics'],
    slots: MetricsSlots,
  ): Promise<{ status: number; contentType: string; body: string }> {
    if (s.token !== null) {
      const given =
        typeof authorization === 'string' && authorization.startsWith('Bearer ')
          ? authorization.slice(7)
          : '';
      if (!timingSafeEqual(digest(given), digest(s.token))) {
        return {
          status: 401,
          contentType: 'text/plain',
          body: 'metrics need the metrics bearer token\n',
        };
      }
    }
    for (const id of slots.channels())
      base.channelSlotsInUse.labels(id).set(await slots.slotsInUse(id));
    return { status: 200, contentType: PROMETHEUS_CONTENT_TYPE, body: base.registry.render() };
  }

  function observe(
    requestId: string,
    route: string,
    method: string,
    headers: IncomingHeaders,
    version: string,
  ): RequestObserver {
    const started = performance.now();
    const trace = startRequestTrace(
      tracing,
      route,
      tracing.extractContext(headers),
      method,
      route,
      route.slice(route.indexOf(' ') + 1),
      requestId,
    );
    let admission: Span | null = trace.startAdmission();
    let facts: RequestFacts = { accountId: null, keyId: null, model: null };
    let settled: SettledFacts | null = null;
    let firstChunkMs: number | null = null;
    let finished = false;
    let settledDone = false;
    let status = 0;
    const endAdmission = (): void => {
      admission?.end();
      admission = null;
    };
    const writeAccessLine = (): void => {
      const model = settled?.model ?? facts.model ?? '';
      const channel = settled?.channelId ?? '';
      const statusText = String(status);
      base.requests.labels(route, model, channel, statusText).inc();
      base.requestDuration
        .labels(route, model, statusText)
        .observe((performance.now() - started) / 1000);
      logger.info(
        accessLogLine({
          reqId: requestId,
          route,
          model: model === '' ? null : model,
          channel: channel === '' ? null : channel,
          status,
          usage: settled?.usage ?? null,
          costNano: settled?.costNano ?? null,
          latencyMs: Math.round(performance.now() - started),
          accountId: facts.accountId,
          keyId: facts.keyId,
        }),
        'request',
      );
    };
    return {
      identify(f) {
        facts = {
          accountId: f.accountId ?? facts.accountId,
          keyId: f.keyId ?? facts.keyId,
          model: f.model ?? facts.model,
        };
      },
      admitted() {
        endAdmission();
      },
      rejected(layer) {
        const by = REJECTED[layer];
        base.rejections.labels(by).inc();
        if (admission !== null) {
          markRejected(admission, trace.span, by);
          endAdmission();
        }
      },
      attempt(channelId, protocol, n) {
        endAdmission();
        const span = trace.startUpstreamAttempt(channelId, protocol, n);
        return {
          end(outcome: AttemptOutcome, httpStatus: number | null) {
            base.upstreamAttempts.labels(channelId, outcome).inc();
            endUpstreamAttempt(span, httpStatus, outcome);
          },
        };
      },
      firstChunk(channelId) {
        firstChunkMs = performance.now() - started;
        if (facts.model !== null)
          base.timeToFirstToken.labels(facts.model, channelId).observe(firstChunkMs / 1000);
      },
      settled(f) {
        settled = f;
        const span = trace.startSettlement();
        if (f.usage !== null) {
          base.tokens.labels(f.model, 'input').inc(f.usage.inputTokens);
          base.tokens.labels(f.model, 'cache_hit').inc(f.usage.cacheHitTokens);
          base.tokens.labels(f.model, 'output').inc(f.usage.outputTokens);
        }
        addCostNano(base.costYuan.labels(f.model), f.costNano);
        if (trace.recording) {
          setGenAiAttributes(trace.span, {
            operation: genAiOperation(KIND_BY_ROUTE[route] ?? 'chat'),
            providerName: f.provider ?? 'unknown',
            requestModel: f.model,
            responseModel: f.upstreamModel,
            inputTokens: f.usage?.inputTokens ?? 0,
            cacheHitTokens: f.usage?.cacheHitTokens ?? 0,
            outputTokens: f.usage?.outputTokens ?? 0,
            timeToFirstChunkMs: firstChunkMs,
            accountId: facts.accountId ?? '',
            keyId: facts.keyId ?? '',
            channelId: f.channelId,
            costNano: f.costNano,
            configVersion: version,
          });
          span.setAttribute('switchyard.settlement.status', f.status);
        }
        span.end();
        settledDone = true;
        // Streams settle after their response finished: the request span closes here then.
        if (finished) {
          trace.end(status);
          writeAccessLine();
        }
      },
      finish(httpStatus) {
        if (finished) return;
        finished = true;
        status = httpStatus;
        endAdmission();
        // A response whose settlement is still being written closes its span when that ends.
        if (settledDone || httpStatus !== 200) {
          trace.end(status);
          writeAccessLine();
        }
      },
    };
  }

  return {
    logger,
    tracing,
    metrics,
    observe,
    configVersion(version, ok) {
      currentVersion = version;
      if (ok === null) base.setConfigVersion(version);
      else base.recordReload(ok ? 'success' : 'failure', version, Date.now());
    },
    registerMetricsRoute(app, settings, slots) {
      app.get('/metrics', async (req, reply) => {
        const s = settings();
        if (!s.enabled || s.port !== null) {
          const where = s.enabled ? `port ${s.port}` : 'nowhere (metrics.enabled is false)';
          reply.code(404).send({
            error: {
              message: `metrics are served on ${where}`,
              type: 'switchyard_api_error',
              code: 'not_found',
              request_id: req.id,
            },
          });
          return;
        }
        const r = await scrape(req.headers.authorization, s, slots);
        reply.code(r.status).header('content-type', r.contentType).send(r.body);
      });
    },
    async startMetricsServer(host, port, settings, slots) {
      const server = createServer((req, res) => {
        if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
          res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics here\n');
          return;
        }
        scrape(req.headers.authorization, settings(), slots).then(
          (r) => res.writeHead(r.status, { 'content-type': r.contentType }).end(r.body),
          () => res.writeHead(500).end(),
        );
      });
      await new Promise<void>((resolve) => server.listen(port, host, resolve));
      const address = server.address() as AddressInfo;
      return {
        url: `http://${host}:${address.port}/metrics`,
        close: () => new Promise<void>((resolve) => server.close(() => resolve())),
      };
    },
    shutdown: () => tracing.shutdown(),
  };
}
