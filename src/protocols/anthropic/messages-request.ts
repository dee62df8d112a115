// Builds the upstream body of a native Anthropic messages call: the client's body with the
// upstream model name and the configured reasoning parameters (e.g. extended thinking).

import type { JsonObject, MessagesRequest } from '../types.ts';
import { fitThinking } from './thinking.ts';

export interface MappedMessagesRequest {
  body: JsonObject;
  stream: boolean;
}

/**
 * `reasoningParams` from config, e.g. `{thinking:{type:'enabled', budget_tokens:8000}}`, replace
 * the client's top-level keys of the same name. Anthropic streams always report usage
 * (message_start and message_delta), so nothing has to be forced.
 */
export function mapMessagesRequest(
  client: MessagesRequest,
  upstreamModel: string,
  reasoningParams: Record<string, unknown> | null,
): MappedMessagesRequest {
  const body: JsonObject = { ...client, model: upstreamModel };
  if (reasoningParams !== null) {
    Object.assign(body, reasoningParams);
    if ('thinking' in reasoningParams) fitThinking(body);
  }
  return { body, stream: client.stream === true };
}
