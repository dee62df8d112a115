// Relays an OpenAI Responses event stream unchanged, reading usage from its terminal event
// (response.completed, or response.incomplete / response.failed, which carry usage too).

import { isObject, parseJson, stringAt } from '../json-read.ts';
import { formatSse } from '../sse-parser.ts';
import { eventName, plainNamedEvents } from '../sse-verbatim.ts';
import { SseStreamRelay } from '../stream-relay.ts';
import type { SseEvent } from '../types.ts';
import { readResponsesResponse } from './responses.ts';

/**
 * Only the few lifecycle events are parsed (created, completed, incomplete, failed, error);
 * the many output_text.delta events are forwarded without JSON.parse. The event name comes from
 * the `event:` line, or, when an upstream omits it, from the data's leading `"type"` field.
 */
export class ResponsesStreamRelay extends SseStreamRelay {
  protected onEvent(event: SseEvent): void {
    const type = event.event ?? leadingType(event.data);
    if (type !== null && isLifecycle(type)) {
      const parsed = parseJson(event.data);
      if (isObject(parsed)) this.read(type, parsed);
    }
    this.emit(formatSse(event.event, event.data));
  }

  /** A chunk of named events, none of them a lifecycle event, goes out as it came (0030). */
  protected override unchangedEvents(chunk: Buffer): number {
    return plainNamedEvents(chunk, LIFECYCLE_NAMES);
  }

  protected finish(): void {
    // A Responses stream has no [DONE]; its last event is response.completed.
  }

  private read(type: string, payload: Record<string, unknown>): void {
    if (type === 'error') {
      this.errorMessage = stringAt(payload, 'message') ?? 'upstream stream error';
      return;
    }
    const info = readResponsesResponse(payload.response);
    if (info.id !== null) this.upstreamId = info.id;
    if (info.model !== null) this.upstreamModel = info.model;
    if (info.usage !== null) this.usage = info.usage;
    if (type === 'response.completed' || type === 'response.incomplete') this.completed = true;
    if (type === 'response.failed') {
      const response = payload.response;
      const error = isObject(response) && isObject(response.error) ? response.error : null;
      this.errorMessage = (error !== null ? stringAt(error, 'message') : null) ?? 'response failed';
      this.completed = true;
    }
  }
}

const LIFECYCLE: ReadonlySet<string> = new Set([
  'response.created',
  'response.completed',
  'response.incomplete',
  'response.failed',
  'error',
]);

const LIFECYCLE_NAMES = [...LIFECYCLE].map(eventName);

function isLifecycle(type: string): boolean {
  return LIFECYCLE.has(type);
}

const TYPE_PREFIX = '{"type":"';

function leadingType(data: string): string | null {
  if (!data.startsWith(TYPE_PREFIX)) return null;
  const end = data.indexOf('"', TYPE_PREFIX.length);
  return end === -1 ? null : data.slice(TYPE_PREFIX.length, end);
}
