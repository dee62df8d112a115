// What SDK users see through the running gateway: chat (stream and not, tools, images, reasoning),
// responses, messages (native and translated), model listing, failover, cut streams, aborts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.ts';

let h: Harness;
let key: string;
let accountId: string;

beforeAll(async () => {
  h = await startHarness();
  ({ key, accountId } = await h.account({ balance: '50', realname: true }));
}, 60_000);
afterAll(async () => h?.close());

/** gpt-x prices: ¥2 / ¥0.5 / ¥8 per 1M tokens = 2000 / 500 / 8000 nano-yuan per token. */
function gptCost(u: { inputTokens: number; cacheHitTokens: number; outputTokens: number }): bigint {
  return (
    BigInt(u.inputTokens) * 2000n + BigInt(u.cacheHitTokens) * 500n + BigInt(u.outputTokens) * 8000n
  );
}

describe('chat completions', () => {
  it('answers a non-streamed chat with usage, and bills it exactly', async () => {
    const { data, response } = await h
      .openai(key)
      .chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.choices[0]?.message.content).toBe('Hello from the mock upstream.');
    // 6 answer tokens + 8 reasoning tokens: gpt-x's family maps the default effort (low) to reasoning.
    expect(data.usage?.completion_tokens).toBe(14);
    const requestId = response.headers.get('x-request-id')!;
    expect(requestId).toMatch(/^req_/);
    const row = await h.usage(requestId);
    expect(row).toMatchObject({
      accountId,
      model: 'gpt-x',
      channelId: 'oa-main',
      status: 'ok',
      outputTokens: 14,
      reasoningTokens: 8,
      estimated: false,
    });
    expect(row.costNano).toBe(gptCost(row));
    expect(h.mock.calls.at(-1)?.body).toMatchObject({ model: 'gpt-x-up', reasoning_effort: 'low' });
  });

  it('streams chunk by chunk and ends with [DONE]; no usage chunk unless asked, but still billed', async () => {
    const stream = await h.openai(key).chat.completions.create({
      model: 'gpt-x',
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    let text = '';
    let usageChunks = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usageChunks++;
    }
    expect(text).toBe('Hello from the mock upstream.');
    expect(usageChunks).toBe(0);
    // The gateway asked the upstream for usage anyway, to bill.
    expect(h.mock.calls.at(-1)?.body).toMatchObject({ stream_options: { include_usage: true } });
  });

  it('puts usage in the last chunk with stream_options.include_usage', async () => {
    const { data: stream, response } = await h
      .openai(key)
      .chat.completions.create({
        model: 'gpt-x',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'hi' }],
      })
      .withResponse();
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1)!;
    expect(last.usage?.completion_tokens).toBe(14);
    const row = await h.usage(response.headers.get('x-request-id')!);
    expect(row.outputTokens).toBe(14);
    expect(row.costNano).toBe(gptCost(row));
  });

  it('passes tools through and returns the tool call', async () => {
    const res = await h.openai(key).chat.completions.create({
      model: 'gpt-x',
      messages: [{ role: 'user', content: 'please use tool' }],
      tools: [
        {
          type: 'function',
          function: { name: 'lookup', parameters: { type: 'object', properties: {} } },
        },
      ],
      tool_choice: 'auto',
    });
    expect(res.choices[0]?.message.tool_calls?.[0]).toMatchObject({
      type: 'function',
      function: { name: 'lookup' },
    });
  });

  it('accepts image input on a model with the capability and refuses it on one without', async () => {
    const messages = [
      {
        role: 'user' as const,
        content: [
          { type: 'text' as const, text: 'what is this' },
          { type: 'image_url' as const, image_url: { url: 'https://example.com/cat.png' } },
        ],
      },
    ];
    const ok = await h.openai(key).chat.completions.create({ model: 'gpt-x', messages });
    expect(ok.choices[0]?.message.content).toBeTruthy();
    const before = h.mock.callCount();
    await expect(
      h.openai(key).chat.completions.create({ model: 'plain', messages }),
    ).rejects.toMatchObject({
      status: 400,
      error: {
        code: 'invalid_parameter_error',
        message: 'model "plain" does not support image input',
      },
    });
    expect(h.mock.callCount()).toBe(before);
  });

  it('maps reasoning_effort through the family mapping, the same for every entry point', async () => {
    await h.openai(key).chat.completions.create({
      model: 'gpt-x',
      reasoning_effort: 'high' as never,
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(h.mock.calls.at(-1)?.body).toMatchObject({ reasoning_effort: 'high' });
    await h.openai(key).chat.completions.create({
      model: 'gpt-x',
      reasoning_effort: 'max' as never,
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(h.mock.calls.at(-1)?.body).toMatchObject({
      reasoning_effort: 'high',
      verbosity: 'high',
    });
    await h.openai(key).chat.completions.create({
      model: 'claude-y',
      reasoning_effort: 'high' as never,
      max_tokens: 8000,
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(h.mock.calls.at(-1)?.body).toMatchObject({
      thinking: { type: 'enabled', budget_tokens: 4096 },
    });
    await h.anthropic(key).messages.create({
      model: 'claude-y',
      max_tokens: 8000,
      reasoning_effort: 'high',
      messages: [{ role: 'user', content: 'x' }],
    } as never);
    expect(h.mock.calls.at(-1)?.body).toMatchObject({
      thinking: { type: 'enabled', budget_tokens: 4096 },
    });
    await expect(
      h.openai(key).chat.completions.create({
        model: 'gpt-x',
        reasoning_effort: 'medium',
        messages: [{ role: 'user', content: 'x' }],
      }),
    ).rejects.toMatchObject({
      status: 400,
      error: { message: 'reasoning_effort must be one of: low, high, max' },
    });
  });

  it('bills cache hits at the cache-hit price only when the supplier reports them', async () => {
    h.mock.script({ model: 'gpt-x-up', cacheHitTokens: 40, inputTokens: 10 });
    const { response } = await h
      .openai(key)
      .chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'cached' }] })
      .withResponse();
    const row = await h.usage(response.headers.get('x-request-id')!);
    expect(row).toMatchObject({ inputTokens: 10, cacheHitTokens: 40, outputTokens: 14 });
    expect(row.costNano).toBe(10n * 2000n + 40n * 500n + 14n * 8000n);
  });

  it('estimates with a tokenizer when the upstream reports no usage, and marks it', async () => {
    h.mock.script({ model: 'gpt-x-up', omitUsage: true });
    const { response } = await h
      .openai(key)
      .chat.completions.create({
        model: 'gpt-x',
        messages: [{ role: 'user', content: 'count me please' }],
      })
      .withResponse();
    const row = await h.usage(response.headers.get('x-request-id')!);
    expect(row.estimated).toBe(true);
    expect(row.inputTokens).toBeGreaterThan(0);
    // The answer's text is estimated too: it was billed as 0 output tokens (session 21). The
    // mock's answer, "Hello from the mock upstream.", is 6-7 tokens in any BPE.
    expect(row.outputTokens).toBeGreaterThanOrEqual(5);
    expect(row.outputTokens).toBeLessThanOrEqual(10);
  });

  it('serves the playground route the same way', async () => {
    const res = await fetch(`${h.gateway.url}/pg/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { object: string }).object).toBe('chat.completion');
  });
});

describe('responses and messages', () => {
  it('relays responses natively, streamed and not', async () => {
    const res = await h.openai(key).responses.create({ model: 'gpt-x', input: 'hello' });
    expect(res.output_text).toContain('Hello');
    const stream = await h
      .openai(key)
      .responses.create({ model: 'gpt-x', input: 'hello', stream: true });
    const types = new Set<string>();
    for await (const ev of stream) types.add(ev.type);
    expect(types).toContain('response.output_text.delta');
    expect(types).toContain('response.completed');
  });

  it('relays messages natively to an Anthropic channel, streamed and not', async () => {
    const a = h.anthropic(key);
    const msg = await a.messages.create({
      model: 'claude-y',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(msg.type).toBe('message');
    expect(msg.content[0]).toMatchObject({ type: 'text' });
    const stream = a.messages.stream({
      model: 'claude-y',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const final = await stream.finalMessage();
    expect(final.usage.output_tokens).toBeGreaterThan(0);
  });

  it('translates messages onto an OpenAI channel and chat onto an Anthropic channel', async () => {
    const msg = await h.anthropic(key).messages.create({
      model: 'gpt-x',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(msg).toMatchObject({ type: 'message', role: 'assistant', model: 'gpt-x' });
    expect(h.mock.calls.at(-1)?.path).toBe('/v1/chat/completions');
    const streamed = await h
      .anthropic(key)
      .messages.stream({
        model: 'gpt-x',
        max_tokens: 100,
        messages: [{ role: 'user', content: 'hi' }],
      })
      .finalMessage();
    expect(streamed.content[0]).toMatchObject({
      type: 'text',
      text: 'Hello from the mock upstream.',
    });

    const chat = await h.openai(key).chat.completions.create({
      model: 'claude-y',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ],
    });
    expect(chat).toMatchObject({ object: 'chat.completion', model: 'claude-y' });
    expect(h.mock.calls.at(-1)).toMatchObject({
      path: '/v1/messages',
      body: { system: 'be brief', model: 'claude-y-up' },
    });
    const stream = await h.openai(key).chat.completions.create({
      model: 'claude-y',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'use tool' }],
      tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }],
    });
    let toolName = '';
    let args = '';
    let usage = 0;
    for await (const c of stream) {
      const tc = c.choices[0]?.delta.tool_calls?.[0];
      if (tc?.function?.name) toolName = tc.function.name;
      args += tc?.function?.arguments ?? '';
      if (c.usage) usage = c.usage.completion_tokens;
    }
    expect(toolName).toBe('lookup');
    expect(JSON.parse(args)).toEqual({ query: 'mock' });
    expect(usage).toBeGreaterThan(0);
  });

  it('answers 400 when max_tokens is missing and 404 when the model is not open for messages', async () => {
    const before = h.mock.callCount();
    await expect(
      h.anthropic(key).messages.create({
        model: 'claude-y',
        messages: [{ role: 'user', content: 'hi' }],
      } as never),
    ).rejects.toMatchObject({
      status: 400,
    });
    await expect(
      h.anthropic(key).messages.create({
        model: 'plain',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'hi' }],
      }),
    ).rejects.toMatchObject({
      status: 404,
      error: { type: 'error', error: { code: 'model_not_found', type: 'switchyard_api_error' } },
    });
    expect(h.mock.callCount()).toBe(before);
  });
});

describe('models', () => {
  it('lists only the models the key may use, with owner and endpoints', async () => {
    const limited = await h.account({ allowedModels: ['gpt-*', 'plain'] });
    const page = await h.openai(limited.key).models.list();
    const ids = page.data.map((m) => m.id).sort();
    expect(ids).toEqual(['gpt-x', 'plain']);
    expect(page.data.find((m) => m.id === 'gpt-x')).toMatchObject({
      owned_by: 'openai',
      supported_endpoints: ['chat', 'responses', 'messages', 'embeddings'],
    });
    expect((await h.openai(limited.key).models.retrieve('plain')).id).toBe('plain');
    await expect(h.openai(limited.key).models.retrieve('claude-y')).rejects.toMatchObject({
      status: 404,
    });
  });
});

describe('failover and streams', () => {
  it('fails over to the next channel on a 5xx before the first byte, and bills only the success', async () => {
    h.mock.script({ model: 'gpt-x-up', status: 500 });
    const { data, response } = await h
      .openai(key)
      .chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'x' }] })
      .withResponse();
    expect(data.choices[0]?.message.content).toBe('Hello from the mock upstream.');
    expect(h.mock.calls.slice(-2).map((c) => (c.body as { model: string }).model)).toEqual([
      'gpt-x-up',
      'gpt-x-backup',
    ]);
    const row = await h.usage(response.headers.get('x-request-id')!);
    expect(row).toMatchObject({ channelId: 'oa-backup', status: 'ok' });
  });

  // The second is a regression: the chat relay's closing [DONE] counted as the first byte, so the
  // empty stream was answered `data: [DONE]` and billed, and the backup channel never tried.
  it.each([
    ['is cut before its first event', { cutAfterChunks: 0 }],
    ['is a 200 that ends without a single event', { status: 200, body: '' }],
  ])('fails over when a stream %s', async (_, behaviour) => {
    h.mock.script({ model: 'gpt-x-up', ...behaviour });
    const stream = await h.openai(key).chat.completions.create({
      model: 'gpt-x',
      stream: true,
      messages: [{ role: 'user', content: 'x' }],
    });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta.content ?? '';
    expect(text).toBe('Hello from the mock upstream.');
    expect(h.mock.calls.at(-1)?.body).toMatchObject({ model: 'gpt-x-backup' });
    // Three failures in a row cool a channel: the tests after these want oa-main first.
    h.gateway.ctx.health.success('oa-main');
  });

  it('does not retry after the first byte: a cut stream ends with an error event', async () => {
    h.mock.script({ model: 'gpt-x-up', cutAfterChunks: 3 });
    const before = h.mock.callCount();
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'gpt-x',
        stream: true,
        messages: [{ role: 'user', content: 'x' }],
      }),
    });
    const body = await res.text();
    expect(res.status).toBe(200);
    expect(body).toContain('"code":"upstream_error"');
    expect(body.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(h.mock.callCount() - before).toBe(1);
    const row = await h.usage(res.headers.get('x-request-id')!);
    expect(row.status).toBe('aborted');
  });

  it('a cut Anthropic stream bills what was relayed, not the 1 output token of message_start', async () => {
    // Regression: message_start reports output_tokens: 1, and with the stream cut before
    // message_delta that 1 was billed as final however many deltas the client had read.
    h.mock.script({ model: 'claude-y-up', chunks: 60, cutAfterChunks: 45 });
    const res = await fetch(`${h.gateway.url}/v1/messages`, {
      method: 'POST',
      headers: {
        'x-api-key': key,
        'anthropic-version': '2023-06-01',
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        model: 'claude-y',
        max_tokens: 200,
        stream: true,
        messages: [{ role: 'user', content: 'x' }],
      }),
    });
    const body = await res.text();
    const deltas = body.split('\n').filter((l) => l.includes('"text_delta"')).length;
    expect(deltas).toBeGreaterThan(30);
    const row = await h.usage(res.headers.get('x-request-id')!);
    expect(row.status).toBe('aborted');
    expect(row.estimated).toBe(true);
    expect(row.outputTokens).toBeGreaterThanOrEqual(deltas);
  });

  it('holds the upstream to the output bound it reserved: max_tokens, max_output_tokens, and n', async () => {
    // Regression: a request without max_tokens reserved the model's max_output_tokens, but the
    // upstream was sent no cap and the charge is capped at the reservation, so a longer answer
    // went unbilled past it; and `n` answers were reserved as one (session 21).
    const send = async (path: string, body: object): Promise<string> => {
      const r = await fetch(`${h.gateway.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(r.status).toBe(200);
      await r.text();
      return r.headers.get('x-request-id')!;
    };
    const one = await send('/v1/chat/completions', {
      model: 'gpt-x',
      messages: [{ role: 'user', content: 'x' }],
    });
    // gpt-x is a reasoning model: OpenAI's take the bound as max_completion_tokens.
    expect(h.mock.calls.at(-1)?.body).toMatchObject({ max_completion_tokens: 1000 });
    await send('/v1/chat/completions', {
      model: 'plain',
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(h.mock.calls.at(-1)?.body).toMatchObject({ max_tokens: 100 });
    await send('/v1/responses', { model: 'gpt-x', input: 'x' });
    expect(h.mock.calls.at(-1)?.body).toMatchObject({ max_output_tokens: 1000 });
    const four = await send('/v1/chat/completions', {
      model: 'gpt-x',
      n: 4,
      messages: [{ role: 'user', content: 'x' }],
    });
    const [r1, r4] = await Promise.all([h.usage(one), h.usage(four)]);
    expect(r4.reservedNano > 3n * r1.reservedNano).toBe(true);
  });

  it('returns 502 upstream_error when every channel fails, at no cost', async () => {
    h.mock.script({ model: 'gpt-x-up', status: 503 }, { model: 'gpt-x-backup', status: 502 });
    const { response } = await h
      .openai(key)
      .chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'x' }] })
      .withResponse()
      .catch((e: { status: number; headers: Headers }) => ({ response: e }));
    expect((response as { status: number }).status).toBe(502);
    const id = (response as { headers: Headers }).headers.get('x-request-id')!;
    const row = await h.usage(id);
    expect(row).toMatchObject({ status: 'failed', costNano: 0n });
  });

  it('a client that stops reading a long stream gets every chunk once it reads again', async () => {
    // ~5 MB of events: past the loopback socket buffers, so the gateway's writes report
    // backpressure, the relay pauses the upstream body and resumes it on 'drain'.
    const chunks = 40_000;
    h.mock.script({ model: 'gpt-x-up', chunks });
    const { request } = await import('node:http');
    const url = new URL(`${h.gateway.url}/v1/chat/completions`);
    const { body, requestId } = await new Promise<{ body: string; requestId: string }>(
      (resolve, reject) => {
        const req = request(
          url,
          {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          },
          (res) => {
            res.pause();
            const parts: Buffer[] = [];
            setTimeout(() => {
              res.on('data', (b: Buffer) => parts.push(b));
              res.on('end', () =>
                resolve({
                  body: Buffer.concat(parts).toString('utf8'),
                  requestId: String(res.headers['x-request-id']),
                }),
              );
              res.resume();
            }, 500);
          },
        );
        req.on('error', reject);
        req.end(
          JSON.stringify({
            model: 'gpt-x',
            stream: true,
            max_tokens: 50_000,
            messages: [{ role: 'user', content: 'x' }],
          }),
        );
      },
    );
    const events = body.split('\n\n').filter((e) => e.startsWith('data: {'));
    const text = events
      .map((e) => JSON.parse(e.slice(6)) as { choices: { delta: { content?: string } }[] })
      .map((c) => c.choices[0]?.delta.content ?? '')
      .join('');
    const { answerText } = await import('../mock-upstream/plan.ts');
    expect(text).toBe(answerText(chunks));
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
    const row = await h.usage(requestId);
    expect(row).toMatchObject({ status: 'ok', estimated: false });
    expect(row.outputTokens).toBeGreaterThanOrEqual(chunks);
  }, 60_000);

  it('a streamed answer tells the client how long its idle connection stays open, as an answer does', async () => {
    // Without the keep-alive hint undici drops an idle connection after its own 4 s, and every
    // stream after a pause paid a new connection (the paced bench reconnected ~half, session 12).
    const { request } = await import('node:http');
    const headersOf = (stream: boolean): Promise<Record<string, unknown>> =>
      new Promise((resolve, reject) => {
        const req = request(
          new URL(`${h.gateway.url}/v1/chat/completions`),
          {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.headers));
          },
        );
        req.on('error', reject);
        req.end(
          JSON.stringify({ model: 'gpt-x', stream, messages: [{ role: 'user', content: 'hi' }] }),
        );
      });
    const streamed = await headersOf(true);
    const answered = await headersOf(false);
    expect(streamed['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(streamed.connection).toBe('keep-alive');
    expect(streamed['keep-alive']).toMatch(/^timeout=\d+$/);
    expect(streamed['keep-alive']).toBe(answered['keep-alive']);
  });

  it('aborts the upstream when the client goes away and bills only what was used', async () => {
    h.mock.script({ model: 'gpt-x-up', chunkDelayMs: 150, chunks: 20 });
    const ac = new AbortController();
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      signal: ac.signal,
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'x-request-id': 'client-abort-0001',
      },
      body: JSON.stringify({
        model: 'gpt-x',
        stream: true,
        messages: [{ role: 'user', content: 'x' }],
      }),
    });
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    const row = await h.usage('client-abort-0001');
    expect(row.status).toBe('client_aborted');
    expect(row.outputTokens).toBeLessThan(20);
  });

  it('aborts a non-streamed upstream call when the client goes away, at no cost and with no failover', async () => {
    h.mock.script({ model: 'gpt-x-up', delayMs: 600 });
    const before = h.mock.callCount();
    const ac = new AbortController();
    const sent = fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      signal: ac.signal,
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'x-request-id': 'client-abort-answer-0001',
      },
      body: JSON.stringify({ model: 'gpt-x', messages: [{ role: 'user', content: 'x' }] }),
    }).catch(() => null);
    while (h.mock.callCount() === before) await sleep(10);
    ac.abort();
    expect(await sent).toBeNull();
    const row = await h.usage('client-abort-answer-0001');
    expect(row).toMatchObject({ status: 'client_aborted', costNano: 0n });
    expect(h.mock.callCount() - before).toBe(1);
  });

  // Last in the file: oa-main rests for a second, and other models use it too.
  it('an upstream 429 with Retry-After fails over and rests that channel for as long', async () => {
    h.mock.script({ model: 'gpt-x-up', status: 429, retryAfter: 1 });
    const ask = async (): Promise<string[]> => {
      const from = h.mock.calls.length;
      const answer = await h
        .openai(key)
        .chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'x' }] });
      expect(answer.choices[0]?.message.content).toBe('Hello from the mock upstream.');
      return h.mock.calls.slice(from).map((c) => (c.body as { model: string }).model);
    };
    expect(await ask()).toEqual(['gpt-x-up', 'gpt-x-backup']);
    expect(await ask()).toEqual(['gpt-x-backup']);
    await sleep(1_100);
    expect(await ask()).toEqual(['gpt-x-up']);
  });
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
