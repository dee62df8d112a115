// What reaches the log: a fastify (pino) logger built from loggerOptions, writing to memory, never
// writes a key; error text is scrubbed; the access line has its fixed shape.

import Fastify, { LogController } from 'fastify';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CENSOR,
  accessLogLine,
  loggerOptions,
  redactLogObject,
  redactSecrets,
  scrubSecrets,
  scrubUrl,
} from '../../src/telemetry/logging.ts';
import { lazyChildLogger } from '../../src/telemetry/lazy-child-logger.ts';

const CLIENT_KEY = 'sk-sy-' + 'A1b2C3d4E5f6G7h8I9j0'.repeat(2);
const ANTHROPIC_KEY = 'sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2';
const UPSTREAM_KEY = 'sk-proj-Q1w2E3r4T5y6U7i8O9p0';
const QUERY_KEY = 'AIzaSyD-fake-google-key-000000000000';

type LogLine = Record<string, unknown>;

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

function appWithMemoryLog(): { app: FastifyInstance; lines: () => LogLine[]; raw: () => string } {
  const chunks: string[] = [];
  const app = Fastify({
    logger: { ...loggerOptions('info'), stream: { write: (s: string) => chunks.push(s) } },
  });
  apps.push(app);
  return {
    app,
    raw: () => chunks.join(''),
    lines: () =>
      chunks
        .join('')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as LogLine),
  };
}

describe('the request logger', () => {
  it('writes Authorization, x-api-key and apiKey fields as [redacted]', async () => {
    const { app, lines, raw } = appWithMemoryLog();
    app.post('/v1/chat/completions', async (request) => {
      request.log.info({ headers: request.headers }, 'headers seen');
      request.log.info(
        { apiKey: CLIENT_KEY, channel: { id: 'claude-a', api_key: ANTHROPIC_KEY } },
        'key fields',
      );
      return { ok: true };
    });

    const res = await app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: {
        authorization: `Bearer ${CLIENT_KEY}`,
        'x-api-key': ANTHROPIC_KEY,
        'content-type': 'application/json',
      },
      payload: { model: 'deepseek-chat' },
    });
    expect(res.statusCode).toBe(200);

    const out = raw();
    for (const secret of [CLIENT_KEY, ANTHROPIC_KEY]) expect(out).not.toContain(secret);
    const headers = lines().find((l) => l.msg === 'headers seen')?.headers as LogLine;
    expect(headers.authorization).toBe(CENSOR);
    expect(headers['x-api-key']).toBe(CENSOR);
    expect(headers['content-type']).toBe('application/json');
    const fields = lines().find((l) => l.msg === 'key fields');
    expect(fields?.apiKey).toBe(CENSOR);
    expect(fields?.channel).toEqual({ id: 'claude-a', api_key: CENSOR });
  });

  it('logs a request as its method, URL and id only, with secret query values removed', async () => {
    const { app, lines, raw } = appWithMemoryLog();
    app.get('/v1/models', async () => ({ data: [] }));

    await app.inject({
      method: 'GET',
      url: `/v1/models?key=${QUERY_KEY}&limit=5`,
      headers: { authorization: `Bearer ${CLIENT_KEY}` },
    });

    expect(raw()).not.toContain(QUERY_KEY);
    expect(raw()).not.toContain(CLIENT_KEY);
    const incoming = lines().find((l) => l.msg === 'incoming request');
    expect(incoming?.req).toEqual({
      method: 'GET',
      url: `/v1/models?key=${CENSOR}&limit=5`,
      id: incoming?.reqId,
    });
    const completed = lines().find((l) => l.msg === 'request completed');
    expect(completed?.res).toEqual({ statusCode: 200 });
  });

  it('scrubs keys out of a logged error message and stack', async () => {
    const { app, lines, raw } = appWithMemoryLog();
    app.get('/boom', async () => {
      throw new Error(`upstream said: Incorrect API key provided: ${UPSTREAM_KEY}`);
    });

    await app.inject({ method: 'GET', url: '/boom' });

    expect(raw()).not.toContain(UPSTREAM_KEY);
    const err = lines().find((l) => l.err !== undefined)?.err as LogLine;
    expect(err.type).toBe('Error');
    expect(err.message).toBe(`upstream said: Incorrect API key provided: ${CENSOR}`);
    expect(err.stack).toContain(CENSOR);
  });

  it('logs the access line as it is, since it holds ids and counts but no secret', () => {
    const { app, lines } = appWithMemoryLog();
    const line = accessLogLine({
      reqId: 'req_7',
      route: '/v1/chat/completions',
      model: 'glm-4',
      channel: 'zhipu-a',
      status: 200,
      usage: { inputTokens: 900, cacheHitTokens: 100, outputTokens: 250 },
      costNano: 2_345_000n,
      latencyMs: 812,
      accountId: 'acct_1',
      keyId: 'key_3',
    });
    app.log.info(line, 'access');

    const logged = lines().find((l) => l.msg === 'access');
    expect(logged).toMatchObject({
      reqId: 'req_7',
      route: '/v1/chat/completions',
      model: 'glm-4',
      channel: 'zhipu-a',
      status: 200,
      tokens: { input: 900, cacheHit: 100, output: 250 },
      costYuan: '0.002345',
      latencyMs: 812,
      accountId: 'acct_1',
      keyId: 'key_3',
    });
  });
});

describe('censoring secret fields', () => {
  it('censors secret-named fields at any depth and in arrays, without touching the original', () => {
    const original = {
      account: 'acct_1',
      channels: [{ id: 'a', apiKey: UPSTREAM_KEY }, { id: 'b' }],
      upstream: { request: { headers: { authorization: 'Bearer x', accept: '*/*' } } },
    };
    const snapshot = structuredClone(original);

    expect(redactLogObject(original)).toEqual({
      account: 'acct_1',
      channels: [{ id: 'a', apiKey: CENSOR }, { id: 'b' }],
      upstream: { request: { headers: { authorization: CENSOR, accept: '*/*' } } },
    });
    expect(original).toEqual(snapshot);
  });

  it('returns the same object when there is nothing to censor', () => {
    const line = { reqId: 'r', tokens: { input: 1, cacheHit: 0, output: 2 }, keyId: 'key_1' };
    expect(redactLogObject(line)).toBe(line);
  });
});

describe('the access log line', () => {
  it('shows zero tokens and no cost for a request rejected before its body was read', () => {
    expect(
      accessLogLine({
        reqId: 'req_8',
        route: '/v1/chat/completions',
        model: null,
        channel: null,
        status: 401,
        usage: null,
        costNano: null,
        latencyMs: 2,
        accountId: null,
        keyId: null,
      }),
    ).toEqual({
      reqId: 'req_8',
      route: '/v1/chat/completions',
      model: null,
      channel: null,
      status: 401,
      tokens: { input: 0, cacheHit: 0, output: 0 },
      costYuan: null,
      latencyMs: 2,
      accountId: null,
      keyId: null,
    });
  });
});

describe('the secret scrubbers', () => {
  it('removes sk- keys, Google keys and bearer tokens from free text', () => {
    expect(scrubSecrets(`bad key ${UPSTREAM_KEY}.`)).toBe(`bad key ${CENSOR}.`);
    expect(scrubSecrets(`x-api-key=${ANTHROPIC_KEY}`)).toBe(`x-api-key=${CENSOR}`);
    expect(scrubSecrets(`"${CLIENT_KEY}"`)).toBe(`"${CENSOR}"`);
    expect(scrubSecrets(`key=${QUERY_KEY}`)).toBe(`key=${CENSOR}`);
    expect(scrubSecrets('Authorization: Bearer eyJhbGciOi.abc-def_ghi, next')).toBe(
      `Authorization: Bearer ${CENSOR}, next`,
    );
    expect(scrubSecrets('authorization: bearer abc123')).toBe(`authorization: Bearer ${CENSOR}`);
  });

  it('leaves ordinary text alone', () => {
    const text = 'model deepseek-chat uses sk-learn, task-sk-12 and a risk-free plan';
    expect(scrubSecrets(text)).toBe(text);
  });

  it('removes each known secret wherever it appears, the longer one whole', () => {
    expect(redactSecrets('tok abc123 and abc123456 and x', ['abc123', 'abc123456', ''])).toBe(
      `tok ${CENSOR} and ${CENSOR} and x`,
    );
    expect(redactSecrets('nothing here', ['secret-value'])).toBe('nothing here');
  });

  it('removes secret query parameter values from URLs', () => {
    expect(scrubUrl('/v1/models')).toBe('/v1/models');
    expect(scrubUrl('/x?api_key=abc&Token=def&page=2#top')).toBe(
      `/x?api_key=${CENSOR}&Token=${CENSOR}&page=2#top`,
    );
  });
});

describe("the request's child logger (made on first use)", () => {
  it('writes with the request id and the same redaction once a route logs, and is never made when none does', async () => {
    const chunks: string[] = [];
    const app = Fastify({
      logger: { ...loggerOptions('info'), stream: { write: (s: string) => chunks.push(s) } },
      childLoggerFactory: lazyChildLogger,
      // As the gateway (src/http/app.ts): the observer writes the access line, not fastify.
      logController: new LogController({ disableRequestLogging: true }),
    });
    apps.push(app);
    let made = 0;
    const child = app.log.child.bind(app.log);
    app.log.child = (...args: Parameters<typeof child>) => {
      made++;
      return child(...args);
    };
    app.get('/quiet', async (request) => ({ level: request.log.level }));
    app.get('/loud', async (request) => {
      request.log.warn({ apiKey: CLIENT_KEY }, 'something odd');
      request.log.error('and worse');
      return { ok: true };
    });

    await app.ready(); // fastify makes children of its own while it starts
    made = 0;
    const quiet = await app.inject({ method: 'GET', url: '/quiet' });
    expect(quiet.json()).toEqual({ level: 'info' });
    expect(made).toBe(0);

    const loud = await app.inject({ method: 'GET', url: '/loud' });
    expect(loud.statusCode).toBe(200);
    expect(made).toBe(1);
    const lines = chunks
      .join('')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as LogLine)
      .filter((l) => l.msg === 'something odd' || l.msg === 'and worse');
    expect(lines).toHaveLength(2);
    expect(lines[0]!.reqId).toMatch(/^req-/);
    expect(lines[1]!.reqId).toBe(lines[0]!.reqId);
    expect(lines[0]!.apiKey).toBe(CENSOR);
    expect(chunks.join('')).not.toContain(CLIENT_KEY);
  });
});
