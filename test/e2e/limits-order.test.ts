// The order of the checks (docs/decisions/0009-check-order.md), seen from outside: a request that
// fails two checks gets the earlier one's error, and a request refused early spends nothing a
// later check counts (an RPM slot, a reservation, an upstream call).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { E2E_CONFIG, startHarness, withChatModel, type Harness } from './harness.ts';

const SOURCE = 'ip:127.0.0.1';

/** E2E_CONFIG plus a model limited to 2 RPM per account. */
function files(mockUrl: string): Record<string, string> {
  return {
    ...withChatModel(E2E_CONFIG(mockUrl), 'rpm2'),
    'limits.yaml': `limits:
  rpm:
    scope: account
    models: { limited: 2, rpm2: 2 }
`,
  };
}

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ files });
}, 60_000);
afterAll(async () => h?.close());

async function post(
  body: unknown,
  apiKey: string | null,
): Promise<{ status: number; code: string | null; id: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (apiKey !== null) headers.authorization = `Bearer ${apiKey}`;
  const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const json = (await res.json()) as { error?: { code: string } };
  return {
    status: res.status,
    code: json.error?.code ?? null,
    id: res.headers.get('x-request-id')!,
  };
}

const hi = (model: string): unknown => ({ model, messages: [{ role: 'user', content: 'hi' }] });

/** Runs `fn` while 127.0.0.1 is restricted. */
async function whileBanned(fn: () => Promise<void>): Promise<void> {
  await h.gateway.ctx.limiter.addToBlacklist(SOURCE, 60_000, 'order test');
  try {
    await fn();
  } finally {
    await h.gateway.ctx.limiter.removeFromBlacklist(SOURCE);
  }
}

describe('a restricted source is refused first', () => {
  it('before its key is looked at: 403 for a good key and for a bad one', async () => {
    const { key } = await h.account();
    await whileBanned(async () => {
      expect((await post(hi('plain'), key)).code).toBe('temp_blacklisted');
      expect((await post(hi('plain'), 'sk-sy-wrong')).code).toBe('temp_blacklisted');
      expect((await post(hi('plain'), null)).code).toBe('temp_blacklisted');
    });
  });

  it('before its body is parsed: 403 even for malformed JSON', async () => {
    await whileBanned(async () => {
      const r = await post('{"model": ', 'sk-sy-wrong');
      expect(r.status).toBe(403);
      expect(r.code).toBe('temp_blacklisted');
    });
  });
});

describe('authentication comes before anything about the request', () => {
  it('no key and an unknown model: 401, so nothing about the models leaks', async () => {
    expect(await post(hi('ghost'), null)).toMatchObject({ status: 401, code: 'invalid_token' });
    expect(await post(hi('ghost'), 'sk-sy-wrong')).toMatchObject({ status: 401 });
  });

  it('no key and a malformed body: 401', async () => {
    const r = await post('{"model": ', null);
    expect(r.status).toBe(401);
    expect(r.code).toBe('invalid_token');
  });
});

describe('permission and validation come before the RPM limit', () => {
  it('requests refused for permission or an invalid body burn no RPM slot', async () => {
    const { key } = await h.account({ allowedModels: ['rpm2'] });
    const restricted = await h.account({ allowedModels: ['plain'] });
    const before = h.mock.callCount();
    for (let i = 0; i < 3; i++) {
      const invalid = await post(
        { model: 'rpm2', messages: [{ role: 'wizard', content: 'x' }] },
        key,
      );
      expect(invalid.code).toBe('invalid_parameter_error');
      expect((await post(hi('rpm2'), restricted.key)).code).toBe('no_access_to_model');
    }
    expect(h.mock.callCount()).toBe(before);
    // The account still has both of its 2 requests this minute.
    expect((await post(hi('rpm2'), key)).status).toBe(200);
    expect((await post(hi('rpm2'), key)).status).toBe(200);
    expect((await post(hi('rpm2'), key)).code).toBe('rate_limited');
  });
});

describe('the RPM limit comes before the balance reservation', () => {
  it('an account over its RPM gets 429 whatever its balance; no hold or slot is ever left', async () => {
    const poor = await h.account({ balance: '0.000001' });
    const codes: (string | null)[] = [];
    for (let i = 0; i < 3; i++) codes.push((await post(hi('rpm2'), poor.key)).code);
    // The balance check is the reservation, after RPM: the first two are counted and then refused
    // for balance, the third is refused by RPM without touching the store.
    expect(codes).toEqual(['insufficient_user_quota', 'insufficient_user_quota', 'rate_limited']);
    expect((await h.store.getAccount(poor.accountId))?.reservedNano).toBe(0n);
    // The channel slot taken together with the RPM hit went back with the refusal.
    expect(await h.gateway.ctx.limiter.slotsInUse('oa-main')).toBe(0);
    expect(await h.store.listUsage({ accountId: poor.accountId })).toEqual([]);
  });
});
