// The mock upstream driven by the official SDKs: proves it speaks each protocol faithfully
// enough that the gateway's tests against it mean something.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MOCK_DEFAULT_KEY, startMockUpstream, type MockUpstream } from '../mock-upstream/server.ts';

let mock: MockUpstream;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  mock = await startMockUpstream();
  openai = new OpenAI({ apiKey: MOCK_DEFAULT_KEY, baseURL: `${mock.url}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: MOCK_DEFAULT_KEY, baseURL: mock.url, maxRetries: 0 });
});
afterAll(async () => {
  await mock.close();
});
beforeEach(() => {
  mock.reset();
});

const tools: OpenAI.Chat.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'search', parameters: { type: 'object' } } },
];

describe('OpenAI SDK against the mock', () => {
  it('gets a chat completion with usage', async () => {
    const c = await openai.chat.completions.create({
      model: 'gpt-up',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(c.choices[0]?.message.content).toBe('Hello from the mock upstream.');
    expect(c.usage?.completion_tokens).toBe(6);
    expect(mock.callCount()).toBe(1);
    expect(mock.calls[0]?.path).toBe('/v1/chat/completions');
    expect(mock.calls[0]?.headers.authorization).toBe(`Bearer ${MOCK_DEFAULT_KEY}`);
  });

  it('streams a chat completion that the SDK stream helper assembles, usage last', async () => {
    mock.script({ cacheHitTokens: 5, chunks: 4 });
    const stream = openai.chat.completions.stream({
      model: 'gpt-up',
      messages: [{ role: 'user', content: 'hi' }],
      stream_options: { include_usage: true },
      reasoning_effort: 'high',
    });
    const final = await stream.finalChatCompletion();
    expect(final.choices[0]?.message.content).toBe('Hello from the mock');
    expect(final.usage).toMatchObject({
      completion_tokens: 12,
      prompt_tokens_details: { cached_tokens: 5 },
      completion_tokens_details: { reasoning_tokens: 8 },
    });
  });

  it('returns a tool call when tools are given and the user says "use tool" (stream and not)', async () => {
    const request = {
      model: 'gpt-up',
      messages: [{ role: 'user' as const, content: 'Please use tool now' }],
      tools,
    };
    const plain = await openai.chat.completions.create(request);
    expect(plain.choices[0]?.finish_reason).toBe('tool_calls');
    expect(plain.choices[0]?.message.tool_calls?.[0]).toMatchObject({
      type: 'function',
      function: { name: 'search', arguments: '{"query":"mock"}' },
    });
    const streamed = await openai.chat.completions.stream(request).finalChatCompletion();
    expect(streamed.choices[0]?.message.tool_calls?.[0]).toMatchObject({
      function: { name: 'search', arguments: '{"query":"mock"}' },
    });
  });

  it('serves the Responses API, streamed and not', async () => {
    const plain = await openai.responses.create({ model: 'gpt-up', input: 'hi' });
    expect(plain.output_text).toBe('Hello from the mock upstream.');
    expect(plain.usage?.output_tokens).toBe(6);
    const streamed = await openai.responses
      .stream({ model: 'gpt-up', input: 'hi' })
      .finalResponse();
    expect(streamed.output_text).toBe('Hello from the mock upstream.');
    expect(streamed.usage?.input_tokens).toBeGreaterThan(0);
  });

  it('serves embeddings (the SDK asks for base64 and decodes it) and image generation', async () => {
    const e = await openai.embeddings.create({ model: 'emb', input: ['a', 'bb'] });
    expect(e.data).toHaveLength(2);
    expect(e.data[0]?.embedding).toHaveLength(8);
    expect(e.usage.prompt_tokens).toBe(2);
    const img = await openai.images.generate({ model: 'dall-e-3', prompt: 'a cat', n: 2 });
    expect(img.data?.map((d) => d.url?.startsWith(mock.url))).toEqual([true, true]);
  });

  it('rejects a wrong key with 401 in the OpenAI error format', async () => {
    const bad = new OpenAI({ apiKey: 'wrong', baseURL: `${mock.url}/v1`, maxRetries: 0 });
    const err: unknown = await bad.models.list().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((err as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('invalid_api_key');
  });

  it('plays scripted statuses with retry-after, for the matching model only', async () => {
    mock.script({ model: 'busy-model', status: 429, retryAfter: 7 });
    const ok = await openai.chat.completions.create({
      model: 'other-model',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(ok.object).toBe('chat.completion');
    const err: unknown = await openai.chat.completions
      .create({ model: 'busy-model', messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe(
      '7',
    );
  });

  it('cuts a stream after the scripted number of chunks', async () => {
    mock.script({ cutAfterChunks: 2 });
    const stream = await openai.chat.completions.create({
      model: 'gpt-up',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const seen: string[] = [];
    const err: unknown = await (async () => {
      for await (const chunk of stream) seen.push(chunk.choices[0]?.delta.content ?? '');
    })().then(
      () => null,
      (e: unknown) => e,
    );
    expect(seen).toEqual(['', 'Hello']);
    expect(err).toBeInstanceOf(Error);
  });

  it('leaves usage out when scripted to, and paces a delayed stream chunk by chunk', async () => {
    mock.script({ omitUsage: true, delayMs: 20, chunkDelayMs: 5, chunks: 3 });
    const stream = await openai.chat.completions.create({
      model: 'gpt-up',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Hello from the');
    expect(chunks.some((c) => c.usage !== null && c.usage !== undefined)).toBe(false);
  });

  it('stalls a call until the client gives up', async () => {
    mock.script({ stall: true });
    const err: unknown = await openai.chat.completions
      .create({ model: 'gpt-up', messages: [{ role: 'user', content: 'hi' }] }, { timeout: 300 })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
  });
});

describe('Anthropic SDK against the mock', () => {
  it('gets a message with usage and checks the headers the SDK sends', async () => {
    mock.script({ cacheHitTokens: 40 });
    const m = await anthropic.messages.create({
      model: 'claude-up',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(m.content[0]).toMatchObject({ type: 'text', text: 'Hello from the mock upstream.' });
    expect(m.usage).toMatchObject({ cache_read_input_tokens: 40, output_tokens: 6 });
    // @anthropic-ai/sdk 1.x authenticates with a Bearer key and API version 2026-10-21.
    expect(mock.calls[0]?.headers.authorization).toBe(`Bearer ${MOCK_DEFAULT_KEY}`);
    expect(mock.calls[0]?.headers['anthropic-version']).toBe('2026-10-21');
  });

  it("accepts the spec's credentials: x-api-key with anthropic-version 2023-06-01", async () => {
    const specStyle = new Anthropic({
      apiKey: null,
      baseURL: mock.url,
      maxRetries: 0,
      defaultHeaders: { 'x-api-key': MOCK_DEFAULT_KEY, 'anthropic-version': '2023-06-01' },
    });
    const m = await specStyle.messages.create({
      model: 'claude-up',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(m.stop_reason).toBe('end_turn');
    expect(mock.calls[0]?.headers['x-api-key']).toBe(MOCK_DEFAULT_KEY);
    expect(mock.calls[0]?.headers.authorization).toBeUndefined();
    expect(mock.calls[0]?.headers['anthropic-version']).toBe('2023-06-01');
  });

  it('streams a message that the SDK stream helper assembles, with thinking and tool use', async () => {
    const stream = anthropic.messages.stream({
      model: 'claude-up',
      max_tokens: 4000,
      thinking: { type: 'enabled', budget_tokens: 2000 },
      tools: [{ name: 'search', input_schema: { type: 'object' } }],
      messages: [{ role: 'user', content: 'use tool' }],
    });
    const final = await stream.finalMessage();
    expect(final.content.map((b) => b.type)).toEqual(['thinking', 'text', 'tool_use']);
    expect(final.content[2]).toMatchObject({ name: 'search', input: { query: 'mock' } });
    expect(final.stop_reason).toBe('tool_use');
    expect(final.usage.output_tokens).toBe(6 + 12 + 8); // text chunks + tool call + thinking
  });

  it('rejects a wrong key with 401 in the Anthropic error format', async () => {
    const bad = new Anthropic({ apiKey: 'wrong', baseURL: mock.url, maxRetries: 0 });
    const err: unknown = await bad.messages
      .create({ model: 'c', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((err as InstanceType<typeof Anthropic.AuthenticationError>).error).toMatchObject({
      type: 'error',
      error: { type: 'authentication_error' },
    });
  });

  it('rejects a missing anthropic-version header', async () => {
    const res = await fetch(`${mock.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': MOCK_DEFAULT_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'c', max_tokens: 5, messages: [] }),
    });
    expect(res.status).toBe(400);
  });
});

describe('mock control over HTTP (for the benchmark process)', () => {
  it('queues behaviours, lists calls and resets', async () => {
    const script = await fetch(`${mock.url}/__mock/script`, {
      method: 'POST',
      body: JSON.stringify([{ path: '/v1/chat/completions', status: 503, times: 2 }]),
    });
    expect(await script.json()).toEqual({ queued: 1 });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${mock.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${MOCK_DEFAULT_KEY}` },
        body: JSON.stringify({ model: 'm', messages: [] }),
      });
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    expect(statuses).toEqual([503, 503, 200]);
    const calls = (await (await fetch(`${mock.url}/__mock/calls`)).json()) as { count: number };
    expect(calls.count).toBe(3);
    await fetch(`${mock.url}/__mock/reset`, { method: 'POST' });
    expect(mock.callCount()).toBe(0);
  });
});
