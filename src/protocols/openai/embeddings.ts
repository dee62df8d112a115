// Reads usage from a non-streamed embeddings response ({usage:{prompt_tokens,total_tokens}}).

import { isObject, stringAt } from '../json-read.ts';
import type { UpstreamIdentity } from '../types.ts';
import { usageFromEmbeddings, type Usage } from '../usage.ts';

export interface EmbeddingsInfo extends UpstreamIdentity {
  usage: Usage | null;
}

export function readEmbeddingsResponse(body: unknown): EmbeddingsInfo {
  if (!isObject(body)) return { id: null, model: null, usage: null };
  return { id: null, model: stringAt(body, 'model'), usage: usageFromEmbeddings(body.usage) };
}
