// Reads what billing and logs need from a non-streamed Anthropic message body.

import { isObject, stringAt } from '../json-read.ts';
import type { UpstreamIdentity } from '../types.ts';
import { usageFromAnthropic, type Usage } from '../usage.ts';

export interface MessagesResponseInfo extends UpstreamIdentity {
  usage: Usage | null;
}

export function readMessagesResponse(body: unknown): MessagesResponseInfo {
  if (!isObject(body)) return { id: null, model: null, usage: null };
  return {
    id: stringAt(body, 'id'),
    model: stringAt(body, 'model'),
    usage: usageFromAnthropic(body.usage),
  };
}
