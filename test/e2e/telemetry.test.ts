// Observability through the running gateway: the span tree of a chat request (streamed and not),
// where a rejected request stopped, the client's traceparent, no secret in spans, logs or
// metrics, and a scrape of /metrics.
import { PassThrough } from 'node:stream';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MOCK_DEFAULT_KEY } from '../mock-upstream/server.ts';
import { startHarness, type Harness } from './harness.ts';

let h: Harness;
let key: string;
let keyId: string;
let accountId: string;
const logLines: string[] = [];

beforeAll(async () => {
  const logs = new PassThrough();
  logs.on('data', (d: Buffer) => logLines.push(...d.toString().split('\n').filter(Boolean)));
  h = await startHarness({ logLevel: 'info', logDestination: logs });
  ({ key, keyId, accountId } = await h.account({ balance: '10' }));
}, 60_000);
afterAll(async () => h?.close());

function spans(): ReadableSpan[] {
  return h.gateway.telemetry.tracing.memoryExporter!.getFinishedSpans();
}

async function treeOf(
  requestId: string,
): Promise<{ root: ReadableSpan; children: ReadableSpan[] }> {
  for (let i = 0; i < 100; i++) {
    const root = spans().find((s) => s.attributes['switchyard.request_id'] === requestId);
    if (root !== undefined) {
      const id = root.spanContext().spanId;
      return { root, children: spans().filter((s) => s.parentSpanContext?.spanId === id) };
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no trace for ${requestId}`);
}

async function chat(body: object, headers: Record<string, string> = {}): Promise<Response> {
  const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  await res.text();
  return res;
}

describe('traces', () => {
  it('a chat request yields server → admission, upstream attempt, settlement with GenAI attributes', async () => {
    const res = await chat({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] });
    const { root, children } = await treeOf(res.headers.get('x-request-id')!);
    expect(root.name).toBe('POST /v1/chat/completions');
    expect(children.map((c) => c.name).sort()).toEqual([
      'switchyard.admission',
      'switchyard.settlement',
      'switchyard.upstream_attempt',
    ]);
    const attempt = children.find((c) => c.name === 'switchyard.upstream_attempt')!;
    expect(attempt.attributes).toMatchObject({
      'switchyard.channel.id': 'oa-main',
      'http.response.status_code': 200,
      'gen_ai.provider.name': 'openai',
    });
    expect(root.attributes).toMatchObject({
      'http.response.status_code': 200,
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'gpt-x',
      'gen_ai.response.model': 'gpt-x-up',
      'gen_ai.usage.output_tokens': 14,
      'switchyard.account.id': accountId,
      'switchyard.key.id': keyId,
      'switchyard.channel.id': 'oa-main',
      'switchyard.config.version': h.gateway.tables.current.version,
    });
    expect(Number(root.attributes['gen_ai.usage.input_tokens'])).toBeGreaterThan(0);
    expect(typeof root.attributes['switchyard.cost_yuan']).toBe('string');
  });

  it('a streamed request records the time to first chunk', async () => {
    const res = await chat({
      model: 'gpt-x',
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const { root } = await treeOf(res.headers.get('x-request-id')!);
    expect(Number(root.attributes['gen_ai.response.time_to_first_chunk'])).toBeGreaterThan(0);
    expect(root.attributes['gen_ai.usage.output_tokens']).toBe(14);
  });

  it('a retried request shows each attempt and its retry reason', async () => {
    h.mock.script({ model: 'gpt-x-up', status: 503 });
    const res = await chat({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] });
    const { children } = await treeOf(res.headers.get('x-request-id')!);
    const attempts = children.filter((c) => c.name === 'switchyard.upstream_attempt');
    expect(
      attempts.map((a) => [
        a.attributes['switchyard.channel.id'],
        a.attributes['switchyard.retry_reason'] ?? null,
      ]),
    ).toEqual([
      ['oa-main', 'http_5xx'],
      ['oa-backup', null],
    ]);
  });

  it('a rejected request shows where it stopped, with no upstream attempt', async () => {
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer sk-sy-wrong', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(401);
    const { root, children } = await treeOf(res.headers.get('x-request-id')!);
    expect(root.attributes['switchyard.rejected_by']).toBe('auth');
    expect(root.attributes['http.response.status_code']).toBe(401);
    expect(children.map((c) => c.name)).toEqual(['switchyard.admission']);
  });

  it("honours the client's W3C traceparent", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const res = await chat(
      { model: 'plain', messages: [{ role: 'user', content: 'hi' }] },
      { traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
    );
    const { root } = await treeOf(res.headers.get('x-request-id')!);
    expect(root.spanContext().traceId).toBe(traceId);
    expect(root.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
  });
});

describe('metrics and logs', () => {
  it('serves Prometheus metrics with bounded labels', async () => {
    await chat({ model: 'plain', messages: [{ role: 'user', content: 'hi' }] });
    const res = await fetch(`${h.gateway.url}/metrics`);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toMatch(
      /switchyard_requests_total\{route="POST \/v1\/chat\/completions",model="plain",channel="oa-main",status="200"\} \d+/,
    );
    expect(text).toMatch(/switchyard_request_duration_seconds_bucket\{.*le="\+Inf"\} \d+/);
    expect(text).toMatch(
      /switchyard_upstream_attempts_total\{channel="oa-main",outcome="ok"\} \d+/,
    );
    expect(text).toMatch(/switchyard_tokens_total\{model="plain",kind="output"\} \d+/);
    expect(text).toMatch(/switchyard_rejections_total\{layer="auth"\} \d+/);
    expect(text).toContain(
      `switchyard_config_version_info{version="${h.gateway.tables.current.version}"} 1`,
    );
    expect(text).not.toContain('req_');
  });

  it('writes one access line per request with the request id, tokens and cost', async () => {
    const res = await chat({ model: 'plain', messages: [{ role: 'user', content: 'hi' }] });
    const id = res.headers.get('x-request-id')!;
    await h.usage(id);
    let line: Record<string, unknown> | undefined;
    for (let i = 0; i < 100 && line === undefined; i++) {
      line = logLines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.reqId === id && l.msg === 'request');
      if (line === undefined) await new Promise((r) => setTimeout(r, 10));
    }
    expect(line).toMatchObject({
      reqId: id,
      model: 'plain',
      channel: 'oa-main',
      status: 200,
      accountId,
      keyId,
    });
    expect((line!.tokens as { output: number }).output).toBe(6);
    expect(typeof line!.costYuan).toBe('string');
  });

  it('never puts a secret in spans, logs or metrics', async () => {
    // An upstream that quotes its key back must not leak it either.
    h.mock.script({
      model: 'gpt-x-up',
      status: 400,
      body: { error: { message: `bad request for key ${MOCK_DEFAULT_KEY}` } },
    });
    const res = await chat({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(400);
    await fetch(`${h.gateway.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    const metrics = await (await fetch(`${h.gateway.url}/metrics`)).text();
    const spanText = JSON.stringify(spans().map((s) => s.attributes));
    for (const secret of [key, MOCK_DEFAULT_KEY, 'e2e-admin-token']) {
      expect(spanText).not.toContain(secret);
      expect(logLines.join('\n')).not.toContain(secret);
      expect(metrics).not.toContain(secret);
    }
  });
});
