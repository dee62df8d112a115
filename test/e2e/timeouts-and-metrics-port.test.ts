// A stream that outlives its channel's total time ends with an error event (and frees its slot);
// metrics on their own port with a bearer token, and not on the main port.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { E2E_CONFIG, startHarness, type Harness } from './harness.ts';

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness({
    files: (url) => ({
      ...E2E_CONFIG(url),
      'gateway.yaml': `gateway:
  listen: { host: 127.0.0.1, port: 0 }
  metrics: { port: 0, token: "\${E2E_METRICS_TOKEN:-metrics-secret}" }
`,
      'channels.yaml': E2E_CONFIG(url)['channels.yaml']!.replace(
        'capacity: 1\n    timeouts: { connect_ms: 1000, first_byte_ms: 3000, total_ms: 10000 }',
        'capacity: 1\n    timeouts: { connect_ms: 1000, first_byte_ms: 3000, total_ms: 600 }',
      ),
    }),
  });
  ({ key } = await h.account({ balance: '10' }));
}, 60_000);
afterAll(async () => h?.close());

describe('total time of a channel', () => {
  it('ends a stream that runs past total_ms with an error event and releases the slot', async () => {
    h.mock.script({ model: 'narrow-up', chunkDelayMs: 200, chunks: 20 });
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'narrow',
        stream: true,
        messages: [{ role: 'user', content: 'x' }],
      }),
    });
    const text = await res.text();
    expect(text).toContain('the upstream exceeded its total time');
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    const row = await h.usage(res.headers.get('x-request-id')!);
    expect(row.status).toBe('aborted');
    expect(await h.gateway.ctx.limiter.slotsInUse('tiny')).toBe(0);
  });
});

describe('metrics on their own port', () => {
  it('serves /metrics there with the token, and not on the main port', async () => {
    expect(h.gateway.metricsUrl).not.toBeNull();
    expect((await fetch(h.gateway.metricsUrl!)).status).toBe(401);
    const ok = await fetch(h.gateway.metricsUrl!, {
      headers: { authorization: 'Bearer metrics-secret' },
    });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('switchyard_config_version_info');
    expect((await fetch(`${h.gateway.url}/metrics`)).status).toBe(404);
  });
});
