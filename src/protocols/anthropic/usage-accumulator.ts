// Anthropic stream usage arrives in two places: message_start (input side, output so far) and
// message_delta (cumulative totals; a field present overwrites, a field absent keeps its value).

import { countAt, isObject, objectAt } from '../json-read.ts';
import { makeUsage, type Usage } from '../usage.ts';

export class AnthropicUsageAccumulator {
  private input: number;
  private cacheWrite: number;
  private cacheRead: number;
  private output: number;
  private thinking: number;
  private seen: boolean;

  constructor() {
    this.input = 0;
    this.cacheWrite = 0;
    this.cacheRead = 0;
    this.output = 0;
    this.thinking = 0;
    this.seen = false;
  }

  /** Merges the `usage` of a message_start's message or of a message_delta. */
  add(usage: unknown): void {
    if (!isObject(usage)) return;
    this.seen = true;
    this.input = countAt(usage, 'input_tokens') ?? this.input;
    this.cacheWrite = countAt(usage, 'cache_creation_input_tokens') ?? this.cacheWrite;
    this.cacheRead = countAt(usage, 'cache_read_input_tokens') ?? this.cacheRead;
    this.output = countAt(usage, 'output_tokens') ?? this.output;
    const details = objectAt(usage, 'output_tokens_details');
    if (details !== null) this.thinking = countAt(details, 'thinking_tokens') ?? this.thinking;
  }

  /** Billing view (see usageFromAnthropic); null until any usage was seen. */
  usage(): Usage | null {
    if (!this.seen) return null;
    return makeUsage(this.input + this.cacheWrite, this.cacheRead, this.output, this.thinking);
  }

  /** The raw Anthropic counters, for writing an OpenAI-shaped usage object. */
  get inputTokens(): number {
    return this.input;
  }
  get cacheCreationTokens(): number {
    return this.cacheWrite;
  }
  get cacheReadTokens(): number {
    return this.cacheRead;
  }
  get outputTokens(): number {
    return this.output;
  }
}
