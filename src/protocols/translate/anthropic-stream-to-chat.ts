// An Anthropic messages event stream answering a chat completions request: an incremental state
// machine that turns each event into chat.completion.chunk SSE, ending with `data: [DONE]`.

import { AnthropicUsageAccumulator } from '../anthropic/usage-accumulator.ts';
import { countAt, isObject, parseJson, stringAt } from '../json-read.ts';
import { SseStreamRelay } from '../stream-relay.ts';
import type { ChatChunkChoice, ChatFinishReason, JsonObject, SseEvent } from '../types.ts';
import { chatUsageFromAccumulator } from './anthropic-response-to-chat.ts';
import { anthropicToFinishReason } from './stop-reasons.ts';

const DONE = 'data: [DONE]\n\n';

/**
 * Text deltas become `delta.content`, thinking deltas `delta.reasoning_content` (the DeepSeek
 * convention most OpenAI-compatible clients read), tool_use blocks `delta.tool_calls` with the
 * id and name first and the argument JSON in pieces as Anthropic sends it. The chunk prefix
 * (id, object, created, model) is serialized once at message_start, so each delta costs one
 * JSON.parse and one small JSON.stringify.
 */
export class AnthropicToChatStream extends SseStreamRelay {
  private readonly clientWantsUsage: boolean;
  private readonly modelOverride: string | null;
  private readonly acc: AnthropicUsageAccumulator;
  /** Anthropic content block index → OpenAI tool_calls index (tool_use blocks only). */
  private readonly toolIndexOfBlock: Map<number, number>;
  private prefix: string;
  private created: number;
  private finishReason: ChatFinishReason | null;
  private finished: boolean;

  /** `model` names the model in the chunks (null: the upstream's own name). */
  constructor(clientWantsUsage: boolean, model: string | null) {
    super();
    this.clientWantsUsage = clientWantsUsage;
    this.modelOverride = model;
    this.acc = new AnthropicUsageAccumulator();
    this.toolIndexOfBlock = new Map();
    this.prefix = '';
    this.created = Math.floor(Date.now() / 1000);
    this.finishReason = null;
    this.finished = false;
  }

  protected onEvent(event: SseEvent): void {
    if (this.finished || event.event === 'ping') return;
    const payload = parseJson(event.data);
    if (!isObject(payload)) return;
    // The event name and the payload's type agree in Anthropic streams; trust the payload.
    switch (payload.type) {
      case 'message_start':
        this.start(payload);
        break;
      case 'content_block_start':
        this.blockStart(payload);
        break;
      case 'content_block_delta':
        this.blockDelta(payload);
        break;
      case 'message_delta':
        this.acc.add(payload.usage);
        this.usage = this.acc.usage();
        if (isObject(payload.delta) && typeof payload.delta.stop_reason === 'string') {
          this.finishReason = anthropicToFinishReason(payload.delta.stop_reason);
        }
        break;
      case 'message_stop':
        this.completed = true;
        this.finish();
        break;
      case 'error':
        this.fail(payload);
        break;
      default:
        // content_block_stop needs nothing; unknown future events are skipped.
        break;
    }
  }

  protected finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.choice({ index: 0, delta: {}, finish_reason: this.finishReason ?? 'stop' });
    if (this.clientWantsUsage) {
      const usage = JSON.stringify(chatUsageFromAccumulator(this.acc));
      // The finish chunk above set the prefix; the usage chunk has no choices.
      this.emit(`data: ${this.prefix}],"usage":${usage}}\n\n`);
    }
    this.emit(DONE);
  }

  private start(payload: JsonObject): void {
    const message = isObject(payload.message) ? payload.message : {};
    this.upstreamId = stringAt(message, 'id');
    this.upstreamModel = stringAt(message, 'model');
    this.acc.add(message.usage);
    this.usage = this.acc.usage();
    this.setPrefix(this.upstreamId ?? '', this.modelOverride ?? this.upstreamModel ?? '');
    this.choice({ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null });
  }

  private blockStart(payload: JsonObject): void {
    const index = countAt(payload, 'index');
    const block = payload.content_block;
    if (index === null || !isObject(block)) return;
    if (block.type === 'tool_use') {
      const toolIndex = this.toolIndexOfBlock.size;
      this.toolIndexOfBlock.set(index, toolIndex);
      const id = stringAt(block, 'id') ?? '';
      const name = stringAt(block, 'name') ?? '';
      this.choice({
        index: 0,
        delta: {
          tool_calls: [
            { index: toolIndex, id, type: 'function', function: { name, arguments: '' } },
          ],
        },
        finish_reason: null,
      });
    } else if (block.type === 'text') {
      const text = stringAt(block, 'text');
      if (text !== null && text.length > 0) {
        this.choice({ index: 0, delta: { content: text }, finish_reason: null });
      }
    }
  }

  private blockDelta(payload: JsonObject): void {
    const delta = payload.delta;
    if (!isObject(delta)) return;
    switch (delta.type) {
      case 'text_delta': {
        const text = stringAt(delta, 'text');
        if (text !== null) this.choice({ index: 0, delta: { content: text }, finish_reason: null });
        return;
      }
      case 'thinking_delta': {
        const thinking = stringAt(delta, 'thinking');
        if (thinking !== null) {
          this.choice({ index: 0, delta: { reasoning_content: thinking }, finish_reason: null });
        }
        return;
      }
      case 'input_json_delta': {
        const index = countAt(payload, 'index');
        const toolIndex = index === null ? undefined : this.toolIndexOfBlock.get(index);
        const partial = stringAt(delta, 'partial_json');
        if (toolIndex === undefined || partial === null || partial.length === 0) return;
        this.choice({
          index: 0,
          delta: { tool_calls: [{ index: toolIndex, function: { arguments: partial } }] },
          finish_reason: null,
        });
        return;
      }
      default:
        // signature_delta and citations_delta have no chat equivalent.
        return;
    }
  }

  private fail(payload: JsonObject): void {
    const error = isObject(payload.error) ? payload.error : {};
    this.errorMessage = stringAt(error, 'message') ?? 'upstream stream error';
    const body = {
      error: {
        message: this.errorMessage,
        type: stringAt(error, 'type') ?? 'api_error',
        code: null,
      },
    };
    // OpenAI SDKs raise an APIError on a chunk carrying `error`; nothing may follow it.
    this.finished = true;
    this.emit(`data: ${JSON.stringify(body)}\n\n`);
  }

  private setPrefix(id: string, model: string): void {
    this.prefix =
      `{"id":${JSON.stringify(id)},"object":"chat.completion.chunk",` +
      `"created":${this.created},"model":${JSON.stringify(model)},"choices":[`;
  }

  private choice(choice: ChatChunkChoice): void {
    if (this.prefix === '') this.setPrefix('', this.modelOverride ?? '');
    this.emit(`data: ${this.prefix}${JSON.stringify(choice)}]}\n\n`);
  }
}
