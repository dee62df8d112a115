// Relays an OpenAI-compatible chat.completion.chunk stream to the client event by event, reading
// usage as it passes and hiding the usage chunk the gateway asked for when the client did not.

import { isObject, parseJson, stringAt } from '../json-read.ts';
import { formatSse } from '../sse-parser.ts';
import { plainChatEvents } from '../sse-verbatim.ts';
import { SseStreamRelay } from '../stream-relay.ts';
import type { SseEvent } from '../types.ts';
import { usageFromOpenAiChat } from '../usage.ts';

const DONE = 'data: [DONE]\n\n';
/** Each `"usage"` key, with `: null` after it captured when it is there. */
const USAGE_KEY = /"usage"(\s*:\s*null)?/g;

/**
 * The event has a `"usage"` that is not `"usage": null`. Every occurrence counts: testing for one
 * `"usage":null` anywhere in the event missed a usage object beside a nested null one.
 */
function mayCarryUsage(data: string): boolean {
  if (!data.includes('"usage"')) return false;
  USAGE_KEY.lastIndex = 0;
  for (let m = USAGE_KEY.exec(data); m !== null; m = USAGE_KEY.exec(data)) {
    if (m[1] === undefined) return true;
  }
  return false;
}

/**
 * Each event's data is forwarded byte for byte (only the framing is rewritten as
 * `data: …\n\n`). A chunk is JSON-parsed only when it is the first (for id and model), when it
 * may carry a usage object (a `"usage"` that is not `"usage":null`), or an error: with
 * include_usage every OpenAI chunk carries `"usage":null`, so a 1,000-chunk stream parses 2.
 */
export class ChatStreamRelay extends SseStreamRelay {
  private readonly clientWantsUsage: boolean;
  private doneSent: boolean;

  constructor(clientWantsUsage: boolean) {
    super();
    this.clientWantsUsage = clientWantsUsage;
    this.doneSent = false;
  }

  protected onEvent(event: SseEvent): void {
    if (this.doneSent) return;
    let data = event.data;
    if (data === '[DONE]') {
      this.completed = true;
      this.doneSent = true;
      this.emit(DONE);
      return;
    }
    if (this.upstreamId === null || mayCarryUsage(data) || data.includes('"error"')) {
      const chunk = parseJson(data);
      if (isObject(chunk)) {
        if (this.upstreamId === null) {
          this.upstreamId = stringAt(chunk, 'id') ?? '';
          this.upstreamModel = stringAt(chunk, 'model');
        }
        if (isObject(chunk.error)) {
          this.errorMessage = stringAt(chunk.error, 'message') ?? 'upstream stream error';
        }
        const usage = usageFromOpenAiChat(chunk.usage);
        if (usage !== null) {
          this.usage = usage;
          if (!this.clientWantsUsage) {
            const choices = chunk.choices;
            // The usage-only chunk (choices: []) exists only because the gateway asked: drop it.
            // DeepSeek-style final chunks carry choices too: keep those, minus the usage.
            if (Array.isArray(choices) && choices.length === 0) return;
            delete chunk.usage;
            data = JSON.stringify(chunk);
          }
        }
      }
    }
    this.emit(formatSse(null, data));
  }

  /**
   * After the first event (id and model read) and before [DONE], a chunk of plain events with no
   * usage and no error goes out as it came: that is every chunk of a chat stream but the first
   * and the last two (usage, [DONE]).
   */
  protected override unchangedEvents(chunk: Buffer): number {
    if (this.upstreamId === null || this.doneSent) return -1;
    return plainChatEvents(chunk);
  }

  protected finish(): void {
    // Some OpenAI-compatible upstreams close without [DONE]; the client's SDK expects it.
    if (!this.doneSent) {
      this.doneSent = true;
      this.emit(DONE);
    }
  }
}
