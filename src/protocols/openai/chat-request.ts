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
 * `reasoningParams` comes from config for the effort level the client asked for, e.g.
 * `{reasoning_effort:'high'}` or `{thinking:{type:'enabled'}}`; its top-level keys replace the
 * client's. The client's own `reasoning_effort` is always removed: the gateway's effort scale
 * (low/high/max) is not the upstream's, and the config mapping is the only translation.
 */
export function mapChatRequest(
  client: ChatRequest,
  upstreamModel: string,
  reasoningParams: Record<string, unknown> | null,
): MappedChatRequest {
  const body: JsonObject = { ...client, model: upstreamModel };
  delete body.reasoning_effort;
  if (reasoningParams !== null) Object.assign(body, reasoningParams);
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
