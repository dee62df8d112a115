// /metrics as a Prometheus scraper reads it: the registry's text output parsed strictly, and the
// gateway's metric set with its bounded labels.

import { describe, expect, it } from 'vitest';
import {
  REQUEST_DURATION_BUCKETS,
  addCostNano,
  createGatewayMetrics,
  nanoToYuanNumber,
} from '../../src/telemetry/gateway-metrics.ts';
import { PROMETHEUS_CONTENT_TYPE, Registry } from '../../src/telemetry/metrics.ts';
import { parsePrometheusText, sampleValue } from './prom-text.ts';

describe('the Prometheus registry', () => {
  it('renders counters and gauges with HELP and TYPE, and unlabelled ones at 0 from the start', () => {
    const r = new Registry();
    const hits = r.counter<[route: string, status: string]>('demo_hits_total', 'Hits.', [
      'route',
      'status',
    ]);
    r.counter('demo_errors_total', 'Errors.', []);
    const temp = r.gauge<[room: string]>('demo_temperature', 'Temperature.', ['room']);

    hits.labels('/v1/chat', '200').inc();
    hits.labels('/v1/chat', '200').inc(2.5);
    hits.labels('/v1/chat', '500').inc();
    temp.labels('lab').set(21);
    temp.labels('lab').inc(2);
    temp.labels('lab').dec(0.5);
    temp.labels('attic').set(-3);

    const families = parsePrometheusText(r.render());
    expect(families.get('demo_hits_total')).toMatchObject({ type: 'counter', help: 'Hits.' });
    expect(sampleValue(families, 'demo_hits_total', { route: '/v1/chat', status: '200' })).toBe(
      3.5,
    );
    expect(sampleValue(families, 'demo_hits_total', { status: '500' })).toBe(1);
    expect(families.get('demo_errors_total')?.samples).toEqual([
      { name: 'demo_errors_total', labels: {}, value: 0 },
    ]);
    expect(families.get('demo_temperature')?.type).toBe('gauge');
    expect(sampleValue(families, 'demo_temperature', { room: 'lab' })).toBe(22.5);
    expect(sampleValue(families, 'demo_temperature', { room: 'attic' })).toBe(-3);
  });

  it('hands back the same bound child for the same label values', () => {
    const r = new Registry();
    const c = r.counter<[a: string, b: string]>('demo_total', 'Demo.', ['a', 'b']);
    const bound = c.labels('x', 'y');
    expect(c.labels('x', 'y')).toBe(bound);
    expect(c.labels('x', 'z')).not.toBe(bound);
    bound.inc();
    c.labels('x', 'y').inc();
    expect(bound.value).toBe(2);
  });

  it('renders histogram buckets cumulatively with +Inf, _sum and _count', () => {
    const r = new Registry();
    const h = r.histogram<[model: string]>('demo_seconds', 'Latency.', ['model'], [0.1, 0.5, 1, 5]);
    const child = h.labels('glm-4');
    for (const v of [0.05, 0.3, 0.5, 0.9, 7, 1000]) child.observe(v);

    const text = r.render();
    const families = parsePrometheusText(text);
    expect(families.get('demo_seconds')?.type).toBe('histogram');
    const buckets = families
      .get('demo_seconds')
      ?.samples.filter((s) => s.name === 'demo_seconds_bucket')
      .map((s) => [s.labels.le, s.value]);
    // le is "less than or equal": 0.5 lands in the 0.5 bucket.
    expect(buckets).toEqual([
      ['0.1', 1],
      ['0.5', 3],
      ['1', 4],
      ['5', 4],
      ['+Inf', 6],
    ]);
    expect(sampleValue(families, 'demo_seconds_sum', { model: 'glm-4' })).toBeCloseTo(1008.75, 9);
    expect(sampleValue(families, 'demo_seconds_count', { model: 'glm-4' })).toBe(6);
    expect(text).toContain('demo_seconds_bucket{model="glm-4",le="+Inf"} 6\n');
  });

  it('escapes quotes, backslashes and newlines in label values and help text', () => {
    const r = new Registry();
    const c = r.counter<[model: string]>('demo_total', 'Line one\nand a \\ backslash.', ['model']);
    const nasty = 'say "hi"\\path\nnext';
    c.labels(nasty).inc();

    const text = r.render();
    expect(text).toContain('demo_total{model="say \\"hi\\"\\\\path\\nnext"} 1\n');
    expect(text).toContain('# HELP demo_total Line one\\nand a \\\\ backslash.\n');
    const families = parsePrometheusText(text);
    expect(families.get('demo_total')?.help).toBe('Line one\nand a \\ backslash.');
    expect(sampleValue(families, 'demo_total', { model: nasty })).toBe(1);
  });

  it('reads callback gauges at scrape time, and a failing callback costs only its own samples', () => {
    const r = new Registry();
    let inUse = 3;
    r.gaugeCallback<[pool: string]>(
      'demo_pool_in_use',
      'Pool slots in use.',
      ['pool'],
      (sample) => {
        sample(inUse, 'main');
        sample(1, 'spare');
      },
    );
    r.gaugeCallback('demo_broken', 'Always fails.', [], () => {
      throw new Error('backend gone');
    });
    r.counter('demo_after_total', 'Rendered after the broken one.', []).labels().inc(4);

    let families = parsePrometheusText(r.render());
    expect(sampleValue(families, 'demo_pool_in_use', { pool: 'main' })).toBe(3);
    expect(sampleValue(families, 'demo_pool_in_use', { pool: 'spare' })).toBe(1);
    inUse = 7;
    families = parsePrometheusText(r.render());
    expect(sampleValue(families, 'demo_pool_in_use', { pool: 'main' })).toBe(7);
    expect(families.get('demo_broken')?.samples).toEqual([]);
    expect(sampleValue(families, 'demo_after_total')).toBe(4);
  });

  it('writes non-finite values the way Prometheus parses them', () => {
    const r = new Registry();
    const g = r.gauge<[k: string]>('demo_gauge', 'Odd values.', ['k']);
    g.labels('up').set(Infinity);
    g.labels('down').set(-Infinity);
    g.labels('nan').set(NaN);
    const text = r.render();
    expect(text).toContain('demo_gauge{k="up"} +Inf\n');
    expect(text).toContain('demo_gauge{k="down"} -Inf\n');
    expect(text).toContain('demo_gauge{k="nan"} NaN\n');
    expect(parsePrometheusText(text).get('demo_gauge')?.samples).toHaveLength(3);
  });

  it('drops a removed label set from the output', () => {
    const r = new Registry();
    const g = r.gauge<[version: string]>('demo_info', 'Info.', ['version']);
    g.labels('a').set(1);
    g.labels('b').set(1);
    g.remove('a');
    const samples = parsePrometheusText(r.render()).get('demo_info')?.samples;
    expect(samples?.map((s) => s.labels.version)).toEqual(['b']);
    expect(g.labels('a').value).toBe(0);
  });

  it('refuses bad definitions and a negative counter increment', () => {
    const r = new Registry();
    r.counter('demo_total', 'Demo.', []);
    expect(() => r.counter('demo_total', 'Again.', [])).toThrow(/already registered/);
    expect(() => r.gauge('demo-bad', 'Dash.', [])).toThrow(/invalid metric name/);
    expect(() => r.gauge('demo_g', 'Bad label.', ['__reserved'])).toThrow(/invalid label name/);
    expect(() => r.gauge('demo_h', 'Dup.', ['a', 'a'])).toThrow(/duplicate label/);
    expect(() => r.histogram('demo_le', 'Le.', ['le'], [1])).toThrow(/"le"/);
    expect(() => r.histogram('demo_order', 'Order.', [], [1, 1])).toThrow(/increasing/);
    const c = r.counter<[a: string]>('demo2_total', 'Demo.', ['a']);
    expect(() => c.labels('x').inc(-1)).toThrow(RangeError);
    expect(PROMETHEUS_CONTENT_TYPE).toBe('text/plain; version=0.0.4; charset=utf-8');
  });
});

describe("the gateway's metrics", () => {
  const FAMILIES: Array<[string, string]> = [
    ['switchyard_requests_total', 'counter'],
    ['switchyard_request_duration_seconds', 'histogram'],
    ['switchyard_upstream_attempts_total', 'counter'],
    ['switchyard_time_to_first_token_seconds', 'histogram'],
    ['switchyard_tokens_total', 'counter'],
    ['switchyard_cost_yuan_total', 'counter'],
    ['switchyard_rejections_total', 'counter'],
    ['switchyard_channel_cooldown', 'gauge'],
    ['switchyard_channel_slots_in_use', 'gauge'],
    ['switchyard_config_version_info', 'gauge'],
    ['switchyard_config_reloads_total', 'counter'],
    ['switchyard_config_last_reload_timestamp_seconds', 'gauge'],
    ['switchyard_store_errors_total', 'counter'],
    ['switchyard_redis_errors_total', 'counter'],
    ['switchyard_limiter_degraded', 'gauge'],
    ['switchyard_memory_trims_total', 'counter'],
    ['switchyard_memory_trim_seconds_total', 'counter'],
  ];

  it('exposes every family with its type, and the unlabelled ones at 0 before any traffic', () => {
    const m = createGatewayMetrics();
    const families = parsePrometheusText(m.registry.render());
    expect([...families.values()].map((f) => [f.name, f.type])).toEqual(FAMILIES);
    expect(sampleValue(families, 'switchyard_store_errors_total')).toBe(0);
    expect(sampleValue(families, 'switchyard_redis_errors_total')).toBe(0);
    expect(sampleValue(families, 'switchyard_limiter_degraded')).toBe(0);
    expect(sampleValue(families, 'switchyard_memory_trims_total')).toBe(0);
  });

  it('counts a served request with its tokens, cost and latency', () => {
    const m = createGatewayMetrics();
    // Bound once (as the compiled table would), then used per request.
    const requests = m.requests.labels('/v1/chat/completions', 'deepseek-chat', 'ds-a', '200');
    const duration = m.requestDuration.labels('/v1/chat/completions', 'deepseek-chat', '200');
    const cost = m.costYuan.labels('deepseek-chat');
    for (let i = 0; i < 2; i++) {
      requests.inc();
      duration.observe(1.2);
      m.upstreamAttempts.labels('ds-a', 'ok').inc();
      m.timeToFirstToken.labels('deepseek-chat', 'ds-a').observe(0.4);
      m.tokens.labels('deepseek-chat', 'input').inc(1000);
      m.tokens.labels('deepseek-chat', 'cache_hit').inc(500);
      m.tokens.labels('deepseek-chat', 'output').inc(200);
      addCostNano(cost, 3_850_000n); // ¥0.00385
    }
    m.upstreamAttempts.labels('ds-b', 'http_429').inc();
    m.rejections.labels('rpm').inc();
    m.channelSlotsInUse.labels('ds-a').set(3);
    m.channelCooldown.labels('ds-b').set(1);

    const f = parsePrometheusText(m.registry.render());
    expect(sampleValue(f, 'switchyard_requests_total', { channel: 'ds-a', status: '200' })).toBe(2);
    expect(sampleValue(f, 'switchyard_request_duration_seconds_count', { status: '200' })).toBe(2);
    expect(
      f
        .get('switchyard_request_duration_seconds')
        ?.samples.filter((s) => s.name.endsWith('_bucket')).length,
    ).toBe(REQUEST_DURATION_BUCKETS.length + 1);
    expect(sampleValue(f, 'switchyard_upstream_attempts_total', { outcome: 'ok' })).toBe(2);
    expect(sampleValue(f, 'switchyard_upstream_attempts_total', { outcome: 'http_429' })).toBe(1);
    expect(sampleValue(f, 'switchyard_time_to_first_token_seconds_sum')).toBeCloseTo(0.8, 9);
    expect(sampleValue(f, 'switchyard_tokens_total', { kind: 'cache_hit' })).toBe(1000);
    expect(sampleValue(f, 'switchyard_cost_yuan_total', { model: 'deepseek-chat' })).toBeCloseTo(
      0.0077,
      12,
    );
    expect(sampleValue(f, 'switchyard_rejections_total', { layer: 'rpm' })).toBe(1);
    expect(sampleValue(f, 'switchyard_channel_slots_in_use', { channel: 'ds-a' })).toBe(3);
    expect(sampleValue(f, 'switchyard_channel_cooldown', { channel: 'ds-b' })).toBe(1);
  });

  it('shows only the config version in force, and keeps it when a reload fails', () => {
    const m = createGatewayMetrics();
    m.recordReload('success', 'cfg-aaa', 1_700_000_000_000);
    m.recordReload('success', 'cfg-bbb', 1_700_000_060_000);
    m.recordReload('failure', 'cfg-broken', 1_700_000_120_000);

    const f = parsePrometheusText(m.registry.render());
    expect(f.get('switchyard_config_version_info')?.samples).toEqual([
      { name: 'switchyard_config_version_info', labels: { version: 'cfg-bbb' }, value: 1 },
    ]);
    expect(sampleValue(f, 'switchyard_config_reloads_total', { result: 'success' })).toBe(2);
    expect(sampleValue(f, 'switchyard_config_reloads_total', { result: 'failure' })).toBe(1);
    expect(sampleValue(f, 'switchyard_config_last_reload_timestamp_seconds')).toBe(1_700_000_060);
  });

  it('converts nano-yuan to yuan for the cost counter and ignores refunds', () => {
    expect(nanoToYuanNumber(1_500_000_000n)).toBe(1.5);
    expect(nanoToYuanNumber(1n)).toBe(1e-9);
    const m = createGatewayMetrics();
    const cost = m.costYuan.labels('glm-4');
    addCostNano(cost, -5n);
    addCostNano(cost, 0n);
    expect(cost.value).toBe(0);
  });
});
