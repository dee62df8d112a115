// The gateway's metric set, declared in one place with typed label tuples. Every label value is a
// name from the compiled table (route, model, channel), a status code, or a fixed union from
// labels.ts: never a request id, an account, or a key, so series stay bounded by config size.

import { NANO_PER_YUAN } from '../billing/money.ts';
import type { Counter, CounterChild, Gauge, Histogram } from './metrics.ts';
import { Registry } from './metrics.ts';
import type { RejectedBy, ReloadResult, TokenKind, UpstreamOutcome } from './labels.ts';

/**
 * Request latency in seconds: 10 ms (a rejection) to 5 min (a long reasoning stream), about two
 * buckets per doubling where chat requests cluster (0.5–30 s).
 */
export const REQUEST_DURATION_BUCKETS: readonly number[] = [
  0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300,
];

/** Time to first token in seconds: suppliers answer in 0.2–3 s, reasoning models up to a minute. */
export const TTFT_BUCKETS: readonly number[] = [
  0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 60,
];

export interface GatewayMetrics {
  readonly registry: Registry;
  /** status: the HTTP status code as text ('200', '429'). channel: '' when none was chosen. */
  readonly requests: Counter<[route: string, model: string, channel: string, status: string]>;
  readonly requestDuration: Histogram<[route: string, model: string, status: string]>;
  readonly upstreamAttempts: Counter<[channel: string, outcome: UpstreamOutcome]>;
  readonly timeToFirstToken: Histogram<[model: string, channel: string]>;
  readonly tokens: Counter<[model: string, kind: TokenKind]>;
  /** Add with addCostNano(): money stays bigint until this float, which only dashboards read. */
  readonly costYuan: Counter<[model: string]>;
  readonly rejections: Counter<[layer: RejectedBy]>;
  /** 1 while the channel is cooling down after failures, else 0. */
  readonly channelCooldown: Gauge<[channel: string]>;
  readonly channelSlotsInUse: Gauge<[channel: string]>;
  /** Always 1, for the version in force; set it with setConfigVersion(). */
  readonly configVersionInfo: Gauge<[version: string]>;
  readonly configReloads: Counter<[result: ReloadResult]>;
  readonly configLastReloadTimestamp: Gauge;
  readonly storeErrors: Counter;
  readonly redisErrors: Counter;
  /** 1 while the limiter is failing open or closed because Redis is unreachable, else 0. */
  readonly limiterDegraded: Gauge;
  /** Memory-reducing collections run after a burst (src/telemetry/memory-trimmer.ts). */
  readonly memoryTrims: Counter;
  readonly memoryTrimSeconds: Counter;
  /** Moves the info gauge to `version`, dropping the previous version's series. */
  setConfigVersion(version: string): void;
  /** Counts a reload; on success also moves the version and the last-reload timestamp. */
  recordReload(result: ReloadResult, version: string, nowMs: number): void;
}

export function createGatewayMetrics(): GatewayMetrics {
  const r = new Registry();
  // Registered in the order /metrics lists them.
  const requests = r.counter<[route: string, model: string, channel: string, status: string]>(
    'switchyard_requests_total',
    'Requests answered, by route, model, last channel tried and HTTP status.',
    ['route', 'model', 'channel', 'status'],
  );
  const requestDuration = r.histogram<[route: string, model: string, status: string]>(
    'switchyard_request_duration_seconds',
    'Time from request arrival to the last byte of the response.',
    ['route', 'model', 'status'],
    REQUEST_DURATION_BUCKETS,
  );
  const upstreamAttempts = r.counter<[channel: string, outcome: UpstreamOutcome]>(
    'switchyard_upstream_attempts_total',
    'Upstream attempts by channel and outcome.',
    ['channel', 'outcome'],
  );
  const timeToFirstToken = r.histogram<[model: string, channel: string]>(
    'switchyard_time_to_first_token_seconds',
    'Time from request arrival to the first streamed content byte sent to the client.',
    ['model', 'channel'],
    TTFT_BUCKETS,
  );
  const tokens = r.counter<[model: string, kind: TokenKind]>(
    'switchyard_tokens_total',
    'Tokens metered, by model and price kind (input, cache_hit, output).',
    ['model', 'kind'],
  );
  const costYuan = r.counter<[model: string]>(
    'switchyard_cost_yuan_total',
    'Yuan charged, by model (a float for dashboards; the ledger is exact).',
    ['model'],
  );
  const rejections = r.counter<[layer: RejectedBy]>(
    'switchyard_rejections_total',
    'Requests refused before reaching an upstream, by the layer that refused.',
    ['layer'],
  );
  const channelCooldown = r.gauge<[channel: string]>(
    'switchyard_channel_cooldown',
    '1 while the channel is cooling down after failures.',
    ['channel'],
  );
  const channelSlotsInUse = r.gauge<[channel: string]>(
    'switchyard_channel_slots_in_use',
    'Concurrency slots held on the channel: by this process, or with Redis by every instance, blocks lent locally included (decision 0031).',
    ['channel'],
  );
  const configVersionInfo = r.gauge<[version: string]>(
    'switchyard_config_version_info',
    'The content hash of the routing table in force (value is always 1).',
    ['version'],
  );
  const configReloads = r.counter<[result: ReloadResult]>(
    'switchyard_config_reloads_total',
    'Config reloads by result; a failure leaves the previous table serving.',
    ['result'],
  );
  const configLastReloadTimestamp = r.gauge(
    'switchyard_config_last_reload_timestamp_seconds',
    'Unix time of the last successful config load.',
    [],
  );
  const storeErrors = r.counter(
    'switchyard_store_errors_total',
    'Store operations that failed.',
    [],
  );
  const redisErrors = r.counter('switchyard_redis_errors_total', 'Redis commands that failed.', []);
  const limiterDegraded = r.gauge(
    'switchyard_limiter_degraded',
    '1 while limits run degraded because Redis is unreachable.',
    [],
  );

  const memoryTrims = r.counter(
    'switchyard_memory_trims_total',
    'Memory-reducing collections run once the event loop was idle after a burst or start-up.',
    [],
  );
  const memoryTrimSeconds = r.counter(
    'switchyard_memory_trim_seconds_total',
    'Event-loop time spent in those collections.',
    [],
  );

  let currentVersion: string | null = null;
  const setConfigVersion = (version: string): void => {
    if (currentVersion === version) return;
    if (currentVersion !== null) configVersionInfo.remove(currentVersion);
    configVersionInfo.labels(version).set(1);
    currentVersion = version;
  };

  return {
    registry: r,
    requests,
    requestDuration,
    upstreamAttempts,
    timeToFirstToken,
    tokens,
    costYuan,
    rejections,
    channelCooldown,
    channelSlotsInUse,
    configVersionInfo,
    configReloads,
    configLastReloadTimestamp,
    storeErrors,
    redisErrors,
    limiterDegraded,
    memoryTrims,
    memoryTrimSeconds,
    setConfigVersion,
    recordReload(result, version, nowMs) {
      configReloads.labels(result).inc();
      if (result !== 'success') return;
      setConfigVersion(version);
      configLastReloadTimestamp.labels().set(nowMs / 1000);
    },
  };
}

/** nano-yuan → yuan as a float, for metrics only (relative error about 1e-16). */
export function nanoToYuanNumber(nano: bigint): number {
  return Number(nano) / Number(NANO_PER_YUAN);
}

/** Adds a charge in nano-yuan to a switchyard_cost_yuan_total child; negatives are ignored. */
export function addCostNano(child: CounterChild, nano: bigint): void {
  if (nano > 0n) child.inc(nanoToYuanNumber(nano));
}
