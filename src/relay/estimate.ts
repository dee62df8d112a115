// Token estimates for the two places the gateway cannot know exact counts: the reservation's
// upper bound at admission (no tokenizer on the hot path) and billing when an upstream reports no
// usage (a real tokenizer, marked estimated in the usage log).
import { createRequire } from 'node:module';
import type { encode as Encode } from 'gpt-tokenizer';

/**
 * The tokenizer loads on first use. Its o200k tables are 20.2 MB of heap for good (58 MB of RSS
 * while loading) and take 135–190 ms to load; loaded with the relay they were a third of an idle
 * gateway's heap, marked by every full collection, although only an upstream that reports no
 * usage needs them. So the first such answer in a process waits for the load, once.
 */
let encoder: typeof Encode | null = null;

function encode(text: string): number[] {
  encoder ??= (createRequire(import.meta.url)('gpt-tokenizer') as { encode: typeof Encode }).encode;
  return encoder(text);
}

/** True once the tokenizer has been loaded in this process. */
export function tokenizerLoaded(): boolean {
  return encoder !== null;
}

/** Image blocks cost tokens that their URL's bytes do not show; 1,600 covers a 1024² tile set. */
const TOKENS_PER_IMAGE_BOUND = 1_600;

/**
 * An upper bound of the input tokens of a body: BPE tokenizers never make more tokens than UTF-8
 * bytes of text, so the body's byte length bounds the prompt, plus a bound per image block.
 */
export function inputTokenBound(bodyBytes: number, imageBlocks: number): number {
  return bodyBytes + imageBlocks * TOKENS_PER_IMAGE_BOUND;
}

/** Where a request body keeps its text. */
const REQUEST_TEXT = [
  'content',
  'text',
  'input',
  'system',
  'messages',
  'prompt',
  'instructions',
  'arguments',
] as const;

/**
 * Where an answer keeps what the model wrote: chat's choices[].message.content and tool call
 * arguments, completions' choices[].text, Anthropic's content[].text and thinking, Responses'
 * output[].content[].text. Not its ids, model names or embeddings.
 */
const ANSWER_TEXT = [
  'choices',
  'message',
  'content',
  'text',
  'tool_calls',
  'function',
  'arguments',
  'refusal',
  'reasoning_content',
  'thinking',
  'output',
] as const;

function collectText(value: unknown, keys: readonly string[], out: string[]): void {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) collectText(v, keys, out);
  else if (value !== null && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    for (const k of keys) if (k in o) collectText(o[k], keys, out);
  }
}

function tokensOf(value: unknown, keys: readonly string[]): number {
  const parts: string[] = [];
  collectText(value, keys, parts);
  let n = 0;
  for (const p of parts) n += encode(p).length;
  return n;
}

/** Tokens of the text in a request body (messages, input, system, prompt), by cl100k/o200k BPE. */
export function estimateInputTokens(body: unknown): number {
  return tokensOf(body, REQUEST_TEXT);
}

/**
 * Tokens of what an answer's model wrote, for an answer that reports no usage: billed as output
 * 0 before, so a 2,164-character answer cost its input alone (session 21).
 */
export function estimateOutputTokens(answer: unknown): number {
  return tokensOf(answer, ANSWER_TEXT);
}

export function estimateTextTokens(text: string): number {
  return text.length === 0 ? 0 : encode(text).length;
}
