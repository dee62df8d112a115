// A chat.completion.chunk stream answering a messages request: an incremental state machine that
// emits Anthropic's event sequence (message_start, content blocks, message_delta, message_stop).

import { countAt, isObject, parseJson, stringAt } from '../json-read.ts';
import { SseStreamRelay } from '../stream-relay.ts';
import type { AnthropicStopReason, JsonObject, SseEvent } from '../types.ts';
import { usageFromOpenAiChat } from '../usage.ts';
import { anthropicUsageFrom } from './openai-response-to-messages.ts';
import { finishToAnthropicReason } from './stop-reasons.ts';

type BlockKind = 'text' | 'thinking' | 'tool_use';

/**
 * reasoning_content deltas open a thinking block, content deltas a text block, each new
 * tool_calls index a tool_use block whose argument pieces become input_json_delta. Opening a
 * block of another kind closes the open one, as Anthropic streams never interleave blocks. The
 * closing message_delta waits for [DONE]: with include_usage the usage chunk comes after the
 * finish_reason chunk, and message_delta is where Anthropic clients read the final usage.
 */
export class OpenAiToMessagesStream extends SseStreamRelay {
  private readonly modelOverride: string | null;
  /** OpenAI tool_calls index → Anthropic content block index. */
  private readonly blockOfTool: Map<number, number>;
  private started: boolean;
  private finished: boolean;
  private openBlock: number;
  private openKind: BlockKind | null;
  private nextBlock: number;
  private finishReason: unknown;
  private madeToolCalls: boolean;

  /** `model` names the model in message_start (null: the upstream's own name). */
  constructor(model: string | null) {
    super();
    this.modelOverride = model;
    this.blockOfTool = new Map();
    this.started = false;
    this.finished = false;
    this.openBlock = -1;
    this.openKind = null;
    this.nextBlock = 0;
    this.finishReason = null;
    this.madeToolCalls = false;
  }

  protected onEvent(event: SseEvent): void {
    if (this.finished) return;
    if (event.data === '[DONE]') {
      this.completed = true;
      this.finish();
      return;
    }
    const chunk = parseJson(event.data);
    if (!isObject(chunk)) return;
    if (isObject(chunk.error)) {
      this.fail(chunk.error);
      return;
    }
    if (!this.started) this.start(chunk);
    const usage = usageFromOpenAiChat(chunk.usage);
    if (usage !== null) this.usage = usage;
    const choices = chunk.choices;
    if (!Array.isArray(choices)) return;
    const choice: unknown = choices[0];
    if (!isObject(choice)) return;
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      this.finishReason = choice.finish_reason;
    }
    const delta = choice.delta;
    if (!isObject(delta)) return;
    const reasoning = stringAt(delta, 'reasoning_content');
    if (reasoning !== null && reasoning.length > 0) {
      this.ensureBlock('thinking', '{"type":"thinking","thinking":"","signature":""}');
      this.delta({ type: 'thinking_delta', thinking: reasoning });
    }
    const text = stringAt(delta, 'content');
    if (text !== null && text.length > 0) {
      this.ensureBlock('text', '{"type":"text","text":""}');
      this.delta({ type: 'text_delta', text });
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const call of delta.tool_calls) if (isObject(call)) this.toolDelta(call);
    }
  }

  protected finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (!this.started) this.start({});
    this.closeBlock();
    const stopReason: AnthropicStopReason = finishToAnthropicReason(
      this.finishReason,
      this.madeToolCalls,
    );
    const usage = JSON.stringify(anthropicUsageFrom(this.usage));
    this.event(
      'message_delta',
      `{"type":"message_delta","delta":{"stop_reason":"${stopReason}","stop_sequence":null},"usage":${usage}}`,
    );
    this.event('message_stop', '{"type":"message_stop"}');
  }

  private start(chunk: JsonObject): void {
    this.started = true;
    this.upstreamId = stringAt(chunk, 'id');
    this.upstreamModel = stringAt(chunk, 'model');
    const message = {
      id: this.upstreamId ?? '',
      type: 'message',
      role: 'assistant',
      model: this.modelOverride ?? this.upstreamModel ?? '',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      // OpenAI-compatible upstreams report usage only at the end; message_delta carries it.
      usage: { input_tokens: 0, output_tokens: 0 },
    };
    this.event('message_start', `{"type":"message_start","message":${JSON.stringify(message)}}`);
  }

  private toolDelta(call: JsonObject): void {
    const toolIndex = countAt(call, 'index') ?? 0;
    const fn = isObject(call.function) ? call.function : {};
    let block = this.blockOfTool.get(toolIndex);
    if (block === undefined) {
      this.madeToolCalls = true;
      const id = stringAt(call, 'id') ?? `toolu_${toolIndex}`;
      const name = stringAt(fn, 'name') ?? '';
      block = this.openNew('tool_use', JSON.stringify({ type: 'tool_use', id, name, input: {} }));
      this.blockOfTool.set(toolIndex, block);
    }
    const args = stringAt(fn, 'arguments');
    if (args !== null && args.length > 0) {
      // Anthropic SDKs accumulate input_json_delta by block index, so pieces for a tool whose
      // block is no longer the open one still land in the right place.
      this.event(
        'content_block_delta',
        `{"type":"content_block_delta","index":${block},"delta":${JSON.stringify({ type: 'input_json_delta', partial_json: args })}}`,
      );
    }
  }

  private ensureBlock(kind: 'text' | 'thinking', start: string): void {
    if (this.openKind !== kind) this.openNew(kind, start);
  }

  private openNew(kind: BlockKind, contentBlock: string): number {
    this.closeBlock();
    const index = this.nextBlock++;
    this.openBlock = index;
    this.openKind = kind;
    this.event(
      'content_block_start',
      `{"type":"content_block_start","index":${index},"content_block":${contentBlock}}`,
    );
    return index;
  }

  private closeBlock(): void {
    if (this.openKind === null) return;
    this.event('content_block_stop', `{"type":"content_block_stop","index":${this.openBlock}}`);
    this.openKind = null;
    this.openBlock = -1;
  }

  private delta(delta: JsonObject): void {
    this.event(
      'content_block_delta',
      `{"type":"content_block_delta","index":${this.openBlock},"delta":${JSON.stringify(delta)}}`,
    );
  }

  private fail(error: JsonObject): void {
    this.finished = true;
    this.errorMessage = stringAt(error, 'message') ?? 'upstream stream error';
    const body = { type: 'error', error: { type: 'api_error', message: this.errorMessage } };
    this.event('error', JSON.stringify(body));
  }

  private event(name: string, data: string): void {
    this.emit(`event: ${name}\ndata: ${data}\n\n`);
  }
}
