// Chat completions served by an Anthropic channel: request, response and stream translation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anthropicHeaders } from '../../src/protocols/anthropic/headers.ts';
import { anthropicResponseToChat } from '../../src/protocols/translate/anthropic-response-to-chat.ts';
import { AnthropicToChatStream } from '../../src/protocols/translate/anthropic-stream-to-chat.ts';
import { chatRequestToAnthropic } from '../../src/protocols/translate/chat-request-to-anthropic.ts';
import type { ChatRequest } from '../../src/protocols/types.ts';
import { MOCK_DEFAULT_KEY, startMockUpstream, type MockUpstream } from '../mock-upstream/server.ts';
import { chatChunks, fetchText, runRelay, sseText } from './helpers.ts';

let mock: MockUpstream;
beforeAll(async () => {
  mock = await startMockUpstream();
});
afterAll(async () => {
  await mock.close();
});

const tools: ChatRequest['tools'] = [
  {
    type: 'function',
    function: {
      name: 'search',
      description: 'Search the web',
      parameters: { type: 'object', properties: { query: { type: 'string' } } },
    },
  },
];

describe('chat request → Anthropic messages request', () => {
  it('moves system messages to system, maps images, tools, tool calls and tool results', () => {
    const { body, stream, clientWantsUsage } = chatRequestToAnthropic(
      {
        model: 'pub',
        stream: true,
        stream_options: { include_usage: true },
        stop: 'END',
        temperature: 1.5,
        user: 'u-1',
        reasoning_effort: 'high',
        tools,
        tool_choice: 'required',
        parallel_tool_calls: false,
        messages: [
          { role: 'system', content: 'Be brief.' },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is this?' },
              { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,/9j/AAAA' } },
              { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
            ],
          },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              {
                id: 'call_1',
                type: 'function',
                function: { name: 'search', arguments: '{"query":"cat"}' },
              },
              {
                id: 'call_2',
                type: 'function',
                function: { name: 'search', arguments: '{"query":"dog"}' },
              },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: 'a cat' },
          { role: 'tool', tool_call_id: 'call_2', content: 'a dog' },
          { role: 'developer', content: 'Answer in English.' },
        ],
      },
      'claude-sonnet-4-5',
      null,
      1024,
    );
    expect(stream).toBe(true);
    expect(clientWantsUsage).toBe(true);
    expect(body).toEqual({
      model: 'claude-sonnet-4-5',
      max_tokens: 1024,
      stream: true,
      system: 'Be brief.\n\nAnswer in English.',
      temperature: 1,
      stop_sequences: ['END'],
      metadata: { user_id: 'u-1' },
      tools: [
        {
          name: 'search',
          description: 'Search the web',
          input_schema: { type: 'object', properties: { query: { type: 'string' } } },
        },
      ],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            {
              type: 'image',
              source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/AAAA' },
            },
            { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } },
          ],
        },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'call_1', name: 'search', input: { query: 'cat' } },
            { type: 'tool_use', id: 'call_2', name: 'search', input: { query: 'dog' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'call_1', content: 'a cat' },
            { type: 'tool_result', tool_use_id: 'call_2', content: 'a dog' },
          ],
        },
      ],
    });
  });

  it('maps each tool_choice form', () => {
    const choice = (tool_choice: ChatRequest['tool_choice']) =>
      chatRequestToAnthropic({ model: 'p', messages: [], tools, tool_choice }, 'c', null, 10).body
        .tool_choice;
    expect(choice('auto')).toEqual({ type: 'auto' });
    expect(choice('none')).toEqual({ type: 'none' });
    expect(choice({ type: 'function', function: { name: 'search' } })).toEqual({
      type: 'tool',
      name: 'search',
    });
  });

  it("uses the client's max_completion_tokens or max_tokens before the default", () => {
    const base: ChatRequest = { model: 'p', messages: [{ role: 'user', content: 'x' }] };
    expect(
      chatRequestToAnthropic({ ...base, max_tokens: 50 }, 'c', null, 4096).body.max_tokens,
    ).toBe(50);
    expect(
      chatRequestToAnthropic({ ...base, max_completion_tokens: 70 }, 'c', null, 4096).body
        .max_tokens,
    ).toBe(70);
  });

  it('merges configured thinking and fits its budget under max_tokens', () => {
    const { body } = chatRequestToAnthropic(
      {
        model: 'p',
        messages: [{ role: 'user', content: 'x' }],
        max_tokens: 2000,
        temperature: 0.2,
      },
      'c',
      { thinking: { type: 'enabled', budget_tokens: 4000 } },
      4096,
    );
    expect(body.thinking).toEqual({ type: 'enabled', budget_tokens: 1999 });
    expect(body).not.toHaveProperty('temperature');
  });
});

const messagesAuth = anthropicHeaders(MOCK_DEFAULT_KEY);
const upstreamRequest = (extra: Record<string, unknown>) => ({
  model: 'claude-up',
  max_tokens: 100,
  messages: [{ role: 'user', content: 'please use tool' }],
  tools: [{ name: 'search', input_schema: { type: 'object' } }],
  ...extra,
});

describe('Anthropic message → chat.completion', () => {
  it('maps text, tool_use, stop reason and usage with cached prompt tokens', async () => {
    mock.script({ inputTokens: 10, cacheHitTokens: 90 });
    const message: unknown = JSON.parse(
      await fetchText(`${mock.url}/v1/messages`, upstreamRequest({}), messagesAuth),
    );
    const completion = anthropicResponseToChat(message, 'public-claude');
    expect(completion).toMatchObject({
      object: 'chat.completion',
      model: 'public-claude',
      choices: [
        {
          index: 0,
          finish_reason: 'tool_calls',
          message: {
            role: 'assistant',
            content: 'Calling the tool.',
            tool_calls: [
              { type: 'function', function: { name: 'search', arguments: '{"query":"mock"}' } },
            ],
          },
        },
      ],
      usage: {
        prompt_tokens: 100,
        completion_tokens: 18,
        total_tokens: 118,
        prompt_tokens_details: { cached_tokens: 90 },
      },
    });
  });

  it('maps max_tokens to length and thinking to reasoning_content', () => {
    const completion = anthropicResponseToChat(
      {
        id: 'msg_1',
        type: 'message',
        model: 'c',
        content: [
          { type: 'thinking', thinking: 'hmm', signature: 's' },
          { type: 'text', text: 'cut' },
        ],
        stop_reason: 'max_tokens',
        usage: { input_tokens: 3, output_tokens: 5, cache_creation_input_tokens: 2 },
      },
      null,
    );
    expect(completion?.choices[0]?.finish_reason).toBe('length');
    expect(completion?.choices[0]?.message.reasoning_content).toBe('hmm');
    expect(completion?.usage?.prompt_tokens).toBe(5);
    expect(anthropicResponseToChat({ nope: true }, null)).toBeNull();
  });
});

describe('Anthropic stream → chat.completion.chunk stream', () => {
  it('streams text as content deltas and ends with a usage chunk and [DONE] when asked', async () => {
    mock.script({ inputTokens: 4, cacheHitTokens: 6, chunks: 3 });
    const upstream = await fetchText(
      `${mock.url}/v1/messages`,
      upstreamRequest({ stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      messagesAuth,
    );
    const relay = new AnthropicToChatStream(true, 'public-claude');
    const out = runRelay(relay, upstream, 11);
    expect(out.endsWith('data: [DONE]\n\n')).toBe(true);
    const chunks = chatChunks(out);
    const text = chunks
      .flatMap((c) => c.choices as { delta: { content?: string } }[])
      .map((c) => c.delta.content ?? '')
      .join('');
    expect(text).toBe('Hello from the');
    expect(chunks[0]).toMatchObject({
      object: 'chat.completion.chunk',
      model: 'public-claude',
      choices: [{ delta: { role: 'assistant' } }],
    });
    expect(chunks.at(-2)).toMatchObject({ choices: [{ delta: {}, finish_reason: 'stop' }] });
    expect(chunks.at(-1)).toMatchObject({
      choices: [],
      usage: {
        prompt_tokens: 10,
        completion_tokens: 3,
        prompt_tokens_details: { cached_tokens: 6 },
      },
    });
    expect(relay.usage).toMatchObject({ inputTokens: 4, cacheHitTokens: 6, outputTokens: 3 });
    expect(relay.completed).toBe(true);
  });

  it('streams a tool_use block as tool_calls deltas with argument pieces', async () => {
    const upstream = await fetchText(
      `${mock.url}/v1/messages`,
      upstreamRequest({ stream: true }),
      messagesAuth,
    );
    const out = runRelay(new AnthropicToChatStream(false, null), upstream, 13);
    const chunks = chatChunks(out);
    expect(chunks.some((c) => Array.isArray(c.choices) && c.choices.length === 0)).toBe(false);
    const calls = chunks.flatMap((c) =>
      (
        c.choices as {
          delta: {
            tool_calls?: {
              index: number;
              id?: string;
              function?: { name?: string; arguments?: string };
            }[];
          };
        }[]
      ).flatMap((ch) => ch.delta.tool_calls ?? []),
    );
    expect(calls[0]).toMatchObject({
      index: 0,
      type: 'function',
      function: { name: 'search', arguments: '' },
    });
    expect(calls[0]?.id).toMatch(/^toolu_/);
    expect(calls.map((c) => c.function?.arguments ?? '').join('')).toBe('{"query":"mock"}');
    expect(chunks.at(-1)).toMatchObject({ choices: [{ finish_reason: 'tool_calls' }] });
  });

  it('streams thinking as reasoning_content', () => {
    const out = runRelay(
      new AnthropicToChatStream(false, null),
      sseText([
        [
          'message_start',
          {
            type: 'message_start',
            message: { id: 'm', model: 'c', usage: { input_tokens: 1, output_tokens: 1 } },
          },
        ],
        [
          'content_block_start',
          {
            type: 'content_block_start',
            index: 0,
            content_block: { type: 'thinking', thinking: '' },
          },
        ],
        [
          'content_block_delta',
          {
            type: 'content_block_delta',
            index: 0,
            delta: { type: 'thinking_delta', thinking: 'why' },
          },
        ],
        ['content_block_stop', { type: 'content_block_stop', index: 0 }],
        [
          'message_delta',
          {
            type: 'message_delta',
            delta: { stop_reason: 'end_turn' },
            usage: { output_tokens: 9 },
          },
        ],
        ['message_stop', { type: 'message_stop' }],
      ]),
    );
    expect(chatChunks(out)[1]).toMatchObject({
      choices: [{ delta: { reasoning_content: 'why' } }],
    });
  });

  it('turns an error event into an OpenAI error chunk', () => {
    const relay = new AnthropicToChatStream(false, null);
    const out = runRelay(
      relay,
      sseText([
        ['error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }],
      ]),
    );
    expect(chatChunks(out)).toEqual([
      { error: { message: 'Overloaded', type: 'overloaded_error', code: null } },
    ]);
    expect(relay.errorMessage).toBe('Overloaded');
  });
});
