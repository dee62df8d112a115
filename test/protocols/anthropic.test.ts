import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anthropicHeaders } from '../../src/protocols/anthropic/headers.ts';
import { mapMessagesRequest } from '../../src/protocols/anthropic/messages-request.ts';
import { readMessagesResponse } from '../../src/protocols/anthropic/messages-response.ts';
import { MessagesStreamRelay } from '../../src/protocols/anthropic/messages-stream-relay.ts';
import type { MessagesRequest } from '../../src/protocols/types.ts';
import { MOCK_DEFAULT_KEY, startMockUpstream, type MockUpstream } from '../mock-upstream/server.ts';
import { fetchText, runRelay, sseText } from './helpers.ts';

const auth = anthropicHeaders(MOCK_DEFAULT_KEY);
let mock: MockUpstream;
beforeAll(async () => {
  mock = await startMockUpstream();
});
afterAll(async () => {
  await mock.close();
});

const request: MessagesRequest = {
  model: 'public-claude',
  max_tokens: 4096,
  temperature: 0.3,
  messages: [{ role: 'user', content: 'hi' }],
};

describe('anthropic request mapping', () => {
  it('replaces the model and merges the configured thinking', () => {
    const m = mapMessagesRequest(request, 'claude-sonnet-4-5', {
      thinking: { type: 'enabled', budget_tokens: 2048 },
    });
    expect(m.body.model).toBe('claude-sonnet-4-5');
    expect(m.body.thinking).toEqual({ type: 'enabled', budget_tokens: 2048 });
    // Anthropic rejects temperature alongside thinking.
    expect(m.body).not.toHaveProperty('temperature');
    expect(m.body.max_tokens).toBe(4096);
  });

  it("shrinks a thinking budget that does not fit under the client's max_tokens", () => {
    const m = mapMessagesRequest({ ...request, max_tokens: 3000 }, 'c', {
      thinking: { type: 'enabled', budget_tokens: 8000 },
    });
    expect(m.body.thinking).toEqual({ type: 'enabled', budget_tokens: 2999 });
    expect(m.body.max_tokens).toBe(3000);
  });

  it('drops thinking when not even the minimum budget fits', () => {
    const m = mapMessagesRequest({ ...request, max_tokens: 500 }, 'c', {
      thinking: { type: 'enabled', budget_tokens: 8000 },
    });
    expect(m.body).not.toHaveProperty('thinking');
  });

  it('leaves the client body alone without reasoning params', () => {
    const m = mapMessagesRequest({ ...request, stream: true }, 'c', null);
    expect(m).toEqual({ body: { ...request, stream: true, model: 'c' }, stream: true });
  });

  it('sends x-api-key and the pinned anthropic-version', () => {
    expect(anthropicHeaders('k')).toEqual({
      'x-api-key': 'k',
      'anthropic-version': '2023-06-01',
      'content-type': 'application/json',
    });
    expect(anthropicHeaders('k', 'prompt-caching-2024-07-31')['anthropic-beta']).toBe(
      'prompt-caching-2024-07-31',
    );
  });
});

describe('anthropic response reading', () => {
  it('reads usage with cache reads as hits', async () => {
    mock.script({ cacheHitTokens: 30, inputTokens: 11 });
    const text = await fetchText(`${mock.url}/v1/messages`, { ...request, model: 'c1' }, auth);
    const info = readMessagesResponse(JSON.parse(text));
    expect(info.model).toBe('c1');
    expect(info.usage).toEqual({
      inputTokens: 11,
      cacheHitTokens: 30,
      outputTokens: 6,
      reasoningTokens: 0,
      cacheHitReported: true,
      outputReported: true,
    });
  });
});

describe('anthropic stream relay', () => {
  it('relays events unchanged and reads input from message_start, output from message_delta', async () => {
    mock.script({ inputTokens: 9, cacheHitTokens: 2, chunks: 4 });
    const upstream = await fetchText(
      `${mock.url}/v1/messages`,
      { ...request, model: 'c1', stream: true },
      auth,
    );
    const relay = new MessagesStreamRelay();
    expect(runRelay(relay, upstream, 3)).toBe(upstream);
    expect(relay.usage).toMatchObject({ inputTokens: 9, cacheHitTokens: 2, outputTokens: 4 });
    expect(relay.completed).toBe(true);
    expect(relay.upstreamId).toMatch(/^msg_/);
  });

  it('takes cumulative totals from message_delta when it repeats the input side', () => {
    const relay = new MessagesStreamRelay();
    runRelay(
      relay,
      sseText([
        [
          'message_start',
          {
            type: 'message_start',
            message: { id: 'm', model: 'c', usage: { input_tokens: 5, output_tokens: 1 } },
          },
        ],
        [
          'message_delta',
          {
            type: 'message_delta',
            delta: { stop_reason: 'end_turn' },
            usage: { input_tokens: 5, cache_read_input_tokens: 100, output_tokens: 42 },
          },
        ],
        ['message_stop', { type: 'message_stop' }],
      ]),
    );
    expect(relay.usage).toMatchObject({ inputTokens: 5, cacheHitTokens: 100, outputTokens: 42 });
  });

  it('reports an error event', () => {
    const relay = new MessagesStreamRelay();
    runRelay(
      relay,
      sseText([
        ['error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }],
      ]),
    );
    expect(relay.errorMessage).toBe('Overloaded');
    expect(relay.completed).toBe(false);
  });
});
