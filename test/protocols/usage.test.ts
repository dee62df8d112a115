import { describe, expect, it } from 'vitest';
import {
  usageFromAnthropic,
  usageFromEmbeddings,
  usageFromOpenAiChat,
  usageFromOpenAiResponses,
} from '../../src/protocols/usage.ts';

describe('usage from an OpenAI-compatible chat usage object', () => {
  it('bills the uncached prompt as input and the cached part as a reported hit', () => {
    expect(
      usageFromOpenAiChat({
        prompt_tokens: 1000,
        completion_tokens: 200,
        total_tokens: 1200,
        prompt_tokens_details: { cached_tokens: 800 },
        completion_tokens_details: { reasoning_tokens: 50 },
      }),
    ).toEqual({
      inputTokens: 200,
      cacheHitTokens: 800,
      outputTokens: 200,
      reasoningTokens: 50,
      cacheHitReported: true,
      outputReported: true,
    });
  });

  it("reads DeepSeek's prompt_cache_hit_tokens / prompt_cache_miss_tokens", () => {
    expect(
      usageFromOpenAiChat({
        prompt_tokens: 120,
        completion_tokens: 30,
        prompt_cache_hit_tokens: 100,
        prompt_cache_miss_tokens: 20,
      }),
    ).toMatchObject({ inputTokens: 20, cacheHitTokens: 100, cacheHitReported: true });
  });

  it("reads Kimi's top-level cached_tokens", () => {
    expect(
      usageFromOpenAiChat({ prompt_tokens: 50, completion_tokens: 5, cached_tokens: 40 }),
    ).toMatchObject({ inputTokens: 10, cacheHitTokens: 40, cacheHitReported: true });
  });

  it('does not report a cache hit when the supplier says zero or says nothing', () => {
    const zero = usageFromOpenAiChat({
      prompt_tokens: 10,
      completion_tokens: 2,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    const absent = usageFromOpenAiChat({ prompt_tokens: 10, completion_tokens: 2 });
    expect(zero).toMatchObject({ inputTokens: 10, cacheHitTokens: 0, cacheHitReported: false });
    expect(absent).toEqual(zero);
  });

  it('never bills more cache hits than the prompt had (an upstream reported 60 of 10)', () => {
    expect(
      usageFromOpenAiChat({
        prompt_tokens: 10,
        completion_tokens: 2,
        prompt_tokens_details: { cached_tokens: 60 },
      }),
    ).toMatchObject({ inputTokens: 0, cacheHitTokens: 10, outputTokens: 2 });
    expect(
      usageFromOpenAiResponses({
        input_tokens: 10,
        output_tokens: 2,
        input_tokens_details: { cached_tokens: 60 },
      }),
    ).toMatchObject({ inputTokens: 0, cacheHitTokens: 10, outputTokens: 2 });
  });

  it('keeps an absurd count at 2^40 tokens instead of failing the settlement (1e16 was)', () => {
    expect(usageFromOpenAiChat({ prompt_tokens: 5, completion_tokens: 1e16 })?.outputTokens).toBe(
      2 ** 40,
    );
    expect(usageFromAnthropic({ input_tokens: 1e300, output_tokens: 3 })?.inputTokens).toBe(
      2 ** 40,
    );
  });

  it('says when a usage object had no output count, so billing estimates it', () => {
    expect(usageFromOpenAiChat({ prompt_tokens: 5 })).toMatchObject({
      inputTokens: 5,
      outputTokens: 0,
      outputReported: false,
    });
    expect(usageFromOpenAiChat({ prompt_tokens: 5, completion_tokens: 0 })?.outputReported).toBe(
      true,
    );
    expect(usageFromOpenAiResponses({ input_tokens: 5 })?.outputReported).toBe(false);
    expect(usageFromAnthropic({ input_tokens: 5 })?.outputReported).toBe(false);
  });

  it('returns null for usage: null and for objects without counts', () => {
    expect(usageFromOpenAiChat(null)).toBeNull();
    expect(usageFromOpenAiChat({})).toBeNull();
    expect(usageFromOpenAiChat('12')).toBeNull();
  });
});

describe('usage from an OpenAI Responses usage object', () => {
  it('subtracts cached input and keeps reasoning inside output', () => {
    expect(
      usageFromOpenAiResponses({
        input_tokens: 300,
        input_tokens_details: { cached_tokens: 100 },
        output_tokens: 40,
        output_tokens_details: { reasoning_tokens: 25 },
        total_tokens: 340,
      }),
    ).toEqual({
      inputTokens: 200,
      cacheHitTokens: 100,
      outputTokens: 40,
      reasoningTokens: 25,
      cacheHitReported: true,
      outputReported: true,
    });
  });
});

describe('usage from an Anthropic usage object', () => {
  it('bills cache writes as input and cache reads as hits', () => {
    expect(
      usageFromAnthropic({
        input_tokens: 20,
        cache_creation_input_tokens: 500,
        cache_read_input_tokens: 1000,
        output_tokens: 70,
        output_tokens_details: { thinking_tokens: 30 },
      }),
    ).toEqual({
      inputTokens: 520,
      cacheHitTokens: 1000,
      outputTokens: 70,
      reasoningTokens: 30,
      cacheHitReported: true,
      outputReported: true,
    });
  });

  it('treats null cache fields as absent', () => {
    expect(
      usageFromAnthropic({
        input_tokens: 9,
        output_tokens: 3,
        cache_creation_input_tokens: null,
        cache_read_input_tokens: null,
      }),
    ).toMatchObject({ inputTokens: 9, cacheHitTokens: 0, cacheHitReported: false });
  });
});

describe('usage from an embeddings usage object', () => {
  it('bills prompt tokens as input', () => {
    expect(usageFromEmbeddings({ prompt_tokens: 8, total_tokens: 8 })).toMatchObject({
      inputTokens: 8,
      outputTokens: 0,
    });
  });
});
