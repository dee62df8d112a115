// Builds a running gateway from a config directory: compile, open the store and limiter, start the
// key cache, the demo upstream (when a channel uses builtin:demo), the app and the hot reloader.
// `switchyard serve`, the tests and the benchmark all start the gateway through this one function.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { registerAdminRoutes } from './admin/register-admin-routes.ts';
import { formatDiagnostic, sortDiagnostics, ConfigError } from './config/diagnostics.ts';
import { TableHolder } from './config/reloader.ts';
import { compileDir } from './config/source.ts';
import { startDemoUpstream } from './demo/demo-upstream.ts';
import { buildApp } from './http/app.ts';
import { loopTurnCount } from './http/path-turns.ts';
import { createLimiter } from './limits/create-limiter.ts';
import type { GatewayLimiter } from './limits/resilient-limiter.ts';
import { ChannelHealth } from './relay/channel-health.ts';
import type { GatewayContext, RelayOptions } from './relay/context.ts';
import { PendingWork } from './relay/pending-work.ts';
import { Upstreams } from './relay/upstreams.ts';
import { KeyCache } from './store/key-cache.ts';
import { openStore } from './store/open-store.ts';
import type { Store } from './store/store.ts';
import type { RoutingTable } from './table/types.ts';
import { createTelemetry, type Telemetry } from './telemetry/gateway-telemetry.ts';
import { loadAllocatorTrim } from './telemetry/allocator-trim.ts';
import { MemoryTrimmer, processProbe } from './telemetry/memory-trimmer.ts';
import { RequestTraffic } from './telemetry/request-traffic.ts';

export interface GatewayOptions {
  configDir: string;
  /** Overrides gateway.listen.port (0: an ephemeral port). */
  port?: number | null;
  host?: string | null;
  /** Overrides gateway.store (tests: a shared in-memory store, or a pg schema URL). */
  store?: Store | null;
  /** Overrides the limiter (tests with a short RPM window, or shared Redis). */
  limiter?: GatewayLimiter | null;
  /** Watch config/ and hot-reload (default true). */
  watch?: boolean;
  /** pino level, or false for no logs (default: 'info'). */
  logLevel?: string | false;
  /** Where logs go (default stdout). */
  logDestination?: NodeJS.WritableStream | null;
  relay?: Partial<RelayOptions>;
  /** Tracing exporter override: 'memory' in tests. */
  tracing?: 'none' | 'otlp' | 'memory' | null;
  keyPollMs?: number;
  /** Store heartbeat (0 turns it off; default 5 s). */
  heartbeatMs?: number;
}

export interface Gateway {
  app: FastifyInstance;
  url: string;
  /** The separate metrics listener, when gateway.metrics.port is set. */
  metricsUrl: string | null;
  ctx: GatewayContext;
  tables: TableHolder;
  telemetry: Telemetry;
  close(): Promise<void>;
}

const mb = (bytes: number): number => Math.round(bytes / 1e5) / 10;

/**
 * How long a Postgres gateway's idle lease may keep its slack while its account has room for
 * other instances (decision 0044): past the bench's ~4.6 s between a side's turns and a chat
 * user's reading pause, short enough that an account left alone shows nothing leased soon after.
 */
const LEASE_IDLE_KEEP_MS = 60_000;

function usesDemo(table: RoutingTable): boolean {
  for (const ch of table.channels.values()) if (ch.baseUrl === 'builtin:demo') return true;
  return false;
}

export async function createGateway(opts: GatewayOptions): Promise<Gateway> {
  const compiled = await compileDir(opts.configDir, 'serve');
  if (compiled.table === null) throw new ConfigError(sortDiagnostics(compiled.diagnostics));
  const table = compiled.table;
  const g = table.gateway;
  const telemetry = createTelemetry({
    exporter: opts.tracing ?? g.telemetry.exporter,
    otlpEndpoint: g.telemetry.otlpEndpoint,
    serviceName: g.telemetry.serviceName,
    logLevel: opts.logLevel === undefined ? 'info' : opts.logLevel,
    logDestination: opts.logDestination ?? null,
  });
  const log = telemetry.logger;
  for (const d of sortDiagnostics(compiled.diagnostics)) log.warn(formatDiagnostic(d));

  const ownsStore = opts.store === undefined || opts.store === null;
  const store =
    opts.store ??
    (await openStore({
      url: g.store.url,
      dataDir: g.store.dataDir,
      // The embedded store's data directory is one process's: its leases keep their slack
      // through idle spells (decision 0043). On Postgres an idle lease keeps it while the
      // account has room for other instances, up to a minute (decision 0044).
      leases: g.store.url === null ? { idleReturnMs: null } : { idleKeepMs: LEASE_IDLE_KEEP_MS },
      workerThread: true,
      ...(opts.heartbeatMs === undefined ? {} : { heartbeatMs: opts.heartbeatMs }),
    }));
  const ownsLimiter = opts.limiter === undefined || opts.limiter === null;
  const limiter =
    opts.limiter ??
    createLimiter({
      redisUrl: g.redis.url,
      onUnreachable: g.redis.onUnreachable,
      leaseMs: g.redis.leaseMs,
      onStateChange: (state, error) => {
        telemetry.metrics.limiterDegraded(state === 'degraded');
        if (state === 'degraded')
          log.error(
            { err: error },
            `Redis unreachable: limits ${g.redis.onUnreachable === 'fail_open' ? 'fall back to this process' : 'refuse requests (503)'}`,
          );
        else log.info('Redis reachable again: shared limits restored');
      },
    });
  const keys = new KeyCache(store, opts.keyPollMs === undefined ? {} : { pollMs: opts.keyPollMs });
  await keys.start();

  const upstreams = new Upstreams();
  const demo = usesDemo(table) ? await startDemoUpstream() : null;
  if (demo !== null) upstreams.demoBaseUrl = demo.url;

  const health = new ChannelHealth();
  health.onChange = (id, cooling) => telemetry.metrics.channelCooling(id, cooling);

  const tables = new TableHolder(opts.configDir, table, {
    onSwap: (next, previous) => {
      upstreams.prune(next);
      telemetry.configVersion(next.version, true);
      log.info({ version: next.version, previous: previous.version }, 'config reloaded');
    },
    onFailure: (message) => {
      telemetry.configVersion(tables.current.version, false);
      log.error(
        { version: tables.current.version },
        `config reload failed; still serving the previous table:\n${message}`,
      );
    },
  });
  telemetry.configVersion(table.version, null);

  const ctx: GatewayContext = {
    tables,
    store,
    keys,
    limiter,
    upstreams,
    health,
    observe: (requestId, route, method, headers) =>
      telemetry.observe(requestId, route, method, headers, tables.current.version),
    log,
    relay: { maxAttempts: opts.relay?.maxAttempts ?? 3, backoffMs: opts.relay?.backoffMs ?? 25 },
    inflight: new PendingWork(),
  };

  const slots = {
    slotsInUse: (id: string) => limiter.slotsInUse(id),
    channels: () =>
      [...tables.current.channels.values()].filter((c) => c.capacity !== null).map((c) => c.id),
  };
  const app = buildApp(ctx, { logger: log, bodyLimit: g.bodyLimitBytes }, (app) => {
    app.get('/health', async () => ({
      status: 'ok',
      config: tables.status,
      store: store.backend,
      limiter: limiter.state(),
      channels: health.snapshot(Date.now()),
    }));
    telemetry.registerMetricsRoute(app, () => tables.current.gateway.metrics, {
      slotsInUse: async (id) => limiter.slotsInUse(id),
      channels: () =>
        [...tables.current.channels.values()].filter((c) => c.capacity !== null).map((c) => c.id),
    });
    registerAdminRoutes(app, {
      store,
      limiter,
      table: () => tables.current,
      status: () => ({
        ...tables.status,
        health: health.snapshot(Date.now()),
        limiter: limiter.state(),
        instance: store.instanceId,
      }),
    });
  });

  await app.listen({ host: opts.host ?? g.listen.host, port: opts.port ?? g.listen.port });
  const address = app.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  if (opts.watch !== false) await tables.watch();
  const metricsServer =
    g.metrics.enabled && g.metrics.port !== null
      ? await telemetry.startMetricsServer(
          opts.host ?? g.listen.host,
          g.metrics.port,
          () => tables.current.gateway.metrics,
          slots,
        )
      : null;

  const allocator = loadAllocatorTrim();
  const probe = processProbe(new RequestTraffic(app.server), allocator.trim);
  if (probe === null) log.warn('memory trim unavailable: this Node cannot collect on request');
  else if (allocator.reason !== null) {
    log.warn(`memory trim without the allocator trim: ${allocator.reason}`);
  }
  const loopTurns = loopTurnCount();
  if (loopTurns.reason !== null) {
    log.warn(`path turns mark each turn with a setImmediate: ${loopTurns.reason}`);
  }
  const trimmer =
    probe === null
      ? null
      : new MemoryTrimmer(
          () => tables.current.gateway.memoryTrim,
          probe,
          (t) => {
            telemetry.metrics.memoryTrims.labels().inc();
            telemetry.metrics.memoryTrimSeconds.labels().inc(t.pauseMs / 1000);
            log.info(
              {
                rssBeforeMB: mb(t.rssBeforeBytes),
                rssAfterMB: mb(t.rssAfterBytes),
                pauseMs: Math.round(t.pauseMs),
                allocatorReleased: t.allocatorReleased,
              },
              'idle after a burst or start-up: memory returned',
            );
          },
        );
  trimmer?.start();

  let closed = false;
  return {
    app,
    url: `http://${host}:${address.port}`,
    metricsUrl: metricsServer?.url ?? null,
    ctx,
    tables,
    telemetry,
    async close() {
      if (closed) return;
      closed = true;
      trimmer?.stop();
      await tables.close();
      await metricsServer?.close();
      await app.close();
      // Settlements waiting for a group commit go now, not up to 200 ms later (decision 0026).
      await ctx.store.flush();
      await ctx.inflight.idle();
      keys.stop();
      await upstreams.close();
      await demo?.close();
      if (ownsLimiter) await limiter.close();
      if (ownsStore) await store.close();
      await telemetry.shutdown();
    },
  };
}
