import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mapChatRequest } from '../../src/protocols/openai/chat-request.ts';
import { readChatResponse } from '../../src/protocols/openai/chat-response.ts';
import { ChatStreamRelay } from '../../src/protocols/openai/chat-stream-relay.ts';
import { readEmbeddingsResponse } from '../../src/protocols/openai/embeddings.ts';
import { openAiHeaders } from '../../src/protocols/openai/headers.ts';
import { readImagesResponse } from '../../src/protocols/openai/images.ts';
import {
  mapResponsesRequest,
  readResponsesResponse,
} from '../../src/protocols/openai/responses.ts';
import { ResponsesStreamRelay } from '../../src/protocols/openai/responses-stream-relay.ts';
import type { ChatRequest } from '../../src/protocols/types.ts';
import { MOCK_DEFAULT_KEY, startMockUpstream, type MockUpstream } from '../mock-upstream/server.ts';
import { chatChunks, fetchText, parseSse, runRelay, sseText } from './helpers.ts';

const auth = openAiHeaders(MOCK_DEFAULT_KEY);
let mock: MockUpstream;
beforeAll(async () => {
  mock = await startMockUpstream();
});
afterAll(async () => {
  await mock.close();
});

const CAP = { tokens: 4096, reasoning: false };

const chat: ChatRequest = {
  model: 'public-model',
  messages: [{ role: 'user', content: 'hi' }],
  stream: true,
  reasoning_effort: 'high',
};

describe('chat request mapping', () => {
  it('replaces the model, merges reasoning params and drops the client reasoning_effort', () => {
    const m = mapChatRequest(chat, 'deepseek-reasoner', { thinking: { type: 'enabled' } }, CAP);
    expect(m.body.model).toBe('deepseek-reasoner');
    expect(m.body.thinking).toEqual({ type: 'enabled' });
    expect(m.body).not.toHaveProperty('reasoning_effort');
    expect(chat.model).toBe('public-model'); // the client's body is not mutated
  });

  it('maps the effort to the upstream value when config says so', () => {
    const m = mapChatRequest(chat, 'o4-mini', { reasoning_effort: 'medium' }, CAP);
    expect(m.body.reasoning_effort).toBe('medium');
  });

  it('always asks a stream for usage and remembers whether the client did', () => {
    const quiet = mapChatRequest(chat, 'x', null, CAP);
    expect(quiet.body.stream_options).toEqual({ include_usage: true });
    expect(quiet.clientWantsUsage).toBe(false);
    const asked = mapChatRequest(
      { ...chat, stream_options: { include_usage: true } },
      'x',
      null,
      CAP,
    );
    expect(asked.clientWantsUsage).toBe(true);
    expect(asked.stream).toBe(true);
  });

  it('drops stream_options from a non-stream request (OpenAI rejects it there)', () => {
    const m = mapChatRequest(
      { ...chat, stream: false, stream_options: { include_usage: true } },
      'x',
      null,
      CAP,
    );
    expect(m.stream).toBe(false);
    expect(m.body).not.toHaveProperty('stream_options');
  });

  it('sends a Bearer key upstream', () => {
    expect(openAiHeaders('sk-1')).toEqual({
      authorization: 'Bearer sk-1',
      'content-type': 'application/json',
    });
  });
});

describe('chat response reading', () => {
  it('reads usage, id and model from a chat.completion', async () => {
    mock.script({ cacheHitTokens: 4, inputTokens: 10 });
    const text = await fetchText(
      `${mock.url}/v1/chat/completions`,
      { model: 'up-1', messages: [{ role: 'user', content: 'hi' }] },
      auth,
    );
    const info = readChatResponse(JSON.parse(text));
    expect(info.model).toBe('up-1');
    expect(info.id).toMatch(/^chatcmpl-/);
    expect(info.usage).toEqual({
      inputTokens: 10,
      cacheHitTokens: 4,
      outputTokens: 6,
      reasoningTokens: 0,
      cacheHitReported: true,
      outputReported: true,
    });
  });
});

describe('chat stream relay', () => {
  const upstreamBody = {
    model: 'up-1',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
    stream_options: { include_usage: true },
    reasoning_effort: 'low',
  };

  it('hides the usage chunk the gateway asked for when the client did not, and still bills', async () => {
    mock.script({ inputTokens: 7 });
    const upstream = await fetchText(`${mock.url}/v1/chat/completions`, upstreamBody, auth);
    expect(upstream).toContain('"choices":[],"usage":{');
    const relay = new ChatStreamRelay(false);
    const out = runRelay(relay, upstream);
    const chunks = chatChunks(out);
    expect(chunks.some((c) => Array.isArray(c.choices) && c.choices.length === 0)).toBe(false);
    expect(out.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(relay.usage).toEqual({
      inputTokens: 7,
      cacheHitTokens: 0,
      outputTokens: 14,
      reasoningTokens: 8,
      cacheHitReported: false,
      outputReported: true,
    });
    expect(relay.completed).toBe(true);
    expect(relay.upstreamModel).toBe('up-1');
    expect(relay.firstContentAt).not.toBeNull();
  });

  it('passes every chunk through unchanged when the client asked for usage', async () => {
    const upstream = await fetchText(`${mock.url}/v1/chat/completions`, upstreamBody, auth);
    const out = runRelay(new ChatStreamRelay(true), upstream, 1);
    expect(out).toBe(upstream);
  });

  it('removes usage from a final content chunk (DeepSeek style) when the client did not ask', () => {
    const upstream = sseText([
      [null, { id: 'a', model: 'deepseek-chat', choices: [{ index: 0, delta: { content: 'x' } }] }],
      [
        null,
        {
          id: 'a',
          model: 'deepseek-chat',
          choices: [{ index: 0, delta: { content: '' }, finish_reason: 'stop' }],
          usage: {
            prompt_tokens: 12,
            completion_tokens: 1,
            prompt_cache_hit_tokens: 10,
            prompt_cache_miss_tokens: 2,
          },
        },
      ],
      [null, '[DONE]'],
    ]);
    const relay = new ChatStreamRelay(false);
    const chunks = chatChunks(runRelay(relay, upstream));
    expect(chunks).toHaveLength(2);
    expect(chunks[1]).not.toHaveProperty('usage');
    expect(chunks[1]?.choices).toEqual([
      { index: 0, delta: { content: '' }, finish_reason: 'stop' },
    ]);
    expect(relay.usage).toMatchObject({ inputTokens: 2, cacheHitTokens: 10, outputTokens: 1 });
  });

  it('ends with data: [DONE] when the upstream closed without it', () => {
    const relay = new ChatStreamRelay(false);
    const out = runRelay(
      relay,
      sseText([[null, { id: 'a', choices: [{ delta: { content: 'x' } }] }]]),
    );
    expect(out.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(relay.completed).toBe(false);
    expect(relay.usage).toBeNull();
  });

  it('reports an error the upstream sent inside the stream', () => {
    const relay = new ChatStreamRelay(true);
    runRelay(relay, sseText([[null, { error: { message: 'overloaded', type: 'server_error' } }]]));
    expect(relay.errorMessage).toBe('overloaded');
  });
});

describe('responses', () => {
  it('passes the request through with the upstream model', () => {
    const m = mapResponsesRequest(
      { model: 'pub', input: 'hi', stream: true },
      'gpt-4.1',
      null,
      4096,
    );
    expect(m).toEqual({
      body: { model: 'gpt-4.1', input: 'hi', stream: true, max_output_tokens: 4096 },
      stream: true,
    });
    const own = mapResponsesRequest(
      { model: 'pub', input: 'hi', max_output_tokens: 9 },
      'g',
      null,
      4096,
    );
    expect(own.body.max_output_tokens).toBe(9);
  });

  it('reads usage from a non-stream response', async () => {
    mock.script({ cacheHitTokens: 3, inputTokens: 5 });
    const text = await fetchText(`${mock.url}/v1/responses`, { model: 'r1', input: 'hi' }, auth);
    expect(readResponsesResponse(JSON.parse(text)).usage).toMatchObject({
      inputTokens: 5,
      cacheHitTokens: 3,
      outputTokens: 6,
    });
  });

  it('relays the event stream unchanged and reads usage from response.completed', async () => {
    mock.script({ inputTokens: 5, chunks: 3 });
    const upstream = await fetchText(
      `${mock.url}/v1/responses`,
      { model: 'r1', input: 'hi', stream: true },
      auth,
    );
    const relay = new ResponsesStreamRelay();
    expect(runRelay(relay, upstream, 5)).toBe(upstream);
    expect(relay.usage).toMatchObject({ inputTokens: 5, outputTokens: 3 });
    expect(relay.completed).toBe(true);
    expect(relay.upstreamId).toMatch(/^resp_/);
    expect(parseSse(upstream).at(-1)?.event).toBe('response.completed');
  });
});

describe('embeddings and images usage', () => {
  it('reads embeddings usage as input tokens', async () => {
    const text = await fetchText(
      `${mock.url}/v1/embeddings`,
      { model: 'e1', input: ['abcd', 'abcdefgh'] },
      auth,
    );
    expect(readEmbeddingsResponse(JSON.parse(text)).usage).toMatchObject({ inputTokens: 3 });
  });

  it('counts images and reads token usage of gpt-image models', async () => {
    const urls = readImagesResponse(
      JSON.parse(
        await fetchText(
          `${mock.url}/v1/images/generations`,
          { model: 'dall-e-3', prompt: 'a cat', n: 2 },
          auth,
        ),
      ),
    );
    expect(urls).toEqual({ images: 2, usage: null });
    const tokens = readImagesResponse(
      JSON.parse(
        await fetchText(
          `${mock.url}/v1/images/generations`,
          { model: 'gpt-image-1', prompt: 'a cat' },
          auth,
        ),
      ),
    );
    expect(tokens.images).toBe(1);
    expect(tokens.usage).toMatchObject({ inputTokens: 2, outputTokens: 272 });
  });
});
