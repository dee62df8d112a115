// Token usage in the one shape billing reads, and the extractors from each supplier's usage object:
// OpenAI-compatible chat (with DeepSeek and Kimi cache fields), OpenAI Responses, and Anthropic.

import { countAt, isObject, objectAt } from './json-read.ts';
import type { JsonObject } from './types.ts';

export interface Usage {
  /** Tokens billed at the input price: excludes cache hits, includes Anthropic cache writes. */
  inputTokens: number;
  /** Tokens served from the supplier's prompt cache (billed at the cache-hit price). */
  cacheHitTokens: number;
  /** Tokens billed at the output price; includes reasoning tokens. */
  outputTokens: number;
  /** The part of outputTokens spent on reasoning, for reporting only (already in outputTokens). */
  reasoningTokens: number;
  /** True only when the supplier reported a cache-hit field with a value > 0. */
  cacheHitReported: boolean;
  /**
   * False when the usage object had input counts but no output count: outputTokens is then 0
   * for want of a figure, and billing estimates it (an answer was billed 0 output, session 21).
   */
  outputReported: boolean;
}

export function makeUsage(
  inputTokens: number,
  cacheHitTokens: number,
  outputTokens: number,
  reasoningTokens: number,
  outputReported = true,
): Usage {
  return {
    inputTokens,
    cacheHitTokens,
    outputTokens,
    reasoningTokens,
    cacheHitReported: cacheHitTokens > 0,
    outputReported,
  };
}

/**
 * From an OpenAI-compatible `usage` (chat completions, also Qwen/GLM/Kimi/DeepSeek):
 * prompt_tokens includes the cached part, so input = prompt − hit. The hit comes from DeepSeek's
 * prompt_cache_hit_tokens, else prompt_tokens_details.cached_tokens, else Kimi's top-level
 * cached_tokens. Null when `usage` is not an object with at least one token count.
 */
export function usageFromOpenAiChat(usage: unknown): Usage | null {
  if (!isObject(usage)) return null;
  const prompt = countAt(usage, 'prompt_tokens');
  const completion = countAt(usage, 'completion_tokens');
  const deepSeekHit = countAt(usage, 'prompt_cache_hit_tokens');
  const deepSeekMiss = countAt(usage, 'prompt_cache_miss_tokens');
  if (prompt === null && completion === null && deepSeekMiss === null) return null;
  const reportedHit =
    deepSeekHit ??
    detail(usage, 'prompt_tokens_details', 'cached_tokens') ??
    countAt(usage, 'cached_tokens') ??
    0;
  // The hit is part of prompt_tokens: a larger one is billed as the whole prompt, no more.
  const hit = prompt !== null ? Math.min(reportedHit, prompt) : reportedHit;
  const input = prompt !== null ? Math.max(0, prompt - hit) : (deepSeekMiss ?? 0);
  const reasoning = detail(usage, 'completion_tokens_details', 'reasoning_tokens') ?? 0;
  return makeUsage(input, hit, completion ?? 0, reasoning, completion !== null);
}

/** From an OpenAI Responses `usage` (input_tokens includes input_tokens_details.cached_tokens). */
export function usageFromOpenAiResponses(usage: unknown): Usage | null {
  if (!isObject(usage)) return null;
  const input = countAt(usage, 'input_tokens');
  const output = countAt(usage, 'output_tokens');
  if (input === null && output === null) return null;
  const reportedHit = detail(usage, 'input_tokens_details', 'cached_tokens') ?? 0;
  // Part of input_tokens, as in chat: never more than it.
  const hit = input !== null ? Math.min(reportedHit, input) : reportedHit;
  const reasoning = detail(usage, 'output_tokens_details', 'reasoning_tokens') ?? 0;
  return makeUsage(Math.max(0, (input ?? 0) - hit), hit, output ?? 0, reasoning, output !== null);
}

/**
 * From an Anthropic `usage`: input_tokens already excludes cache reads; cache writes
 * (cache_creation_input_tokens) are billed as input. Thinking tokens are inside output_tokens.
 */
export function usageFromAnthropic(usage: unknown): Usage | null {
  if (!isObject(usage)) return null;
  const input = countAt(usage, 'input_tokens');
  const output = countAt(usage, 'output_tokens');
  if (input === null && output === null) return null;
  const write = countAt(usage, 'cache_creation_input_tokens') ?? 0;
  const hit = countAt(usage, 'cache_read_input_tokens') ?? 0;
  const thinking = detail(usage, 'output_tokens_details', 'thinking_tokens') ?? 0;
  return makeUsage((input ?? 0) + write, hit, output ?? 0, thinking, output !== null);
}

/**
 * From an embeddings `usage` ({prompt_tokens, total_tokens}): everything is input.
 */
export function usageFromEmbeddings(usage: unknown): Usage | null {
  if (!isObject(usage)) return null;
  const prompt = countAt(usage, 'prompt_tokens') ?? countAt(usage, 'total_tokens');
  return prompt === null ? null : makeUsage(prompt, 0, 0, 0);
}

function detail(usage: JsonObject, group: string, key: string): number | null {
  const g = objectAt(usage, group);
  return g === null ? null : countAt(g, key);
}
