// Relays an OpenAI-compatible chat.completion.chunk stream to the client event by event, reading
// usage as it passes and hiding the usage chunk the gateway asked for when the client did not.

import { isObject, parseJson, stringAt } from '../json-read.ts';
import { formatSse } from '../sse-parser.ts';
import { plainChatEvents } from '../sse-verbatim.ts';
import { SseStreamRelay } from '../stream-relay.ts';
import type { JsonObject, SseEvent } from '../types.ts';
import { usageFromOpenAiChat } from '../usage.ts';

const DONE = 'data: [DONE]\n\n';
const LF = 10;
/** `data: `, before each event's line in a chunk plainChatEvents passes. */
const DATA_PREFIX = 6;
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
 * `data: …\n\n`). A chunk is JSON-parsed only when it names the upstream's id and model (the
 * first), when it may carry a usage object (a `"usage"` that is not `"usage":null`), or an error:
 * with include_usage every OpenAI chunk carries `"usage":null`, so a 1,000-chunk stream parses 2.
 * A first chunk of plain events goes out as it came and is read after it has been written (when
 * the next chunk comes, or the id or model is asked for): parsed before, it delayed every stream's
 * first token (decision 0070).
 */
export class ChatStreamRelay extends SseStreamRelay {
  private readonly clientWantsUsage: boolean;
  private doneSent: boolean;
  /** The id and model are read, or held in `held` to be read. */
  private identified: boolean;
  /** The first chunk, passed on unchanged, whose events are still to be read for id and model. */
  private held: Buffer | null;

  constructor(clientWantsUsage: boolean) {
    super();
    this.clientWantsUsage = clientWantsUsage;
    this.doneSent = false;
    this.identified = false;
    this.held = null;
  }

  protected onEvent(event: SseEvent): void {
    if (this.doneSent) return;
    this.identify();
    let data = event.data;
    if (data === '[DONE]') {
      this.completed = true;
      this.doneSent = true;
      this.emit(DONE);
      return;
    }
    if (!this.identified || mayCarryUsage(data) || data.includes('"error"')) {
      const chunk = parseJson(data);
      if (isObject(chunk)) {
        if (!this.identified) this.identifyFrom(chunk);
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
   * Before [DONE], a chunk of plain events with no usage and no error goes out as it came: that
   * is every chunk of a chat stream but the last two (usage, [DONE]). The first such chunk is held
   * to be read for the id and model once it is on its way.
   */
  protected override unchangedEvents(chunk: Buffer): number {
    if (this.doneSent) return -1;
    this.identify();
    const events = plainChatEvents(chunk);
    if (events > 0 && !this.identified) {
      this.identified = true;
      this.held = chunk;
    }
    return events;
  }

  /**
   * Reads the held first chunk: its first event that is a JSON object names the id and model, as
   * when it was read event by event. When none is, the events after it are read until one is.
   */
  protected override identify(): void {
    const held = this.held;
    if (held === null) return;
    this.held = null;
    // plainChatEvents let it through: whole `data: <line>\n\n` events, valid UTF-8.
    for (let at = 0; at < held.length;) {
      const lineEnd = held.indexOf(LF, at);
      const chunk = parseJson(held.toString('utf8', at + DATA_PREFIX, lineEnd));
      if (isObject(chunk)) {
        this.identifyFrom(chunk);
        return;
      }
      at = lineEnd + 2;
    }
    this.identified = false;
  }

  private identifyFrom(chunk: JsonObject): void {
    this.identified = true;
    this.upstreamId = stringAt(chunk, 'id') ?? '';
    this.upstreamModel = stringAt(chunk, 'model');
  }

  protected finish(): void {
    // Some OpenAI-compatible upstreams close without [DONE]; the client's SDK expects it.
    if (!this.doneSent) {
      this.doneSent = true;
      this.emit(DONE);
    }
  }
}
