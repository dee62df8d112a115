// The per-request span tree as an OTLP backend would receive it: names, parents, attributes,
// the client's W3C trace context, and spans that record nothing when tracing is off.

import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import type { Tracing } from '../../src/telemetry/tracing.ts';
import {
  SPAN_ADMISSION,
  SPAN_CHAT_COMPLETIONS,
  SPAN_SETTLEMENT,
  SPAN_UPSTREAM_ATTEMPT,
  createTracing,
  endUpstreamAttempt,
  genAiOperation,
  markRejected,
  serverSpanName,
  setGenAiAttributes,
  startRequestTrace,
} from '../../src/telemetry/tracing.ts';

const CLIENT_TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const CLIENT_SPAN_ID = 'b7ad6b7169203331';
const ROUTE = '/v1/chat/completions';

const open: Tracing[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((t) => t.shutdown()));
});

function memoryTracing(configVersion = 'cfg-1a2b'): Tracing {
  const t = createTracing({
    exporter: 'memory',
    otlpEndpoint: null,
    serviceName: 'switchyard-test',
    configVersion: () => configVersion,
  });
  open.push(t);
  return t;
}

function finished(t: Tracing): ReadableSpan[] {
  if (t.memoryExporter === null) throw new Error('not a memory tracing');
  return t.memoryExporter.getFinishedSpans();
}

function byName(spans: ReadableSpan[], name: string): ReadableSpan[] {
  return spans.filter((s) => s.name === name);
}

function only(spans: ReadableSpan[], name: string): ReadableSpan {
  const found = byName(spans, name);
  expect(found).toHaveLength(1);
  return found[0] as ReadableSpan;
}

describe('tracing with the memory exporter', () => {
  it('exports a request as one server span with admission, attempts and settlement under it', () => {
    const t = memoryTracing();
    const name = serverSpanName('POST', ROUTE);
    expect(name).toBe(SPAN_CHAT_COMPLETIONS);
    const rt = startRequestTrace(t, name, ROOT_CONTEXT, 'POST', ROUTE, ROUTE, 'req_123');

    rt.startAdmission().end();
    endUpstreamAttempt(rt.startUpstreamAttempt('deepseek-a', 'deepseek', 1), 503, 'http_5xx');
    endUpstreamAttempt(rt.startUpstreamAttempt('deepseek-b', 'deepseek', 2), 200, 'ok');
    rt.startSettlement().end();
    setGenAiAttributes(rt.span, {
      operation: genAiOperation('chat'),
      providerName: 'deepseek',
      requestModel: 'deepseek-chat',
      responseModel: 'deepseek-chat-0324',
      inputTokens: 120,
      cacheHitTokens: 80,
      outputTokens: 45,
      timeToFirstChunkMs: 350,
      accountId: 'acct_1',
      keyId: 'key_9',
      channelId: 'deepseek-b',
      costNano: 1_234_500n,
      configVersion: 'cfg-1a2b',
    });
    rt.end(200);

    const spans = finished(t);
    expect(spans).toHaveLength(5);
    const root = only(spans, SPAN_CHAT_COMPLETIONS);
    expect(root.kind).toBe(SpanKind.SERVER);
    expect(root.parentSpanContext).toBeUndefined();
    expect(root.resource.attributes['service.name']).toBe('switchyard-test');
    expect(root.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': ROUTE,
      'url.path': ROUTE,
      'http.response.status_code': 200,
      'switchyard.request_id': 'req_123',
      'switchyard.config.version': 'cfg-1a2b',
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'deepseek',
      'gen_ai.request.model': 'deepseek-chat',
      'gen_ai.response.model': 'deepseek-chat-0324',
      // The conventions count cached tokens inside input_tokens.
      'gen_ai.usage.input_tokens': 200,
      'gen_ai.usage.cache_read.input_tokens': 80,
      'gen_ai.usage.output_tokens': 45,
      'gen_ai.response.time_to_first_chunk': 0.35,
      'switchyard.account.id': 'acct_1',
      'switchyard.key.id': 'key_9',
      'switchyard.channel.id': 'deepseek-b',
      'switchyard.cost_yuan': '0.0012345',
    });
    expect(root.status.code).toBe(SpanStatusCode.UNSET);

    const rootId = root.spanContext().spanId;
    const traceId = root.spanContext().traceId;
    for (const child of spans.filter((s) => s !== root)) {
      expect(child.parentSpanContext?.spanId).toBe(rootId);
      expect(child.spanContext().traceId).toBe(traceId);
    }
    expect(only(spans, SPAN_ADMISSION).kind).toBe(SpanKind.INTERNAL);
    expect(only(spans, SPAN_SETTLEMENT).kind).toBe(SpanKind.INTERNAL);

    const attempts = byName(spans, SPAN_UPSTREAM_ATTEMPT);
    expect(attempts.map((a) => a.kind)).toEqual([SpanKind.CLIENT, SpanKind.CLIENT]);
    const [failed, ok] = attempts as [ReadableSpan, ReadableSpan];
    expect(failed.attributes).toEqual({
      'switchyard.channel.id': 'deepseek-a',
      'gen_ai.provider.name': 'deepseek',
      'switchyard.attempt': 1,
      'http.response.status_code': 503,
      'switchyard.retry_reason': 'http_5xx',
    });
    expect(failed.status.code).toBe(SpanStatusCode.ERROR);
    expect(ok.attributes['switchyard.retry_reason']).toBeUndefined();
    expect(ok.attributes['http.response.status_code']).toBe(200);
    expect(ok.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('says on the admission span and the request span which layer rejected a request', () => {
    const t = memoryTracing();
    const rt = startRequestTrace(
      t,
      SPAN_CHAT_COMPLETIONS,
      ROOT_CONTEXT,
      'POST',
      ROUTE,
      ROUTE,
      'r2',
    );
    const admission = rt.startAdmission();
    markRejected(admission, rt.span, 'rpm');
    admission.end();
    rt.end(429);

    const spans = finished(t);
    expect(spans.map((s) => s.name).sort()).toEqual([SPAN_CHAT_COMPLETIONS, SPAN_ADMISSION].sort());
    const adm = only(spans, SPAN_ADMISSION);
    expect(adm.attributes['switchyard.rejected_by']).toBe('rpm');
    expect(adm.status).toEqual({ code: SpanStatusCode.ERROR, message: 'rejected by rpm' });
    const root = only(spans, SPAN_CHAT_COMPLETIONS);
    expect(root.attributes['switchyard.rejected_by']).toBe('rpm');
    expect(root.attributes['http.response.status_code']).toBe(429);
    // A 4xx is the client's problem: not an error on a SERVER span.
    expect(root.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('marks a request answered with a 5xx as an error, and an attempt with no response has no status code', () => {
    const t = memoryTracing();
    const rt = startRequestTrace(
      t,
      SPAN_CHAT_COMPLETIONS,
      ROOT_CONTEXT,
      'POST',
      ROUTE,
      ROUTE,
      'r3',
    );
    endUpstreamAttempt(rt.startUpstreamAttempt('kimi-a', 'moonshot', 1), null, 'timeout');
    rt.end(504);

    const spans = finished(t);
    const attempt = only(spans, SPAN_UPSTREAM_ATTEMPT);
    expect(attempt.attributes['http.response.status_code']).toBeUndefined();
    expect(attempt.attributes['switchyard.retry_reason']).toBe('timeout');
    expect(only(spans, SPAN_CHAT_COMPLETIONS).status.code).toBe(SpanStatusCode.ERROR);
  });

  it("continues the client's trace when the request carries a W3C traceparent", () => {
    const t = memoryTracing();
    const parent = t.extractContext({
      traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01`,
      tracestate: 'congo=t61rcWkgMzE',
      'content-type': 'application/json',
    });
    const rt = startRequestTrace(t, SPAN_CHAT_COMPLETIONS, parent, 'POST', ROUTE, ROUTE, 'r4');
    rt.startAdmission().end();
    rt.end(200);

    const spans = finished(t);
    const root = only(spans, SPAN_CHAT_COMPLETIONS);
    expect(root.spanContext().traceId).toBe(CLIENT_TRACE_ID);
    expect(root.parentSpanContext?.spanId).toBe(CLIENT_SPAN_ID);
    expect(root.parentSpanContext?.isRemote).toBe(true);
    expect(root.spanContext().traceState?.serialize()).toBe('congo=t61rcWkgMzE');
    expect(only(spans, SPAN_ADMISSION).spanContext().traceId).toBe(CLIENT_TRACE_ID);
  });

  it("still records the gateway's spans when the client's traceparent says not sampled", () => {
    const t = memoryTracing();
    const parent = t.extractContext({ traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-00` });
    startRequestTrace(t, SPAN_CHAT_COMPLETIONS, parent, 'POST', ROUTE, ROUTE, 'r5').end(200);

    const root = only(finished(t), SPAN_CHAT_COMPLETIONS);
    expect(root.spanContext().traceId).toBe(CLIENT_TRACE_ID);
  });

  it('starts a new trace when the traceparent is missing or malformed', () => {
    const t = memoryTracing();
    expect(t.extractContext({})).toBe(ROOT_CONTEXT);
    const parent = t.extractContext({ traceparent: '00-not-a-trace-01' });
    startRequestTrace(t, SPAN_CHAT_COMPLETIONS, parent, 'POST', ROUTE, ROUTE, 'r6').end(200);

    const root = only(finished(t), SPAN_CHAT_COMPLETIONS);
    expect(root.parentSpanContext).toBeUndefined();
    expect(root.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/);
  });

  it('keeps two gateways in one process apart and registers nothing global', () => {
    const a = memoryTracing('cfg-a');
    const b = memoryTracing('cfg-b');
    startRequestTrace(a, SPAN_CHAT_COMPLETIONS, ROOT_CONTEXT, 'POST', ROUTE, ROUTE, 'ra').end(200);

    expect(finished(a)).toHaveLength(1);
    expect(finished(b)).toHaveLength(0);
    expect(finished(a)[0]?.attributes['switchyard.config.version']).toBe('cfg-a');
    const global = trace.getTracer('probe').startSpan('probe');
    expect(global.isRecording()).toBe(false);
    global.end();
  });
});

describe('tracing with the exporter off', () => {
  it('gives non-recording spans for the whole tree and exports nothing', async () => {
    const t = createTracing({ exporter: 'none', otlpEndpoint: null, serviceName: 'switchyard' });
    expect(t.memoryExporter).toBeNull();
    expect(t.recording).toBe(false);

    const rt = startRequestTrace(
      t,
      SPAN_CHAT_COMPLETIONS,
      ROOT_CONTEXT,
      'POST',
      ROUTE,
      ROUTE,
      'r7',
    );
    const admission = rt.startAdmission();
    const attempt = rt.startUpstreamAttempt('ch', 'openai', 1);
    const settlement = rt.startSettlement();
    for (const span of [rt.span, admission, attempt, settlement]) {
      expect(span.isRecording()).toBe(false);
    }
    markRejected(admission, rt.span, 'balance');
    admission.end();
    endUpstreamAttempt(attempt, 200, 'ok');
    settlement.end();
    rt.end(200);
    // Untraced requests share that one tree: nothing per request to start or keep.
    const again = startRequestTrace(
      t,
      SPAN_CHAT_COMPLETIONS,
      ROOT_CONTEXT,
      'POST',
      ROUTE,
      ROUTE,
      'r9',
    );
    expect(again).toBe(rt);
    await t.shutdown();
  });

  it("still carries the client's trace id, for logs to quote", () => {
    const t = createTracing({ exporter: 'none', otlpEndpoint: null, serviceName: 'switchyard' });
    const parent = t.extractContext({ traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01` });
    const rt = startRequestTrace(t, SPAN_CHAT_COMPLETIONS, parent, 'POST', ROUTE, ROUTE, 'r8');
    expect(rt.span.isRecording()).toBe(false);
    expect(rt.span.spanContext().traceId).toBe(CLIENT_TRACE_ID);
  });
});

describe('tracing to an OTLP collector', () => {
  it('builds a recording tracer for the configured URL and shuts down with nothing to send', async () => {
    const t = createTracing({
      exporter: 'otlp',
      otlpEndpoint: 'http://127.0.0.1:9/v1/traces',
      serviceName: 'switchyard',
    });
    expect(t.recording).toBe(true);
    expect(t.memoryExporter).toBeNull();
    const span = t.tracer.startSpan('probe');
    expect(span.isRecording()).toBe(true);
    await t.shutdown();
  });
});

describe('gen_ai.operation.name', () => {
  it('uses the semantic conventions names for chat-like, completion and embedding endpoints', () => {
    expect(genAiOperation('messages')).toBe('chat');
    expect(genAiOperation('responses')).toBe('chat');
    expect(genAiOperation('completions')).toBe('text_completion');
    expect(genAiOperation('embeddings')).toBe('embeddings');
    expect(genAiOperation('rerank')).toBe('rerank');
  });
});
