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

function collectText(value: unknown, out: string[]): void {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) collectText(v, out);
  else if (value !== null && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    for (const k of [
      'content',
      'text',
      'input',
      'system',
      'messages',
      'prompt',
      'instructions',
      'arguments',
    ]) {
      if (k in o) collectText(o[k], out);
    }
  }
}

/** Tokens of the text in a request body (messages, input, system, prompt), by cl100k/o200k BPE. */
export function estimateInputTokens(body: unknown): number {
  const parts: string[] = [];
  collectText(body, parts);
  let n = 0;
  for (const p of parts) n += encode(p).length;
  return n;
}

export function estimateTextTokens(text: string): number {
  return text.length === 0 ? 0 : encode(text).length;
}
