// Reads what billing and logs need from a non-streamed chat.completion body.

import { isObject, stringAt } from '../json-read.ts';
import type { UpstreamIdentity } from '../types.ts';
import { usageFromOpenAiChat, type Usage } from '../usage.ts';

export interface ChatResponseInfo extends UpstreamIdentity {
  usage: Usage | null;
}

export function readChatResponse(body: unknown): ChatResponseInfo {
  if (!isObject(body)) return { id: null, model: null, usage: null };
  return {
    id: stringAt(body, 'id'),
    model: stringAt(body, 'model'),
    usage: usageFromOpenAiChat(body.usage),
  };
}
