// Token estimates for the two places the gateway cannot know exact counts: the reservation's
// upper bound at admission (no tokenizer on the hot path) and billing when an upstream reports no
// usage (a real tokenizer, marked estimated in the usage log).
import { encode } from 'gpt-tokenizer';

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
