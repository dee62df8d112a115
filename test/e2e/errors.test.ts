// Every error status of spec 7.1 with its code, the error object and request id, and proof that
// no rejection reaches an upstream or costs anything.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.ts';

let h: Harness;
let key: string;
let accountId: string;

beforeAll(async () => {
  h = await startHarness();
  ({ key, accountId } = await h.account({ balance: '10' }));
}, 60_000);
afterAll(async () => h?.close());

/** The next gpt-x answer as given: a chat.completion with an id and usage the mock would not make. */
function scriptAnswer(id: string, usage: object): void {
  h.mock.script({
    model: 'gpt-x-up',
    status: 200,
    body: {
      id,
      object: 'chat.completion',
      created: 1,
      model: 'gpt-x-up',
      choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
      usage,
    },
  });
}

async function post(
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{
  status: number;
  json: { error: { message: string; type: string; code: string; request_id: string } };
  headers: Headers;
}> {
  const res = await fetch(`${h.gateway.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as never, headers: res.headers };
}

const chat = { model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] };

describe('rejections: status, code, request id, and no upstream call', () => {
  const cases: [
    string,
    () => Promise<{
      status: number;
      json: { error: { code: string; type: string; request_id: string } };
      headers: Headers;
    }>,
    number,
    string,
  ][] = [
    ['no key', () => post('/v1/chat/completions', chat), 401, 'invalid_token'],
    [
      'an unknown key',
      () => post('/v1/chat/completions', chat, { authorization: 'Bearer sk-sy-nope' }),
      401,
      'invalid_token',
    ],
    [
      'malformed JSON',
      () => post('/v1/chat/completions', '{"model": ', { authorization: `Bearer ${key}` }),
      400,
      'invalid_parameter_error',
    ],
    [
      'a role outside the four',
      () =>
        post(
          '/v1/chat/completions',
          { model: 'gpt-x', messages: [{ role: 'wizard', content: 'x' }] },
          { authorization: `Bearer ${key}` },
        ),
      400,
      'invalid_parameter_error',
    ],
    [
      'a bad content block',
      () =>
        post(
          '/v1/chat/completions',
          { model: 'gpt-x', messages: [{ role: 'user', content: [{ type: 'audio' }] }] },
          { authorization: `Bearer ${key}` },
        ),
      400,
      'invalid_parameter_error',
    ],
    [
      'more answers (n) than any supplier gives',
      () => post('/v1/chat/completions', { ...chat, n: 129 }, { authorization: `Bearer ${key}` }),
      400,
      'invalid_parameter_error',
    ],
    [
      'a wrong type',
      () =>
        post(
          '/v1/chat/completions',
          { ...chat, temperature: 'hot' },
          { authorization: `Bearer ${key}` },
        ),
      400,
      'invalid_parameter_error',
    ],
    [
      'an unknown model',
      () =>
        post(
          '/v1/chat/completions',
          { ...chat, model: 'ghost' },
          { authorization: `Bearer ${key}` },
        ),
      404,
      'model_not_found',
    ],
    [
      'an endpoint not open for the model',
      () =>
        post('/v1/embeddings', { model: 'plain', input: 'x' }, { authorization: `Bearer ${key}` }),
      404,
      'model_not_found',
    ],
    [
      'a route with no channel (not open)',
      () => post('/v1/audio/transcriptions', chat, { authorization: `Bearer ${key}` }),
      404,
      'model_not_found',
    ],
    [
      'a real-name model without verification',
      () =>
        post(
          '/v1/images/generations',
          { model: 'painter', prompt: 'a cat' },
          { authorization: `Bearer ${key}` },
        ),
      403,
      'realname_required',
    ],
  ];
  for (const [what, call, status, code] of cases) {
    it(`${what}: ${status} ${code}`, async () => {
      const before = h.mock.callCount();
      const r = await call();
      expect(r.status).toBe(status);
      expect(r.json.error).toMatchObject({ code, type: 'switchyard_api_error' });
      expect(r.json.error.request_id).toBe(r.headers.get('x-request-id'));
      expect(h.mock.callCount()).toBe(before);
    });
  }

  it('an oversized body: 413', async () => {
    const r = await post(
      '/v1/chat/completions',
      { ...chat, messages: [{ role: 'user', content: 'x'.repeat(11 * 1024 * 1024) }] },
      { authorization: `Bearer ${key}` },
    );
    expect(r.status).toBe(413);
    expect(r.json.error.code).toBe('request_too_large');
  });

  it('a key not allowed the model: 403 no_access_to_model', async () => {
    const other = await h.account({ allowedModels: ['plain'] });
    const before = h.mock.callCount();
    const r = await post('/v1/chat/completions', chat, { authorization: `Bearer ${other.key}` });
    expect(r.status).toBe(403);
    expect(r.json.error.code).toBe('no_access_to_model');
    expect(h.mock.callCount()).toBe(before);
  });

  it('a disabled key: 401 invalid_token within the cache poll', async () => {
    const other = await h.account();
    const ok = await post('/v1/chat/completions', chat, { authorization: `Bearer ${other.key}` });
    expect(ok.status).toBe(200);
    await h.store.disableKey(other.keyId);
    await new Promise((r) => setTimeout(r, 400));
    const r = await post('/v1/chat/completions', chat, { authorization: `Bearer ${other.key}` });
    expect(r.status).toBe(401);
  });

  it('insufficient balance: 403 with insufficient_user_quota, no upstream call, no reservation left', async () => {
    const poor = await h.account({ balance: '0.000001' });
    const before = h.mock.callCount();
    const r = await post('/v1/chat/completions', chat, { authorization: `Bearer ${poor.key}` });
    expect(r.status).toBe(403);
    expect(r.json.error.code).toBe('insufficient_user_quota');
    expect(r.json.error.message).toContain('insufficient_user_quota');
    expect(h.mock.callCount()).toBe(before);
    expect((await h.store.getAccount(poor.accountId))?.reservedNano).toBe(0n);
  });

  it('the per-model RPM: 429 rate_limited with Retry-After and x-ratelimit headers', async () => {
    const body = { model: 'limited', messages: [{ role: 'user', content: 'x' }] };
    const first = await post('/v1/chat/completions', body, { authorization: `Bearer ${key}` });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-limit-requests')).toBe('2');
    await post('/v1/chat/completions', body, { authorization: `Bearer ${key}` });
    const before = h.mock.callCount();
    const r = await post('/v1/chat/completions', body, { authorization: `Bearer ${key}` });
    expect(r.status).toBe(429);
    expect(r.json.error.code).toBe('rate_limited');
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(r.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(h.mock.callCount()).toBe(before);
  });

  it('every channel at capacity: 429 channel_capacity_exceeded', async () => {
    h.mock.script({ model: 'narrow-up', delayMs: 600 });
    const slow = post(
      '/v1/chat/completions',
      { model: 'narrow', messages: [{ role: 'user', content: 'x' }] },
      { authorization: `Bearer ${key}` },
    );
    await new Promise((r) => setTimeout(r, 150));
    const r = await post(
      '/v1/chat/completions',
      { model: 'narrow', messages: [{ role: 'user', content: 'x' }] },
      { authorization: `Bearer ${key}` },
    );
    expect(r.status).toBe(429);
    expect(r.json.error.code).toBe('channel_capacity_exceeded');
    expect((await slow).status).toBe(200);
    // The slot came back: the next call passes.
    expect(
      (
        await post(
          '/v1/chat/completions',
          { model: 'narrow', messages: [{ role: 'user', content: 'x' }] },
          { authorization: `Bearer ${key}` },
        )
      ).status,
    ).toBe(200);
  });

  it('an upstream 4xx caused by the request: 400 with its reason, no failover', async () => {
    h.mock.script({
      model: 'gpt-x-up',
      status: 400,
      body: { error: { message: 'context too long', type: 'invalid_request_error' } },
    });
    const before = h.mock.callCount();
    const r = await post('/v1/chat/completions', chat, { authorization: `Bearer ${key}` });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toContain('context too long');
    expect(h.mock.callCount() - before).toBe(1);
  });

  it('a temporarily restricted source: 403 temp_blacklisted', async () => {
    await h.gateway.ctx.limiter.addToBlacklist('ip:127.0.0.1', 60_000, 'test');
    try {
      const before = h.mock.callCount();
      const r = await post('/v1/chat/completions', chat, { authorization: `Bearer ${key}` });
      expect(r.status).toBe(403);
      expect(r.json.error.code).toBe('temp_blacklisted');
      expect(h.mock.callCount()).toBe(before);
    } finally {
      await h.gateway.ctx.limiter.removeFromBlacklist('ip:127.0.0.1');
    }
  });

  it('images: 400 for a size the model does not support, 400 for an empty prompt', async () => {
    const verified = await h.account({ realname: true });
    const auth = { authorization: `Bearer ${verified.key}` };
    expect(
      (
        await post(
          '/v1/images/generations',
          { model: 'painter', prompt: 'a cat', size: '999x999' },
          auth,
        )
      ).status,
    ).toBe(400);
    expect(
      (await post('/v1/images/generations', { model: 'painter', prompt: '' }, auth)).status,
    ).toBe(400);
    expect(
      (
        await post(
          '/v1/images/generations',
          { model: 'painter', prompt: 'a cat', size: 'big' },
          auth,
        )
      ).status,
    ).toBe(400);
  });

  it('images bill per image by size tier', async () => {
    const verified = await h.account({ realname: true });
    const res = await fetch(`${h.gateway.url}/v1/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${verified.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'painter', prompt: 'a cat', size: '512x512', n: 2 }),
    });
    expect(res.status).toBe(200);
    const row = await h.usage(res.headers.get('x-request-id')!);
    expect(row.costNano).toBe(250_000_000n);
  });

  it('an image request without a size gets the size it is billed at', async () => {
    // Regression: the first listed size was priced, but the upstream was sent no size and made
    // its own default (1024x1024 at OpenAI) whatever was billed.
    const verified = await h.account({ realname: true });
    const res = await fetch(`${h.gateway.url}/v1/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${verified.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'painter', prompt: 'a cat' }),
    });
    expect(res.status).toBe(200);
    expect(h.mock.calls.at(-1)?.body).toMatchObject({ model: 'painter-up', size: '1024x1024' });
    expect((await h.usage(res.headers.get('x-request-id')!)).costNano).toBe(200_000_000n);
  });

  it('keeps a valid incoming x-request-id and puts it on the usage row', async () => {
    const r = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'x-request-id': 'caller-chosen-id-42',
      },
      body: JSON.stringify(chat),
    });
    expect(r.headers.get('x-request-id')).toBe('caller-chosen-id-42');
    const row = await h.usage('caller-chosen-id-42');
    expect(row).toMatchObject({ accountId, clientRequestId: 'caller-chosen-id-42', status: 'ok' });
    expect(row.costNano > 0n).toBe(true);
    // The upstream sees the same id (the channel's own headers cannot replace it) beside the
    // channel's key and headers.
    expect(h.mock.calls.at(-1)?.headers).toMatchObject({
      'x-request-id': 'caller-chosen-id-42',
      'x-e2e-channel': 'oa-main',
      'content-type': 'application/json',
    });
    expect(h.mock.calls.at(-1)?.headers.authorization).toMatch(/^Bearer /);
  });

  it('charges every request sent with the same x-request-id (it was billed once)', async () => {
    // Regression: the caller's id was the usage row's key, so the second and third requests sent
    // with one id were answered and never charged (decision 0036).
    const { key: k, accountId: acct } = await h.account({ balance: '1' });
    const before = (await h.store.getAccount(acct))!.balanceNano;
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${h.gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${k}`,
          'content-type': 'application/json',
          'x-request-id': 'the-same-id-every-time',
        },
        body: JSON.stringify(chat),
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-request-id')).toBe('the-same-id-every-time');
      await r.text();
    }
    await h.store.flush();
    const rows = await h.store.listUsage({ clientRequestId: 'the-same-id-every-time' });
    expect(rows).toHaveLength(3);
    expect(new Set(rows.map((x) => x.requestId)).size).toBe(3);
    expect(rows.every((x) => x.status === 'ok' && x.costNano > 0n)).toBe(true);
    const spent = rows.reduce((sum, x) => sum + x.costNano, 0n);
    expect((await h.store.getAccount(acct))!.balanceNano).toBe(before - spent);
  });

  it('bills an answer whose id Postgres cannot store, and the requests after it', async () => {
    // Regression: a NUL in the upstream's id made the lease book's write fail and retry forever,
    // so neither this request nor any later one was charged (src/store/storable-text.ts).
    const { key: k, accountId: acct } = await h.account({ balance: '1' });
    scriptAnswer('chatcmpl-\u0000odd', {
      prompt_tokens: 10,
      completion_tokens: 5,
      total_tokens: 15,
    });
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const r = await post('/v1/chat/completions', chat, { authorization: `Bearer ${k}` });
      expect(r.status).toBe(200);
      ids.push(r.headers.get('x-request-id')!);
    }
    const [odd, next] = await Promise.all(ids.map((id) => h.usage(id)));
    expect(odd).toMatchObject({ upstreamRequestId: 'chatcmpl-odd', status: 'ok' });
    expect(odd!.costNano > 0n && next!.costNano > 0n).toBe(true);
    const balance = (await h.store.getAccount(acct))!.balanceNano;
    expect(balance).toBe(1_000_000_000n - odd!.costNano - next!.costNano);
  });

  it('bills an absurd token count at the reservation and frees the hold', async () => {
    // Regression: completion_tokens 1e16 failed the settlement's safe-integer check, so the
    // request was never charged and its hold stayed until the process ended (session 21).
    const { key: k } = await h.account({ balance: '1' });
    scriptAnswer('chatcmpl-huge', {
      prompt_tokens: 5,
      completion_tokens: 1e16,
      total_tokens: 1e16,
    });
    const r = await post('/v1/chat/completions', chat, { authorization: `Bearer ${k}` });
    expect(r.status).toBe(200);
    const row = await h.usage(r.headers.get('x-request-id')!);
    expect(row).toMatchObject({ status: 'ok', capped: true, outputTokens: 2 ** 40 });
    expect(row.costNano).toBe(row.reservedNano);
  });

  it('estimates the output of an answer whose usage has no completion count', async () => {
    // Regression: usage {prompt_tokens} alone was billed as 0 output tokens, not estimated.
    scriptAnswer('chatcmpl-half', { prompt_tokens: 5 });
    const r = await post('/v1/chat/completions', chat, { authorization: `Bearer ${key}` });
    expect(r.status).toBe(200);
    const row = await h.usage(r.headers.get('x-request-id')!);
    expect(row).toMatchObject({ inputTokens: 5, estimated: true });
    expect(row.outputTokens).toBeGreaterThan(0);
  });

  it('a max_tokens no balance can cover: 403 insufficient_user_quota, not 503', async () => {
    // Regression: the reservation overflowed int8 in the database (session 21).
    for (const max of [1e14, 1e300]) {
      const r = await post(
        '/v1/chat/completions',
        { ...chat, max_tokens: max },
        { authorization: `Bearer ${key}` },
      );
      expect(r.status).toBe(403);
      expect(r.json.error.message).toContain('insufficient_user_quota');
    }
  });

  it('a body its translation cannot read: 400, no upstream call, and the capacity slot back', async () => {
    // Regression: the translators threw on shapes validation let through (a null system block,
    // a null tool); the client got 502 and the channel's slot stayed taken until its TTL.
    const before = h.mock.callCount();
    const bad = [
      { system: [null] },
      { tools: [null] },
      { messages: [{ role: 'user', content: [{ type: 'image' }] }] },
    ];
    for (const extra of bad) {
      const r = await post(
        '/v1/messages',
        { model: 'gpt-x', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], ...extra },
        { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
      );
      expect(r.status, JSON.stringify(extra)).toBe(400);
    }
    expect(h.mock.callCount()).toBe(before);
    expect(await h.gateway.ctx.limiter.slotsInUse('oa-main')).toBe(0);
  });

  it('unknown routes: 404 not_found in the error object', async () => {
    const r = await post('/v1/nothing', {});
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe('not_found');
  });
});
