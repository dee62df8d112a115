// The built-in demo upstream (`base_url: builtin:demo`) driven by the official SDKs: what a user
// of `npm start` gets back, offline, from each endpoint the example config opens.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoUpstream, type DemoUpstream } from '../../src/demo/demo-upstream.ts';
import { estimateInputTokens } from '../../src/demo/plan.ts';

let demo: DemoUpstream;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  demo = await startDemoUpstream();
  // Any key is accepted: the demo is loopback-only and has no accounts.
  openai = new OpenAI({ apiKey: 'any-key-at-all', baseURL: demo.url, maxRetries: 0 });
  anthropic = new Anthropic({
    apiKey: 'another-key',
    baseURL: demo.url.replace(/\/v1$/, ''),
    maxRetries: 0,
  });
});
afterAll(async () => {
  await demo.close();
});

const hi = [{ role: 'user' as const, content: 'hi' }];
const ANSWER = 'Switchyard offline demo: you said "hi".';
/** Switchyard | offline | demo: | you | said | "hi". */
const ANSWER_TOKENS = 6;

describe('the demo upstream', () => {
  it('listens on loopback with a base URL ending in /v1', () => {
    expect(demo.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  });

  it('answers a chat completion saying it is the offline demo, with deterministic usage', async () => {
    const c = await openai.chat.completions.create({ model: 'demo-chat', messages: hi });
    expect(c.choices[0]?.message.content).toBe(ANSWER);
    expect(c.choices[0]?.finish_reason).toBe('stop');
    expect(c.model).toBe('demo-chat');
    const prompt = estimateInputTokens({ messages: hi });
    expect(c.usage).toMatchObject({
      prompt_tokens: prompt,
      completion_tokens: ANSWER_TOKENS,
      total_tokens: prompt + ANSWER_TOKENS,
    });
    const again = await openai.chat.completions.create({ model: 'demo-chat', messages: hi });
    expect(again.usage).toEqual(c.usage);
  });

  it('streams a chat completion with usage in a last chunk when include_usage is set', async () => {
    const stream = await openai.chat.completions.create({
      model: 'demo-chat',
      messages: hi,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      text += chunk.choices[0]?.delta.content ?? '';
    }
    expect(text).toBe(ANSWER);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage?.completion_tokens).toBe(ANSWER_TOKENS);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
  });

  it('streams without usage when include_usage is not set', async () => {
    const stream = await openai.chat.completions.create({
      model: 'demo-chat',
      messages: hi,
      stream: true,
    });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.some((c) => c.usage !== undefined && c.usage !== null)).toBe(false);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('stop');
  });

  it('repeats a long message cut at 200 characters', async () => {
    const long = 'word '.repeat(100);
    const c = await openai.chat.completions.create({
      model: 'demo-chat',
      messages: [{ role: 'user', content: long }],
    });
    expect(c.choices[0]?.message.content).toBe(
      `Switchyard offline demo: you said "${long.trim().slice(0, 200)}…".`,
    );
  });

  it('calls the first tool when tools are given and the user says "use tool"', async () => {
    const request = {
      model: 'demo-chat',
      messages: [{ role: 'user' as const, content: 'Please use tool' }],
      tools: [
        {
          type: 'function' as const,
          function: { name: 'lookup', parameters: { type: 'object' } },
        },
      ],
    };
    const plain = await openai.chat.completions.create(request);
    expect(plain.choices[0]?.finish_reason).toBe('tool_calls');
    expect(plain.choices[0]?.message.tool_calls?.[0]).toMatchObject({
      type: 'function',
      function: { name: 'lookup', arguments: '{"query":"demo"}' },
    });
    const streamed = await openai.chat.completions.stream(request).finalChatCompletion();
    expect(streamed.choices[0]?.message.tool_calls?.[0]).toMatchObject({
      function: { name: 'lookup', arguments: '{"query":"demo"}' },
    });
  });

  it('serves the Responses API, streamed and not', async () => {
    const plain = await openai.responses.create({ model: 'demo-chat', input: 'hi' });
    expect(plain.output_text).toBe(ANSWER);
    expect(plain.usage?.output_tokens).toBe(ANSWER_TOKENS);
    const streamed = await openai.responses
      .stream({ model: 'demo-chat', input: [{ role: 'user', content: 'hi' }] })
      .finalResponse();
    expect(streamed.output_text).toBe(ANSWER);
    expect(streamed.usage?.input_tokens).toBeGreaterThan(0);
  });

  it('serves embeddings, which the SDK asks for in base64 and decodes', async () => {
    const e = await openai.embeddings.create({ model: 'demo-chat', input: ['a', 'abcdefgh'] });
    expect(e.data).toHaveLength(2);
    expect(e.data[0]?.embedding).toHaveLength(8);
    expect(e.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
  });

  it('generates images as expiring URLs that serve a PNG', async () => {
    const img = await openai.images.generate({ model: 'demo-image', prompt: 'a cat', n: 2 });
    expect(img.data).toHaveLength(2);
    const url = img.data?.[0]?.url ?? '';
    const origin = demo.url.replace(/\/v1$/, '');
    expect(url.startsWith(`${origin}/files/`)).toBe(true);
    const expiry = new URL(url).searchParams.get('se') ?? '';
    expect(Date.parse(expiry)).toBeGreaterThan(Date.now());
    expect(img.data?.[1]?.url).not.toBe(url);
    const file = await fetch(url);
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toBe('image/png');
    expect((await file.arrayBuffer()).byteLength).toBeGreaterThan(0);
  });

  it('lists its models', async () => {
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['demo-chat', 'demo-image']);
  });

  it('answers what the gateway sends for a channel with no keys (an empty Bearer)', async () => {
    const res = await fetch(`${demo.url}/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer ', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'demo-chat', messages: hi }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as OpenAI.Chat.ChatCompletion;
    expect(body.choices[0]?.message.content).toBe(ANSWER);
  });

  it('rejects a chat request without messages with 400 in the OpenAI error format', async () => {
    const err: unknown = await openai.chat.completions
      .create({
        model: 'demo-chat',
      } as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
  });
});

describe('the demo upstream speaking Anthropic messages', () => {
  it('answers a message with usage', async () => {
    const m = await anthropic.messages.create({
      model: 'demo-chat',
      max_tokens: 100,
      messages: hi,
    });
    expect(m.content).toEqual([{ type: 'text', text: ANSWER }]);
    expect(m.stop_reason).toBe('end_turn');
    expect(m.usage).toMatchObject({
      input_tokens: estimateInputTokens({ messages: hi }),
      output_tokens: ANSWER_TOKENS,
    });
  });

  it("accepts the gateway's credentials: x-api-key with anthropic-version 2023-06-01", async () => {
    const specStyle = new Anthropic({
      apiKey: null,
      baseURL: demo.url.replace(/\/v1$/, ''),
      maxRetries: 0,
      defaultHeaders: { 'x-api-key': 'whatever', 'anthropic-version': '2023-06-01' },
    });
    const m = await specStyle.messages.create({
      model: 'demo-chat',
      max_tokens: 100,
      messages: hi,
    });
    expect(m.content[0]).toMatchObject({ type: 'text', text: ANSWER });
  });

  it('streams a message that the SDK stream helper assembles, with thinking', async () => {
    const stream = anthropic.messages.stream({
      model: 'demo-chat',
      max_tokens: 4000,
      thinking: { type: 'enabled', budget_tokens: 2000 },
      messages: hi,
    });
    const final = await stream.finalMessage();
    expect(final.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    expect(final.content[1]).toMatchObject({ type: 'text', text: ANSWER });
    expect(final.usage.output_tokens).toBe(ANSWER_TOKENS + 8); // text + thinking
  });
});
