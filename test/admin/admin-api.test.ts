// The admin API as an operator drives it over HTTP: tokens and privileges, accounts and exact
// money, statements that reconcile, keys shown once, the usage log and the blacklist.
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerAdminRoutes } from '../../src/admin/register-admin-routes.ts';
import { yuanToNano } from '../../src/billing/money.ts';
import { createLimiter } from '../../src/limits/create-limiter.ts';
import type { Limiter } from '../../src/limits/limiter.ts';
import { hashKey } from '../../src/store/key-secret.ts';
import { openStore } from '../../src/store/open-store.ts';
import type { Store } from '../../src/store/store.ts';
import type { RoutingTable } from '../../src/table/types.ts';
import { ADMIN_TOKEN, compileTable, READONLY_TOKEN } from './helpers.ts';

type Json = Record<string, unknown>;
interface Reply {
  status: number;
  body: Json;
  headers: Record<string, unknown>;
}

let store: Store;
let limiter: Limiter;
let app: FastifyInstance;
let table: RoutingTable = compileTable();
const STATUS = { version: 'test-version', last_reload: null };

beforeAll(async () => {
  store = await openStore({ url: null, dataDir: null, heartbeatMs: 0 });
  limiter = createLimiter({ redisUrl: null, onUnreachable: 'fail_open' });
  app = Fastify();
  registerAdminRoutes(app, { store, limiter, table: () => table, status: () => STATUS });
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  await limiter?.close();
  await store?.close();
});

async function call(
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  body?: unknown,
  token: string | null = ADMIN_TOKEN,
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const res = await app.inject({
    method,
    url,
    headers,
    ...(body === undefined ? {} : { payload: body as Json }),
  });
  return {
    status: res.statusCode,
    body: res.body === '' ? {} : (res.json() as Json),
    headers: res.headers,
  };
}

function errorOf(r: Reply): { code: string; message: string; type: string; request_id: string } {
  return r.body.error as { code: string; message: string; type: string; request_id: string };
}

async function newAccount(name: string, extra: Json = {}): Promise<Json> {
  const r = await call('POST', '/api/accounts', { name, ...extra });
  expect(r.status).toBe(201);
  return r.body;
}

describe('admin authentication', () => {
  it('refuses a request without a token with 401 invalid_token in the spec error object', async () => {
    const r = await call('GET', '/api/accounts', undefined, null);
    expect(r.status).toBe(401);
    expect(r.body).toEqual({
      error: {
        message: expect.stringContaining('Bearer'),
        type: 'switchyard_api_error',
        code: 'invalid_token',
        request_id: expect.any(String),
      },
    });
  });

  it('refuses an unknown token, and an API-key-looking one', async () => {
    for (const token of ['wrong', ADMIN_TOKEN + 'x', 'sk-sy-' + 'a'.repeat(40)]) {
      const r = await call('GET', '/api/accounts', undefined, token);
      expect(r.status).toBe(401);
      expect(errorOf(r).code).toBe('invalid_token');
    }
  });

  it('lets the read-only token read but not write (403 AUTH_INSUFFICIENT_PRIVILEGE)', async () => {
    expect((await call('GET', '/api/accounts', undefined, READONLY_TOKEN)).status).toBe(200);
    const before = (await call('GET', '/api/accounts')).body.data as Json[];
    const r = await call('POST', '/api/accounts', { name: 'nope' }, READONLY_TOKEN);
    expect(r.status).toBe(403);
    expect(errorOf(r).code).toBe('AUTH_INSUFFICIENT_PRIVILEGE');
    expect((await call('GET', '/api/accounts')).body.data).toEqual(before);
    const del = await call('DELETE', '/api/blacklist/ip%3A10.0.0.1', undefined, READONLY_TOKEN);
    expect(errorOf(del).code).toBe('AUTH_INSUFFICIENT_PRIVILEGE');
  });

  it('checks the token before the body, so a read-only write with a bad body is still 403', async () => {
    const r = await call('POST', '/api/accounts', { bogus: 1 }, READONLY_TOKEN);
    expect(r.status).toBe(403);
  });

  it('answers 401 naming SWITCHYARD_ADMIN_TOKEN on every route when no admin token is set', async () => {
    const saved = table;
    table = compileTable({ TEST_ADMIN_RO: READONLY_TOKEN });
    try {
      for (const [method, url] of [
        ['GET', '/api/status'],
        ['GET', '/api/accounts'],
        ['POST', '/api/accounts'],
        ['GET', '/api/blacklist'],
      ] as const) {
        for (const token of [ADMIN_TOKEN, READONLY_TOKEN, '']) {
          const r = await call(method, url, undefined, token);
          expect(r.status).toBe(401);
          expect(errorOf(r).message).toContain('SWITCHYARD_ADMIN_TOKEN is not set');
        }
      }
    } finally {
      table = saved;
    }
  });

  it('follows a reload that rotates the token', async () => {
    const saved = table;
    table = compileTable({ TEST_ADMIN: 'rotated-token', TEST_ADMIN_RO: READONLY_TOKEN });
    try {
      expect((await call('GET', '/api/status')).status).toBe(401);
      expect((await call('GET', '/api/status', undefined, 'rotated-token')).status).toBe(200);
    } finally {
      table = saved;
    }
  });

  it('marks answers as not cacheable', async () => {
    expect((await call('GET', '/api/accounts')).headers['cache-control']).toBe('no-store');
  });
});

describe('GET /api/status', () => {
  it('returns the reload status the gateway gives', async () => {
    const r = await call('GET', '/api/status', undefined, READONLY_TOKEN);
    expect(r).toMatchObject({ status: 200, body: STATUS });
  });
});

describe('accounts', () => {
  it('creates an account with a zero balance and reads it back', async () => {
    const created = await newAccount('Acme Research', { realname_verified: true });
    expect(created).toEqual({
      id: expect.stringMatching(/^acct_[A-Za-z0-9]{16}$/),
      name: 'Acme Research',
      balance: '0',
      reserved: '0',
      leased: '0',
      available: '0',
      realname_verified: true,
      status: 'active',
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect((await call('GET', `/api/accounts/${String(created.id)}`)).body).toEqual(created);
    const list = (await call('GET', '/api/accounts')).body.data as Json[];
    expect(list).toContainEqual(created);
  });

  it('rejects a missing name, a wrong type and an unknown field, naming the field', async () => {
    const cases: [unknown, string][] = [
      [{}, 'name'],
      [{ name: '   ' }, 'name'],
      [{ name: 42 }, 'name'],
      [{ name: 'x', realname_verified: 'yes' }, 'realname_verified'],
      [{ name: 'x', realname: true }, 'realname'],
      [['name'], 'JSON object'],
    ];
    for (const [body, field] of cases) {
      const r = await call('POST', '/api/accounts', body);
      expect(r.status).toBe(400);
      expect(errorOf(r).code).toBe('invalid_parameter_error');
      expect(errorOf(r).message).toContain(field);
    }
  });

  it('answers malformed JSON with 400 invalid_parameter_error', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/api/accounts',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      payload: '{"name": ',
    });
    expect(res.statusCode).toBe(400);
    expect((res.json() as { error: { code: string } }).error.code).toBe('invalid_parameter_error');
  });

  it('refuses a body that is not JSON', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/api/accounts',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'text/plain' },
      payload: 'name=x',
    });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect((res.json() as { error: { code: string } }).error.code).toMatch(
      /^(invalid_parameter_error|unsupported_media_type)$/,
    );
  });

  it('answers 404 not_found for an unknown account id', async () => {
    for (const [method, url, body] of [
      ['GET', '/api/accounts/acct_nobody', undefined],
      ['PATCH', '/api/accounts/acct_nobody', { status: 'disabled' }],
      ['POST', '/api/accounts/acct_nobody/topup', { amount: '1' }],
      ['POST', '/api/accounts/acct_nobody/adjust', { amount: '1', reason: 'x' }],
      ['GET', '/api/accounts/acct_nobody/statement', undefined],
      ['GET', '/api/accounts/acct_nobody/keys', undefined],
      ['POST', '/api/accounts/acct_nobody/keys', {}],
    ] as const) {
      const r = await call(method, url, body);
      expect(r.status, `${method} ${url}`).toBe(404);
      expect(errorOf(r).code).toBe('not_found');
    }
  });

  it('disables and re-enables an account and sets its real-name flag', async () => {
    const id = String((await newAccount('Toggle')).id);
    const disabled = await call('PATCH', `/api/accounts/${id}`, { status: 'disabled' });
    expect(disabled.body).toMatchObject({ status: 'disabled', realname_verified: false });
    const both = await call('PATCH', `/api/accounts/${id}`, {
      status: 'active',
      realname_verified: true,
    });
    expect(both.body).toMatchObject({ status: 'active', realname_verified: true });
    expect((await call('GET', `/api/accounts/${id}`)).body).toMatchObject({
      status: 'active',
      realname_verified: true,
    });
  });

  it('rejects a PATCH with nothing to change or an unknown status', async () => {
    const id = String((await newAccount('Patchy')).id);
    for (const body of [{}, { status: 'frozen' }, { status: 'active', name: 'renamed' }]) {
      const r = await call('PATCH', `/api/accounts/${id}`, body);
      expect(r.status).toBe(400);
      expect(errorOf(r).code).toBe('invalid_parameter_error');
    }
  });
});

describe('money in and out is exact', () => {
  it('tops up one nano-yuan and 12.345678901 yuan and reads back 12.345678902', async () => {
    const id = String((await newAccount('Exact')).id);
    const first = await call('POST', `/api/accounts/${id}/topup`, { amount: '0.000000001' });
    expect(first.status).toBe(200);
    expect(first.body.entry).toMatchObject({
      kind: 'topup',
      amount: '0.000000001',
      balance_after: '0.000000001',
      reason: expect.any(String),
    });
    const second = await call('POST', `/api/accounts/${id}/topup`, {
      amount: '12.345678901',
      reason: 'invoice 7',
    });
    expect(second.body.entry).toMatchObject({
      amount: '12.345678901',
      balance_after: '12.345678902',
      reason: 'invoice 7',
    });
    expect(second.body.account).toMatchObject({
      balance: '12.345678902',
      available: '12.345678902',
    });
    expect((await call('GET', `/api/accounts/${id}`)).body.balance).toBe('12.345678902');
  });

  it('refuses money given as a JSON number, with more than 9 decimals, or not positive', async () => {
    const id = String((await newAccount('Strict')).id);
    for (const amount of [12.5, '1.0000000001', '-1', '0', '1e3', ' 5', '', null, '1000000000.1']) {
      const r = await call('POST', `/api/accounts/${id}/topup`, { amount });
      expect(r.status, JSON.stringify(amount)).toBe(400);
      expect(errorOf(r).message).toContain('amount');
    }
    expect((await call('GET', `/api/accounts/${id}`)).body.balance).toBe('0');
  });

  it('adjusts by a signed amount with a required reason, never below the available balance', async () => {
    const id = String((await newAccount('Adjusted')).id);
    await call('POST', `/api/accounts/${id}/topup`, { amount: '10' });
    const noReason = await call('POST', `/api/accounts/${id}/adjust`, { amount: '-3' });
    expect(noReason.status).toBe(400);
    expect(errorOf(noReason).message).toContain('reason');
    const down = await call('POST', `/api/accounts/${id}/adjust`, {
      amount: '-3',
      reason: 'refund of a duplicate topup',
    });
    expect(down.body.entry).toMatchObject({ kind: 'adjust', amount: '-3', balance_after: '7' });
    const tooFar = await call('POST', `/api/accounts/${id}/adjust`, {
      amount: '-7.000000001',
      reason: 'too much',
    });
    expect(tooFar.status).toBe(400);
    expect(errorOf(tooFar).code).toBe('invalid_parameter_error');
    expect((await call('GET', `/api/accounts/${id}`)).body.balance).toBe('7');
  });
});

describe('statements', () => {
  it('reconciles: opening + topups + adjustments - usage == closing, with every row', async () => {
    const id = String((await newAccount('Statement')).id);
    await call('POST', `/api/accounts/${id}/topup`, { amount: '100.5' });
    await call('POST', `/api/accounts/${id}/adjust`, { amount: '-0.25', reason: 'goodwill' });
    const key = await store.createKey({
      accountId: id,
      name: 'k',
      allowedModels: null,
      expiresAt: null,
    });
    await chargeUsage(id, key.record.id, 'req_statement_1', 1_234_567_891n);

    const r = await call('GET', `/api/accounts/${id}/statement`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      account_id: id,
      opening: '0',
      topups: '100.5',
      adjustments: '-0.25',
      usage: '1.234567891',
      closing: '99.015432109',
    });
    const n = (field: string): bigint => yuanToNano(String(r.body[field])) ?? -1n;
    expect(n('opening') + n('topups') + n('adjustments') - n('usage')).toBe(n('closing'));
    const rows = r.body.rows as Json[];
    expect(rows.map((x) => [x.kind, x.amount])).toEqual([
      ['topup', '100.5'],
      ['adjust', '-0.25'],
      ['usage', '-1.234567891'],
    ]);
    expect(rows[2]).toMatchObject({ request_id: 'req_statement_1', balance_after: '99.015432109' });
    expect((await call('GET', `/api/accounts/${id}`)).body.balance).toBe('99.015432109');
  });

  it('gives the balance at each bound for a period outside the activity', async () => {
    const id = String((await newAccount('Quiet')).id);
    await call('POST', `/api/accounts/${id}/topup`, { amount: '3' });
    const later = await call(
      'GET',
      `/api/accounts/${id}/statement?from=2100-01-01T00:00:00Z&to=2100-02-01T00:00:00Z`,
    );
    expect(later.body).toMatchObject({ opening: '3', closing: '3', topups: '0', rows: [] });
    const earlier = await call(
      'GET',
      `/api/accounts/${id}/statement?from=2000-01-01&to=2000-02-01`,
    );
    expect(earlier.body).toMatchObject({ opening: '0', closing: '0', rows: [] });
  });

  it('rejects malformed or reversed periods', async () => {
    const id = String((await newAccount('Periods')).id);
    for (const q of [
      'from=yesterday',
      'to=2026-01-01T00:00:00',
      'from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z',
      'since=2026-01-01',
    ]) {
      const r = await call('GET', `/api/accounts/${id}/statement?${q}`);
      expect(r.status, q).toBe(400);
      expect(errorOf(r).code).toBe('invalid_parameter_error');
    }
  });
});

/** A request as the relay would record it: reserve at entry, settle with the metered cost. */
async function chargeUsage(
  accountId: string,
  keyId: string,
  requestId: string,
  costNano: bigint,
  clientRequestId: string | null = null,
) {
  expect(
    await store.reserve({
      requestId,
      clientRequestId,
      accountId,
      keyId,
      model: 'chat-a',
      endpoint: 'chat',
      amountNano: costNano,
    }),
  ).toBe('ok');
  await store.settle(requestId, {
    model: null,
    channelId: 'demo',
    inputTokens: 1200,
    cacheHitTokens: 200,
    outputTokens: 300,
    reasoningTokens: 0,
    estimated: false,
    priceSnapshot: { inputNanoPerToken: '100', outputNanoPerToken: '2200', campaignId: null },
    peakApplied: false,
    campaignId: null,
    costNano,
    status: 'ok',
    httpStatus: 200,
    latencyMs: 42,
    upstreamRequestId: 'up-1',
  });
}

describe('API keys', () => {
  it('shows the plaintext once at creation, then lists only its prefix', async () => {
    const accountId = String((await newAccount('Keys')).id);
    const r = await call('POST', `/api/accounts/${accountId}/keys`, {
      name: 'ci',
      allowed_models: ['chat-*', 'paint-1'],
      expires_at: '2099-01-01T00:00:00+08:00',
    });
    expect(r.status).toBe(201);
    expect(r.headers['cache-control']).toBe('no-store');
    const plaintext = String(r.body.key);
    expect(plaintext).toMatch(/^sk-sy-[A-Za-z0-9]{40}$/);
    expect(r.body.record).toEqual({
      id: expect.stringMatching(/^key_/),
      account_id: accountId,
      name: 'ci',
      key_prefix: plaintext.slice(0, 10),
      allowed_models: ['chat-*', 'paint-1'],
      status: 'active',
      expires_at: '2098-12-31T16:00:00.000Z',
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    // The shown key is the real one: the store finds it by its hash.
    const found = await store.findKeyByHash(hashKey(plaintext));
    expect(found?.key.id).toBe((r.body.record as Json).id);

    const lists = [
      await call('GET', `/api/accounts/${accountId}/keys`),
      await call('GET', `/api/keys?account_id=${accountId}`),
      await call('GET', '/api/keys', undefined, READONLY_TOKEN),
    ];
    for (const list of lists) {
      expect(list.body.data).toContainEqual(r.body.record);
      const text = JSON.stringify(list.body);
      expect(text).not.toContain(plaintext);
      expect(text).not.toContain(hashKey(plaintext));
      expect(text).not.toMatch(/hash/i);
    }
    expect((lists[0]?.body.data as Json[]).length).toBe(1);
  });

  it('creates a key for every model with no expiry by default', async () => {
    const accountId = String((await newAccount('Defaults')).id);
    const r = await call('POST', `/api/accounts/${accountId}/keys`);
    expect(r.status).toBe(201);
    expect(r.body.record).toMatchObject({ name: '', allowed_models: null, expires_at: null });
  });

  it('rejects bad model lists and expiries, naming the field', async () => {
    const accountId = String((await newAccount('Bad keys')).id);
    const cases: [Json, string][] = [
      [{ allowed_models: [] }, 'allowed_models'],
      [{ allowed_models: 'chat-a' }, 'allowed_models'],
      [{ allowed_models: ['ok', 'has space'] }, 'allowed_models[1]'],
      [{ expires_at: 'next week' }, 'expires_at'],
      [{ expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
      // Dates Date.parse would roll over (2 March, the next day) instead of refusing.
      [{ expires_at: '2099-02-30' }, 'expires_at'],
      [{ expires_at: '2099-01-01T24:00Z' }, 'expires_at'],
      [{ expires_at: '2099-13-01T00:00:00Z' }, 'expires_at'],
      [{ models: ['chat-a'] }, 'models'],
    ];
    for (const [body, field] of cases) {
      const r = await call('POST', `/api/accounts/${accountId}/keys`, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(errorOf(r).message).toContain(field);
    }
  });

  it('disables a key, then deletes it', async () => {
    const accountId = String((await newAccount('Lifecycle')).id);
    const created = await call('POST', `/api/accounts/${accountId}/keys`, { name: 'temp' });
    const keyId = String((created.body.record as Json).id);

    const disabled = await call('POST', `/api/keys/${keyId}/disable`);
    expect(disabled.body).toMatchObject({ id: keyId, status: 'disabled' });
    expect((await store.findKeyByHash(hashKey(String(created.body.key))))?.key.status).toBe(
      'disabled',
    );

    expect((await call('DELETE', `/api/keys/${keyId}`)).body).toEqual({ id: keyId, deleted: true });
    expect((await call('GET', `/api/accounts/${accountId}/keys`)).body.data).toEqual([]);
    const again = await call('DELETE', `/api/keys/${keyId}`);
    expect(again.status).toBe(404);
    expect(errorOf(again).code).toBe('not_found');
    expect((await call('POST', `/api/keys/${keyId}/disable`)).status).toBe(404);
  });
});

describe('usage log', () => {
  let accountId = '';
  let keyId = '';

  beforeAll(async () => {
    accountId = String((await newAccount('Usage')).id);
    await call('POST', `/api/accounts/${accountId}/topup`, { amount: '5' });
    keyId = (await store.createKey({ accountId, name: 'u', allowedModels: null, expiresAt: null }))
      .record.id;
    await chargeUsage(accountId, keyId, 'req_usage_1', 330_000n);
    await chargeUsage(accountId, keyId, 'req_usage_2', 1n);
  });

  it('lists an account’s requests newest first with costs in yuan strings', async () => {
    const r = await call('GET', `/api/usage?account_id=${accountId}`, undefined, READONLY_TOKEN);
    expect(r.status).toBe(200);
    const rows = r.body.data as Json[];
    expect(rows.map((x) => x.request_id)).toEqual(['req_usage_2', 'req_usage_1']);
    expect(rows[1]).toEqual({
      request_id: 'req_usage_1',
      client_request_id: null,
      account_id: accountId,
      key_id: keyId,
      model: 'chat-a',
      endpoint: 'chat',
      channel: 'demo',
      status: 'ok',
      http_status: 200,
      input_tokens: 1200,
      cache_hit_tokens: 200,
      output_tokens: 300,
      reasoning_tokens: 0,
      estimated: false,
      cost: '0.00033',
      reserved: '0.00033',
      capped: false,
      peak_applied: false,
      campaign_id: null,
      price_snapshot: { inputNanoPerToken: '100', outputNanoPerToken: '2200', campaignId: null },
      latency_ms: 42,
      upstream_request_id: 'up-1',
      created_at: expect.any(String),
    });
    expect(rows[0]?.cost).toBe('0.000000001');
  });

  it('filters by key, model and limit', async () => {
    const byKey = await call('GET', `/api/usage?key_id=${keyId}&model=chat-a&limit=1`);
    expect((byKey.body.data as Json[]).map((x) => x.request_id)).toEqual(['req_usage_2']);
    const none = await call('GET', `/api/usage?account_id=${accountId}&model=paint-1`);
    expect(none.body.data).toEqual([]);
    const future = await call('GET', `/api/usage?account_id=${accountId}&from=2100-01-01`);
    expect(future.body.data).toEqual([]);
  });

  it('finds the requests a caller sent with its own x-request-id, by that id', async () => {
    await chargeUsage(accountId, keyId, 'req_usage_3', 5n, 'caller-abc-123');
    await chargeUsage(accountId, keyId, 'req_usage_4', 7n, 'caller-abc-123');
    const listed = await call('GET', '/api/usage?client_request_id=caller-abc-123');
    expect(listed.status).toBe(200);
    expect((listed.body.data as Json[]).map((x) => [x.request_id, x.client_request_id])).toEqual([
      ['req_usage_4', 'caller-abc-123'],
      ['req_usage_3', 'caller-abc-123'],
    ]);
    const one = await call('GET', '/api/usage/caller-abc-123');
    expect(one.body).toMatchObject({ request_id: 'req_usage_4', cost: '0.000000007' });
  });

  it('rejects a bad limit, date or parameter', async () => {
    for (const q of ['limit=0', 'limit=abc', 'limit=1001', 'from=soon', 'acount_id=x']) {
      const r = await call('GET', `/api/usage?${q}`);
      expect(r.status, q).toBe(400);
      expect(errorOf(r).code).toBe('invalid_parameter_error');
    }
  });

  it('reads one request by its id, and 404 for an unknown one', async () => {
    const r = await call('GET', '/api/usage/req_usage_1');
    expect(r.body).toMatchObject({ request_id: 'req_usage_1', cost: '0.00033' });
    const missing = await call('GET', '/api/usage/req_never');
    expect(missing.status).toBe(404);
    expect(errorOf(missing).code).toBe('not_found');
  });
});

describe('blacklist', () => {
  it('restricts a source, lists it, and lifts it', async () => {
    const added = await call('POST', '/api/blacklist', {
      source: 'ip:203.0.113.7',
      seconds: 600,
      reason: 'credential stuffing',
    });
    expect(added.status).toBe(201);
    expect(added.body).toEqual({
      source: 'ip:203.0.113.7',
      reason: 'credential stuffing',
      until: expect.any(String),
      added_by: 'admin',
    });
    expect(await limiter.isBlacklisted('ip:203.0.113.7')).not.toBeNull();

    const keySource = 'key:key_AbCdEfGh12345678';
    await call('POST', '/api/blacklist', { source: keySource, seconds: 60, reason: 'leaked' });
    const list = await call('GET', '/api/blacklist', undefined, READONLY_TOKEN);
    expect((list.body.data as Json[]).map((x) => x.source)).toEqual([keySource, 'ip:203.0.113.7']);

    const removed = await call('DELETE', `/api/blacklist/${encodeURIComponent('ip:203.0.113.7')}`);
    expect(removed.body).toEqual({ source: 'ip:203.0.113.7', removed: true });
    expect(await limiter.isBlacklisted('ip:203.0.113.7')).toBeNull();
    const again = await call('DELETE', `/api/blacklist/${encodeURIComponent('ip:203.0.113.7')}`);
    expect(again.status).toBe(404);
    await call('DELETE', `/api/blacklist/${encodeURIComponent(keySource)}`);
    expect((await call('GET', '/api/blacklist')).body.data).toEqual([]);
  });

  it('accepts IPv6 sources', async () => {
    const source = 'ip:2001:db8::1';
    expect((await call('POST', '/api/blacklist', { source, seconds: 5, reason: 'x' })).status).toBe(
      201,
    );
    expect((await call('DELETE', `/api/blacklist/${encodeURIComponent(source)}`)).status).toBe(200);
  });

  it('rejects a bad source, duration or missing reason', async () => {
    const cases: [Json, string][] = [
      [{ source: '203.0.113.7', seconds: 60, reason: 'x' }, 'source'],
      [{ source: 'ip:not-an-ip', seconds: 60, reason: 'x' }, 'source'],
      [{ source: 'ip:203.0.113.7', seconds: 0, reason: 'x' }, 'seconds'],
      [{ source: 'ip:203.0.113.7', seconds: 1.5, reason: 'x' }, 'seconds'],
      [{ source: 'ip:203.0.113.7', seconds: 31_536_001, reason: 'x' }, 'seconds'],
      [{ source: 'ip:203.0.113.7', seconds: 60 }, 'reason'],
    ];
    for (const [body, field] of cases) {
      const r = await call('POST', '/api/blacklist', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(errorOf(r).message).toContain(field);
    }
    expect((await call('DELETE', '/api/blacklist/garbage')).status).toBe(400);
    expect((await call('GET', '/api/blacklist')).body.data).toEqual([]);
  });
});
