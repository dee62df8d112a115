// The translations read by the official SDKs: a minimal translating proxy in front of the mock
// serves chat completions from the Anthropic side and messages from the OpenAI side.
import Anthropic from '@anthropic-ai/sdk';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anthropicHeaders } from '../../src/protocols/anthropic/headers.ts';
import { openAiHeaders } from '../../src/protocols/openai/headers.ts';
import type { StreamRelay } from '../../src/protocols/stream-relay.ts';
import { anthropicResponseToChat } from '../../src/protocols/translate/anthropic-response-to-chat.ts';
import { AnthropicToChatStream } from '../../src/protocols/translate/anthropic-stream-to-chat.ts';
import { chatRequestToAnthropic } from '../../src/protocols/translate/chat-request-to-anthropic.ts';
import { messagesRequestToOpenAi } from '../../src/protocols/translate/messages-request-to-openai.ts';
import { openAiResponseToMessages } from '../../src/protocols/translate/openai-response-to-messages.ts';
import { OpenAiToMessagesStream } from '../../src/protocols/translate/openai-stream-to-messages.ts';
import type { ChatRequest, MessagesRequest } from '../../src/protocols/types.ts';
import { MOCK_DEFAULT_KEY, startMockUpstream, type MockUpstream } from '../mock-upstream/server.ts';

let mock: MockUpstream;
let proxy: Server;
let openai: OpenAI;
let anthropic: Anthropic;
const relays: StreamRelay[] = [];

async function translate(
  path: string,
  raw: string,
): Promise<{ status: number; body: string | AsyncIterable<string> }> {
  const chatSide = path === '/v1/chat/completions';
  const mapped = chatSide
    ? chatRequestToAnthropic(JSON.parse(raw) as ChatRequest, 'claude-up', null, 1024)
    : messagesRequestToOpenAi(JSON.parse(raw) as MessagesRequest, 'gpt-up', null);
  const res = await fetch(`${mock.url}${chatSide ? '/v1/messages' : '/v1/chat/completions'}`, {
    method: 'POST',
    headers: chatSide ? anthropicHeaders(MOCK_DEFAULT_KEY) : openAiHeaders(MOCK_DEFAULT_KEY),
    body: JSON.stringify(mapped.body),
  });
  if (!mapped.stream || res.body === null) {
    const json: unknown = await res.json();
    const out = chatSide
      ? anthropicResponseToChat(json, 'public')
      : openAiResponseToMessages(json, 'public');
    return { status: res.status, body: JSON.stringify(out) };
  }
  const relay: StreamRelay = chatSide
    ? new AnthropicToChatStream(
        'clientWantsUsage' in mapped && mapped.clientWantsUsage === true,
        'public',
      )
    : new OpenAiToMessagesStream('public');
  relays.push(relay);
  const upstream = res.body;
  return {
    status: 200,
    body: (async function* () {
      for await (const chunk of upstream) {
        const text = relay.push(chunk);
        if (text.length > 0) yield String(text);
      }
      yield relay.end();
    })(),
  };
}

beforeAll(async () => {
  mock = await startMockUpstream();
  proxy = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (raw += c));
    req.on('end', () => {
      void translate(req.url ?? '', raw).then(async ({ status, body }) => {
        if (typeof body === 'string') {
          res.writeHead(status, { 'content-type': 'application/json' }).end(body);
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for await (const text of body) res.write(text);
        res.end();
      });
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  openai = new OpenAI({ apiKey: 'x', baseURL: `${base}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'x', baseURL: base, maxRetries: 0 });
});
afterAll(async () => {
  proxy.closeAllConnections();
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
  await mock.close();
});

const tools: OpenAI.Chat.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'search', parameters: { type: 'object' } } },
];

describe('OpenAI SDK reading chat completions served by an Anthropic upstream', () => {
  it('gets a chat.completion with usage', async () => {
    const c = await openai.chat.completions.create({
      model: 'p',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(c.choices[0]?.message.content).toBe('Hello from the mock upstream.');
    expect(c.usage?.completion_tokens).toBe(6);
  });

  it('assembles the translated stream, tool call arguments and final usage included', async () => {
    const final = await openai.chat.completions
      .stream({
        model: 'p',
        messages: [{ role: 'user', content: 'use tool' }],
        tools,
        stream_options: { include_usage: true },
      })
      .finalChatCompletion();
    expect(final.choices[0]?.message.content).toBe('Calling the tool.');
    expect(final.choices[0]?.message.tool_calls?.[0]).toMatchObject({
      function: { name: 'search', arguments: '{"query":"mock"}' },
    });
    expect(final.choices[0]?.finish_reason).toBe('tool_calls');
    expect(final.usage?.completion_tokens).toBe(18);
  });
});

describe('Anthropic SDK reading messages served by an OpenAI-compatible upstream', () => {
  it('gets a message with usage', async () => {
    const m = await anthropic.messages.create({
      model: 'p',
      max_tokens: 50,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(m.content).toEqual([{ type: 'text', text: 'Hello from the mock upstream.' }]);
    expect(m.usage.output_tokens).toBe(6);
  });

  it('assembles the translated event stream, tool_use input and final usage included', async () => {
    const final = await anthropic.messages
      .stream({
        model: 'p',
        max_tokens: 50,
        tools: [{ name: 'search', input_schema: { type: 'object' } }],
        messages: [{ role: 'user', content: 'use tool' }],
      })
      .finalMessage();
    expect(final.content).toMatchObject([
      { type: 'tool_use', name: 'search', input: { query: 'mock' } },
    ]);
    expect(final.stop_reason).toBe('tool_use');
    expect(final.usage.output_tokens).toBe(12);
    expect(relays.at(-1)?.usage?.outputTokens).toBe(12);
  });
});
