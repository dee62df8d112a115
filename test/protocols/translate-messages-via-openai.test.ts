// Messages served by an OpenAI-compatible channel: request, response and stream translation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAiHeaders } from '../../src/protocols/openai/headers.ts';
import { messagesRequestToOpenAi } from '../../src/protocols/translate/messages-request-to-openai.ts';
import { openAiResponseToMessages } from '../../src/protocols/translate/openai-response-to-messages.ts';
import { OpenAiToMessagesStream } from '../../src/protocols/translate/openai-stream-to-messages.ts';
import { MOCK_DEFAULT_KEY, startMockUpstream, type MockUpstream } from '../mock-upstream/server.ts';
import { fetchText, parseSse, runRelay, sseText } from './helpers.ts';

let mock: MockUpstream;
beforeAll(async () => {
  mock = await startMockUpstream();
});
afterAll(async () => {
  await mock.close();
});

describe('Anthropic messages request → chat request', () => {
  it('maps system, images, tool_use, tool_result, tools, tool_choice and stop sequences', () => {
    const { body, stream } = messagesRequestToOpenAi(
      {
        model: 'pub',
        max_tokens: 300,
        stream: true,
        system: [{ type: 'text', text: 'Be brief.' }],
        stop_sequences: ['END'],
        top_k: 5,
        thinking: { type: 'enabled', budget_tokens: 2000 },
        metadata: { user_id: 'u-9' },
        tools: [
          { name: 'search', description: 'Search', input_schema: { type: 'object' } },
          { type: 'web_search_20250305', name: 'web_search', input_schema: {} },
        ],
        tool_choice: { type: 'any', disable_parallel_tool_use: true },
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'Look' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBOR' } },
            ],
          },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'hmm', signature: 'sig' },
              { type: 'text', text: 'Searching.' },
              { type: 'tool_use', id: 'toolu_1', name: 'search', input: { query: 'cat' } },
            ],
          },
          {
            role: 'user',
            content: [
              {
                type: 'tool_result',
                tool_use_id: 'toolu_1',
                content: [{ type: 'text', text: 'a cat' }],
              },
              { type: 'text', text: 'Thanks' },
            ],
          },
        ],
      },
      'deepseek-chat',
      { thinking: { type: 'enabled' } },
    );
    expect(stream).toBe(true);
    expect(body).toEqual({
      model: 'deepseek-chat',
      max_tokens: 300,
      stream: true,
      stream_options: { include_usage: true },
      stop: ['END'],
      user: 'u-9',
      thinking: { type: 'enabled' },
      tools: [
        {
          type: 'function',
          function: { name: 'search', description: 'Search', parameters: { type: 'object' } },
        },
      ],
      tool_choice: 'required',
      parallel_tool_calls: false,
      messages: [
        { role: 'system', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Look' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBOR' } },
          ],
        },
        {
          role: 'assistant',
          content: 'Searching.',
          tool_calls: [
            {
              id: 'toolu_1',
              type: 'function',
              function: { name: 'search', arguments: '{"query":"cat"}' },
            },
          ],
        },
        { role: 'tool', tool_call_id: 'toolu_1', content: 'a cat' },
        { role: 'user', content: 'Thanks' },
      ],
    });
  });
});

const auth = openAiHeaders(MOCK_DEFAULT_KEY);
const chatBody = (extra: Record<string, unknown>) => ({
  model: 'gpt-up',
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
});
const tools = [{ type: 'function', function: { name: 'search', parameters: { type: 'object' } } }];

describe('chat.completion → Anthropic message', () => {
  it('maps text, usage and stop reason', async () => {
    mock.script({ inputTokens: 20, cacheHitTokens: 80 });
    const completion: unknown = JSON.parse(
      await fetchText(`${mock.url}/v1/chat/completions`, chatBody({}), auth),
    );
    expect(openAiResponseToMessages(completion, 'public')).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'public',
      content: [{ type: 'text', text: 'Hello from the mock upstream.' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 20, cache_read_input_tokens: 80, output_tokens: 6 },
    });
  });

  it('maps tool calls to tool_use blocks with parsed input', async () => {
    const completion: unknown = JSON.parse(
      await fetchText(
        `${mock.url}/v1/chat/completions`,
        chatBody({ tools, messages: [{ role: 'user', content: 'use tool please' }] }),
        auth,
      ),
    );
    const message = openAiResponseToMessages(completion, null);
    expect(message?.stop_reason).toBe('tool_use');
    expect(message?.content).toEqual([
      {
        type: 'tool_use',
        id: expect.stringMatching(/^call_/),
        name: 'search',
        input: { query: 'mock' },
      },
    ]);
  });
});

type Event = {
  type: string;
  index?: number;
  delta?: Record<string, unknown>;
  [k: string]: unknown;
};

function events(text: string): Event[] {
  return parseSse(text).map((e) => {
    const data = JSON.parse(e.data) as Event;
    expect(e.event).toBe(data.type); // event name and payload type agree, as Anthropic sends them
    return data;
  });
}

describe('chat stream → Anthropic event sequence', () => {
  it('emits message_start, one text block, message_delta with usage, message_stop', async () => {
    mock.script({ inputTokens: 12, cacheHitTokens: 3, chunks: 2 });
    const upstream = await fetchText(
      `${mock.url}/v1/chat/completions`,
      chatBody({ stream: true, stream_options: { include_usage: true } }),
      auth,
    );
    const relay = new OpenAiToMessagesStream('public');
    const out = events(runRelay(relay, upstream, 9));
    expect(out.map((e) => e.type)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(out[0]).toMatchObject({ message: { model: 'public', role: 'assistant', content: [] } });
    expect(out[2]).toMatchObject({ index: 0, delta: { type: 'text_delta', text: 'Hello' } });
    expect(out[5]).toMatchObject({
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { input_tokens: 12, cache_read_input_tokens: 3, output_tokens: 2 },
    });
    expect(relay.usage).toMatchObject({ inputTokens: 12, cacheHitTokens: 3, outputTokens: 2 });
    expect(relay.completed).toBe(true);
  });

  it('emits tool_use blocks with input_json_delta pieces and stop_reason tool_use', async () => {
    const upstream = await fetchText(
      `${mock.url}/v1/chat/completions`,
      chatBody({
        stream: true,
        stream_options: { include_usage: true },
        tools,
        messages: [{ role: 'user', content: 'use tool' }],
      }),
      auth,
    );
    const out = events(runRelay(new OpenAiToMessagesStream(null), upstream, 17));
    const start = out.find((e) => e.type === 'content_block_start');
    expect(start).toMatchObject({
      index: 0,
      content_block: { type: 'tool_use', name: 'search', input: {} },
    });
    const json = out
      .filter((e) => e.delta?.type === 'input_json_delta')
      .map((e) => e.delta?.partial_json)
      .join('');
    expect(json).toBe('{"query":"mock"}');
    expect(out.find((e) => e.type === 'message_delta')).toMatchObject({
      delta: { stop_reason: 'tool_use' },
    });
  });

  it('opens a thinking block for reasoning_content, then a text block', () => {
    const out = events(
      runRelay(
        new OpenAiToMessagesStream(null),
        sseText([
          [
            null,
            {
              id: 'c1',
              model: 'deepseek-reasoner',
              choices: [{ index: 0, delta: { role: 'assistant', reasoning_content: 'hm' } }],
            },
          ],
          [
            null,
            { id: 'c1', choices: [{ index: 0, delta: { content: 'ok' }, finish_reason: null }] },
          ],
          [
            null,
            {
              id: 'c1',
              choices: [{ index: 0, delta: {}, finish_reason: 'length' }],
              usage: { prompt_tokens: 5, completion_tokens: 7 },
            },
          ],
          [null, '[DONE]'],
        ]),
      ),
    );
    expect(out.map((e) => `${e.type}:${String(e.index ?? '')}`)).toEqual([
      'message_start:',
      'content_block_start:0',
      'content_block_delta:0',
      'content_block_stop:0',
      'content_block_start:1',
      'content_block_delta:1',
      'content_block_stop:1',
      'message_delta:',
      'message_stop:',
    ]);
    expect(out[2]).toMatchObject({ delta: { type: 'thinking_delta', thinking: 'hm' } });
    expect(out[7]).toMatchObject({
      delta: { stop_reason: 'max_tokens' },
      usage: { output_tokens: 7 },
    });
  });

  it('closes the message when the upstream ends without [DONE]', () => {
    const relay = new OpenAiToMessagesStream(null);
    const out = events(
      runRelay(
        relay,
        sseText([[null, { id: 'c', choices: [{ index: 0, delta: { content: 'x' } }] }]]),
      ),
    );
    expect(out.at(-1)?.type).toBe('message_stop');
    expect(relay.completed).toBe(false);
  });

  it('turns an upstream error chunk into an Anthropic error event', () => {
    const relay = new OpenAiToMessagesStream(null);
    const out = events(runRelay(relay, sseText([[null, { error: { message: 'boom' } }]])));
    expect(out).toEqual([{ type: 'error', error: { type: 'api_error', message: 'boom' } }]);
  });
});
