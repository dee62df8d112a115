// Builds the upstream body of a native chat completions call: the client's body with the upstream
// model name, the configured reasoning parameters, and usage always requested on streams.

import type { ChatRequest, JsonObject } from '../types.ts';

export interface MappedChatRequest {
  body: JsonObject;
  stream: boolean;
  /** The client itself set stream_options.include_usage (so the final usage chunk is its own). */
  clientWantsUsage: boolean;
}

/**
 * The output bound the reservation priced (the model's max_output_tokens) when the client gave
 * none. The charge is capped at the reservation, so an upstream left without a cap could write
 * more than was reserved, unbilled: a 2,000-token answer was charged as 100 (session 21). A
 * reasoning model gets it as max_completion_tokens (OpenAI's o-series refuse max_tokens), any
 * other as max_tokens, which every OpenAI-compatible supplier reads.
 */
export interface OutputCap {
  tokens: number;
  reasoning: boolean;
}

/**
 * `reasoningParams` comes from config for the effort level the client asked for, e.g.
 * `{reasoning_effort:'high'}` or `{thinking:{type:'enabled'}}`; its top-level keys replace the
 * client's. The client's own `reasoning_effort` is always removed: the gateway's effort scale
 * (low/high/max) is not the upstream's, and the config mapping is the only translation.
 */
export function mapChatRequest(
  client: ChatRequest,
  upstreamModel: string,
  reasoningParams: Record<string, unknown> | null,
  outputCap: OutputCap,
): MappedChatRequest {
  const body: JsonObject = { ...client, model: upstreamModel };
  delete body.reasoning_effort;
  if (reasoningParams !== null) Object.assign(body, reasoningParams);
  if (body.max_tokens == null && body.max_completion_tokens == null) {
    body[outputCap.reasoning ? 'max_completion_tokens' : 'max_tokens'] = outputCap.tokens;
  }
  const stream = client.stream === true;
  const clientWantsUsage = client.stream_options?.include_usage === true;
  if (stream) {
    // The gateway bills from usage, so it always asks for the final usage chunk and strips it
    // again when the client did not ask (ChatStreamRelay).
    body.stream_options = { ...client.stream_options, include_usage: true };
  } else {
    // OpenAI rejects stream_options without stream (400); it means nothing there anyway.
    delete body.stream_options;
  }
  return { body, stream, clientWantsUsage };
}
