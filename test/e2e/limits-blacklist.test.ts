// The temporary blacklist through a running gateway: a strike rule on failed logins restricts the
// source (even its good keys) for ban_seconds, and operators add, list and lift restrictions
// through the admin API.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { E2E_CONFIG, startHarness, type Harness } from './harness.ts';

const ADMIN_TOKEN = process.env.E2E_ADMIN_TOKEN ?? 'e2e-admin-token';
const SOURCE = 'ip:127.0.0.1';

/** E2E_CONFIG plus a rule: 3 failed logins in 60 s restrict the address for 2 s. */
function files(mockUrl: string): Record<string, string> {
  return {
    ...E2E_CONFIG(mockUrl),
    'limits.yaml': `limits:
  rpm:
    scope: account
    models: { limited: 2 }
  blacklist:
    source: ip
    rules:
      - { on: auth_failure, max: 3, window_seconds: 60, ban_seconds: 2 }
`,
  };
}

let h: Harness;
let key: string;
let accountId: string;
/** Request ids answered 200, to wait for their settlement. */
const served: string[] = [];

beforeAll(async () => {
  h = await startHarness({ files });
  ({ key, accountId } = await h.account({ balance: '10' }));
}, 60_000);
afterAll(async () => h?.close());

async function chat(apiKey: string): Promise<{ status: number; code: string | null; id: string }> {
  const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'plain', messages: [{ role: 'user', content: 'hi' }] }),
  });
  const json = (await res.json()) as { error?: { code: string } };
  const id = res.headers.get('x-request-id') ?? '';
  if (res.status === 200) served.push(id);
  return { status: res.status, code: json.error?.code ?? null, id };
}

async function admin(
  method: string,
  path: string,
  body: unknown = undefined,
  token: string | null = ADMIN_TOKEN,
): Promise<{ status: number; json: unknown }> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${h.gateway.url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: await res.json() };
}

/** Polls until the source is served again; the ban is 2 s, so 6 s means it never lifted. */
async function untilServed(apiKey: string): Promise<{ status: number; code: string | null }> {
  let last = await chat(apiKey);
  for (let i = 0; i < 60 && last.status === 403; i++) {
    await new Promise((r) => setTimeout(r, 100));
    last = await chat(apiKey);
  }
  return last;
}

describe('blacklist rule on failed logins', () => {
  it('after 3 bad keys even a good key gets 403 temp_blacklisted, until the ban lifts', async () => {
    expect((await chat(key)).status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const bad = await chat(`sk-sy-wrong-${i}`);
      expect(bad.status).toBe(401);
      expect(bad.code).toBe('invalid_token');
    }
    const before = h.mock.callCount();

    const banned = await chat(key);
    expect(banned.status).toBe(403);
    expect(banned.code).toBe('temp_blacklisted');
    // The address is checked before the key: guessing on costs nothing, not even a key lookup.
    const guess = await chat('sk-sy-wrong-again');
    expect(guess.code).toBe('temp_blacklisted');
    expect(h.mock.callCount()).toBe(before);
    expect(await h.store.getUsage(banned.id)).toBeNull();

    const listed = await admin('GET', '/api/blacklist');
    expect(listed.json).toMatchObject({ data: [{ source: SOURCE, added_by: 'rule' }] });

    const after = await untilServed(key);
    expect(after.status).toBe(200);
    expect((await admin('GET', '/api/blacklist')).json).toEqual({ data: [] });
  });
});

describe('blacklist through the admin API', () => {
  it('an operator restricts the address, sees it listed with its reason, and lifts it', async () => {
    const added = await admin('POST', '/api/blacklist', {
      source: SOURCE,
      seconds: 600,
      reason: 'scraping seen from this address',
    });
    expect(added.status).toBe(201);
    expect(added.json).toMatchObject({ source: SOURCE, added_by: 'admin' });

    const before = h.mock.callCount();
    const banned = await chat(key);
    expect(banned.status).toBe(403);
    expect(banned.code).toBe('temp_blacklisted');
    expect(h.mock.callCount()).toBe(before);

    const listed = await admin('GET', '/api/blacklist');
    expect(listed.status).toBe(200);
    expect(listed.json).toMatchObject({
      data: [{ source: SOURCE, reason: 'scraping seen from this address', added_by: 'admin' }],
    });

    const lifted = await admin('DELETE', `/api/blacklist/${encodeURIComponent(SOURCE)}`);
    expect(lifted).toEqual({ status: 200, json: { source: SOURCE, removed: true } });
    expect((await chat(key)).status).toBe(200);

    const again = await admin('DELETE', `/api/blacklist/${encodeURIComponent(SOURCE)}`);
    expect(again.status).toBe(404);
  });

  it('refuses the blacklist routes without the admin token: 401', async () => {
    for (const token of [null, 'not-the-admin-token']) {
      expect((await admin('GET', '/api/blacklist', undefined, token)).status).toBe(401);
      const add = await admin(
        'POST',
        '/api/blacklist',
        { source: SOURCE, seconds: 60, reason: 'x' },
        token,
      );
      expect(add.status).toBe(401);
      expect(add.json).toMatchObject({ error: { code: 'invalid_token' } });
      const del = await admin(
        'DELETE',
        `/api/blacklist/${encodeURIComponent(SOURCE)}`,
        undefined,
        token,
      );
      expect(del.status).toBe(401);
    }
    // Nothing was restricted by the refused calls.
    expect((await chat(key)).status).toBe(200);
  });

  it('leaves no reservation held by any of the refused requests', async () => {
    for (const id of served) await h.usage(id);
    expect((await h.store.getAccount(accountId))?.reservedNano).toBe(0n);
    const rows = await h.store.listUsage({ accountId, limit: 1000 });
    expect(rows.every((r) => r.status === 'ok')).toBe(true);
    // Served: one before the rule tripped, one after it lifted, one after each admin step.
    expect(rows.map((r) => r.requestId).sort()).toEqual([...served].sort());
    expect(served).toHaveLength(4);
  });
});
