// A client's address in one written form: on a listener that takes IPv4 and IPv6 ("::") an IPv4
// client arrives as ::ffff:a.b.c.d. Regression (session 21): compared as typed, a ban on
// ip:127.0.0.1 let that client through, and a trusted proxy on 127.0.0.1 went unrecognised, so a
// rule banned the proxy's own address for every client behind it.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { E2E_CONFIG, startHarness, type Harness } from './harness.ts';

const ADMIN_TOKEN = process.env.E2E_ADMIN_TOKEN ?? 'e2e-admin-token';

function files(mockUrl: string): Record<string, string> {
  const base = E2E_CONFIG(mockUrl);
  return {
    ...base,
    'gateway.yaml': base['gateway.yaml']!.replace(
      'listen: { host: 127.0.0.1, port: 0 }',
      'listen: { host: 127.0.0.1, port: 0 }\n  trusted_proxies: ["127.0.0.1"]',
    ),
    'limits.yaml': `limits:
  rpm:
    scope: account
  blacklist:
    source: ip
    rules:
      - { on: auth_failure, max: 3, window_seconds: 60, ban_seconds: 60 }
`,
  };
}

let h: Harness;
let key: string;
let url: string;

beforeAll(async () => {
  h = await startHarness({ files, host: '::' });
  ({ key } = await h.account({ balance: '1' }));
  // Over IPv4, so the listener sees ::ffff:127.0.0.1.
  url = `http://127.0.0.1:${new URL(h.gateway.url).port}`;
}, 60_000);
afterAll(async () => h?.close());

async function chat(apiKey: string, forwardedFor: string | null): Promise<number> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${apiKey}`,
    'content-type': 'application/json',
  };
  if (forwardedFor !== null) headers['x-forwarded-for'] = forwardedFor;
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ model: 'plain', messages: [{ role: 'user', content: 'x' }] }),
  });
  await r.text();
  return r.status;
}

async function ban(source: string, method = 'POST'): Promise<number> {
  const r = await fetch(
    method === 'POST'
      ? `${url}/api/blacklist`
      : `${url}/api/blacklist/${encodeURIComponent(source)}`,
    {
      method,
      headers:
        method === 'POST'
          ? { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }
          : { authorization: `Bearer ${ADMIN_TOKEN}` },
      body: method === 'POST' ? JSON.stringify({ source, seconds: 60, reason: 'test' }) : undefined,
    },
  );
  await r.text();
  return r.status;
}

it('behind a trusted proxy, a rule bans the client, not the proxy', async () => {
  for (let i = 0; i < 3; i++) expect(await chat('sk-sy-wrong', '198.51.100.1')).toBe(401);
  expect(await chat(key, '198.51.100.1')).toBe(403);
  expect(await chat(key, '198.51.100.2')).toBe(200);
  expect(await h.gateway.ctx.limiter.isBlacklisted('ip:198.51.100.1')).not.toBeNull();
  expect(await h.gateway.ctx.limiter.isBlacklisted('ip:127.0.0.1')).toBeNull();
});

it('a ban on an IPv4 address holds for that client on a dual-stack listener, in any spelling', async () => {
  expect(await ban('ip:127.0.0.1')).toBe(201);
  expect(await chat(key, null)).toBe(403);
  expect(await ban('ip:::ffff:127.0.0.1', 'DELETE')).toBe(200);
  expect(await chat(key, null)).toBe(200);
  expect(await ban('ip:fe80::1%eth0')).toBe(400);
});
