// The OpenAI Responses endpoint (POST /v1/responses), served natively only: the request passes
// through with the upstream model name, and usage is read from the response object.

import { isObject, stringAt } from '../json-read.ts';
import type { JsonObject, UpstreamIdentity } from '../types.ts';
import { usageFromOpenAiResponses, type Usage } from '../usage.ts';

export interface MappedResponsesRequest {
  body: JsonObject;
  stream: boolean;
}

/**
 * Model replaced; `reasoningParams` from config (e.g. `{reasoning:{effort:'high'}}`) replace the
 * client's top-level keys of the same name. Responses streams always end with
 * response.completed carrying usage, so nothing has to be forced.
 */
export function mapResponsesRequest(
  client: JsonObject,
  upstreamModel: string,
  reasoningParams: Record<string, unknown> | null,
  maxOutputTokens: number,
): MappedResponsesRequest {
  const body: JsonObject = { ...client, model: upstreamModel };
  if (reasoningParams !== null) Object.assign(body, reasoningParams);
  // The bound the reservation priced, when the client gave none (as in chat-request.ts).
  if (body.max_output_tokens == null) body.max_output_tokens = maxOutputTokens;
  return { body, stream: client.stream === true };
}

export interface ResponsesInfo extends UpstreamIdentity {
  usage: Usage | null;
}

/** From a `response` object: the non-stream body, or the one inside response.completed. */
export function readResponsesResponse(body: unknown): ResponsesInfo {
  if (!isObject(body)) return { id: null, model: null, usage: null };
  return {
    id: stringAt(body, 'id'),
    model: stringAt(body, 'model'),
    usage: usageFromOpenAiResponses(body.usage),
  };
}
