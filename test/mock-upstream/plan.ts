// What one mock answer will contain, decided from the request and the scripted behaviour, and
// the deterministic token arithmetic tests use to predict usage.

import type { MockBehaviour } from './behaviour.ts';

/** Words of the default answer; chunk i carries WORDS[i % 6]: "Hello from the mock upstream." */
export const WORDS = ['Hello', ' from', ' the', ' mock', ' upstream', '.'];
export const DEFAULT_CHUNKS = 6;
/** Reasoning tokens reported (and included in output) when the request enables reasoning. */
export const MOCK_REASONING_TOKENS = 8;
/** Output tokens of a tool call answer (on top of the text chunks of an Anthropic answer). */
export const MOCK_TOOL_CALL_TOKENS = 12;
/** Arguments of every mock tool call, sent in two pieces when streaming. */
export const MOCK_TOOL_ARGUMENTS = '{"query":"mock"}';

export interface MockPlan {
  model: string;
  stream: boolean;
  chunks: number;
  /** Uncached input tokens to report. */
  inputTokens: number;
  cacheHitTokens: number;
  omitUsage: boolean;
  /** OpenAI chat: stream_options.include_usage was set. */
  includeUsage: boolean;
  reasoning: boolean;
  /** Name of the tool to call, or null for a text answer. */
  tool: string | null;
}

/** The answer text of `chunks` chunks. */
export function answerText(chunks: number): string {
  let text = '';
  for (let i = 0; i < chunks; i++) text += WORDS[i % WORDS.length];
  return text;
}

/**
 * Default uncached input tokens: one token per 4 characters of the JSON of what the model reads
 * (messages, system, input), at least 1. Tests call this to predict usage.
 */
export function mockInputTokens(body: Record<string, unknown>): number {
  let chars = 0;
  for (const key of ['system', 'messages', 'input']) {
    const v = body[key];
    if (v !== undefined) chars += JSON.stringify(v).length;
  }
  return Math.max(1, Math.ceil(chars / 4));
}

export function basePlan(
  body: Record<string, unknown>,
  behaviour: MockBehaviour | null,
  reasoning: boolean,
  tool: string | null,
): MockPlan {
  const streamOptions = body.stream_options;
  return {
    model: typeof body.model === 'string' ? body.model : '',
    stream: body.stream === true,
    chunks: Math.max(1, behaviour?.chunks ?? DEFAULT_CHUNKS),
    inputTokens: behaviour?.inputTokens ?? mockInputTokens(body),
    cacheHitTokens: behaviour?.cacheHitTokens ?? 0,
    omitUsage: behaviour?.omitUsage === true,
    includeUsage:
      typeof streamOptions === 'object' &&
      streamOptions !== null &&
      (streamOptions as Record<string, unknown>).include_usage === true,
    reasoning,
    tool,
  };
}

/** The text of the last user message, from a string or an array of text parts/blocks. */
export function lastUserText(messages: unknown): string {
  if (!Array.isArray(messages)) return '';
  for (let i = messages.length - 1; i >= 0; i--) {
    const m: unknown = messages[i];
    if (typeof m !== 'object' || m === null) continue;
    const msg = m as Record<string, unknown>;
    if (msg.role !== 'user') continue;
    const content = msg.content;
    if (typeof content === 'string') return content;
    if (!Array.isArray(content)) return '';
    let text = '';
    for (const part of content) {
      if (typeof part === 'object' && part !== null) {
        const p = part as Record<string, unknown>;
        if (p.type === 'text' && typeof p.text === 'string') text += p.text;
      }
    }
    return text;
  }
  return '';
}

/** The first tool's name when tools are given and the last user message says "use tool". */
export function toolToCall(body: Record<string, unknown>, nameOf: (t: unknown) => string | null) {
  const tools = body.tools;
  if (!Array.isArray(tools) || tools.length === 0) return null;
  if (!lastUserText(body.messages).toLowerCase().includes('use tool')) return null;
  return nameOf(tools[0]);
}

/** One answer as the server will write it: a JSON body, or the SSE events of a stream. */
export interface MockReply {
  status: number;
  stream: boolean;
  /** The whole body (not streaming) or one string per SSE event (streaming). */
  parts: string[];
}

export function sse(event: string | null, data: unknown): string {
  const json = typeof data === 'string' ? data : JSON.stringify(data);
  return event === null ? `data: ${json}\n\n` : `event: ${event}\ndata: ${json}\n\n`;
}
