// Joins tracing, metrics and logs into what the gateway uses: one RequestObserver per request
// (span tree, metrics, the access line), the config-version gauges, and the /metrics route.
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { pino } from 'pino';
import type { RequestObserver } from '../relay/observer.ts';
import type { GatewayEntry } from '../table/types.ts';
import { createGatewayMetrics, type GatewayMetrics } from './gateway-metrics.ts';
import { loggerOptions } from './logging.ts';
import { PROMETHEUS_CONTENT_TYPE } from './metrics.ts';
import { RequestObservation, type ObservationDeps } from './request-observation.ts';
import { createTracing, startRequestTrace, type IncomingHeaders, type Tracing } from './tracing.ts';

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

  const deps: ObservationDeps = { metrics: base, logger };
  function observe(
    requestId: string,
    route: string,
    method: string,
    headers: IncomingHeaders,
    version: string,
  ): RequestObserver {
    const trace = startRequestTrace(
      tracing,
      route,
      tracing.extractContext(headers),
      method,
      route,
      route.slice(route.indexOf(' ') + 1),
      requestId,
    );
    return new RequestObservation(deps, requestId, route, trace, version);
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
