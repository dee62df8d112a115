// Relays an Anthropic messages event stream unchanged, reading usage from message_start and the
// cumulative message_delta as they pass.

import { isObject, parseJson, stringAt } from '../json-read.ts';
import { formatSse } from '../sse-parser.ts';
import { eventName, plainNamedEvents } from '../sse-verbatim.ts';
import { SseStreamRelay } from '../stream-relay.ts';
import type { SseEvent } from '../types.ts';
import { AnthropicUsageAccumulator } from './usage-accumulator.ts';

/** The events this relay reads; every other one is written back as it came. */
const READ_TYPES: ReadonlySet<string> = new Set([
  'message_start',
  'message_delta',
  'message_stop',
  'error',
]);
const READ_NAMES = [...READ_TYPES].map(eventName);

/**
 * Only message_start, message_delta, message_stop and error are parsed; content_block_delta
 * events (all but a handful of any stream) are forwarded without JSON.parse, and a chunk of
 * nothing else goes out as the upstream's own Buffer (decision 0030).
 */
export class MessagesStreamRelay extends SseStreamRelay {
  private readonly acc: AnthropicUsageAccumulator;

  constructor() {
    super();
    this.acc = new AnthropicUsageAccumulator();
  }

  protected onEvent(event: SseEvent): void {
    const type = event.event;
    if (type === 'message_stop') {
      this.completed = true;
    } else if (type !== null && READ_TYPES.has(type)) {
      const payload = parseJson(event.data);
      if (isObject(payload)) this.read(type, payload);
    }
    this.emit(formatSse(event.event, event.data));
  }

  protected override unchangedEvents(chunk: Buffer): number {
    return plainNamedEvents(chunk, READ_NAMES);
  }

  protected finish(): void {
    // An Anthropic stream closes after message_stop; there is no terminator to add.
  }

  private read(type: string, payload: Record<string, unknown>): void {
    if (type === 'message_start') {
      const message = payload.message;
      if (!isObject(message)) return;
      this.upstreamId = stringAt(message, 'id');
      this.upstreamModel = stringAt(message, 'model');
      this.acc.add(message.usage);
    } else if (type === 'message_delta') {
      this.acc.add(payload.usage);
    } else {
      const error = payload.error;
      this.errorMessage =
        (isObject(error) ? stringAt(error, 'message') : null) ?? 'upstream stream error';
    }
    this.usage = this.acc.usage();
  }
}
