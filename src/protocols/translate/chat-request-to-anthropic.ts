// A chat completions request served by an Anthropic channel: the OpenAI chat body rewritten as an
// Anthropic messages body (system, content blocks, images, tools, tool results, limits).

import { fitThinking } from '../anthropic/thinking.ts';
import { isObject, parseJson } from '../json-read.ts';
import type {
  AnthropicContentBlock,
  AnthropicImageBlock,
  AnthropicMessageParam,
  AnthropicTextBlock,
  AnthropicTool,
  AnthropicToolChoice,
  ChatContentPart,
  ChatMessage,
  ChatRequest,
  JsonObject,
} from '../types.ts';
import { imageUrlToSource } from './images.ts';

export interface TranslatedChatRequest {
  body: JsonObject;
  stream: boolean;
  /** The client set stream_options.include_usage: the translated stream ends with a usage chunk. */
  clientWantsUsage: boolean;
}

/**
 * `defaultMaxTokens` fills Anthropic's required max_tokens when the client set neither
 * max_tokens nor max_completion_tokens. `reasoningParams` from config (e.g.
 * `{thinking:{type:'enabled', budget_tokens:8000}}`) are merged at the top level; the client's
 * reasoning_effort is not carried over. Fields Anthropic has no equivalent for (n,
 * response_format, logprobs, seed, presence/frequency penalties) are dropped.
 */
export function chatRequestToAnthropic(
  client: ChatRequest,
  upstreamModel: string,
  reasoningParams: Record<string, unknown> | null,
  defaultMaxTokens: number,
): TranslatedChatRequest {
  const system: string[] = [];
  const messages: AnthropicMessageParam[] = [];
  for (const m of client.messages) addMessage(m, system, messages);

  const body: JsonObject = {
    model: upstreamModel,
    messages,
    max_tokens: client.max_completion_tokens ?? client.max_tokens ?? defaultMaxTokens,
  };
  if (system.length > 0) body.system = system.join('\n\n');
  const stream = client.stream === true;
  if (stream) body.stream = true;
  // OpenAI's temperature runs 0..2, Anthropic's 0..1: clamp rather than fail.
  if (typeof client.temperature === 'number') body.temperature = Math.min(1, client.temperature);
  if (typeof client.top_p === 'number') body.top_p = client.top_p;
  const stop = client.stop;
  if (typeof stop === 'string') body.stop_sequences = [stop];
  else if (Array.isArray(stop) && stop.length > 0) body.stop_sequences = stop;
  if (typeof client.user === 'string') body.metadata = { user_id: client.user };
  if (Array.isArray(client.tools) && client.tools.length > 0) {
    body.tools = client.tools.map((t): AnthropicTool => ({
      name: t.function.name,
      ...(t.function.description !== undefined ? { description: t.function.description } : {}),
      input_schema: t.function.parameters ?? { type: 'object', properties: {} },
    }));
    const choice = toolChoice(client);
    if (choice !== null) body.tool_choice = choice;
  }
  if (reasoningParams !== null) {
    Object.assign(body, reasoningParams);
    if ('thinking' in reasoningParams) fitThinking(body);
  }
  return { body, stream, clientWantsUsage: client.stream_options?.include_usage === true };
}

function addMessage(m: ChatMessage, system: string[], out: AnthropicMessageParam[]): void {
  switch (m.role) {
    case 'system':
    case 'developer':
      system.push(textOf(m.content));
      return;
    case 'user':
      push(out, 'user', contentBlocks(m.content));
      return;
    case 'assistant': {
      const blocks: AnthropicContentBlock[] = [];
      const text = textOf(m.content);
      if (text.length > 0) blocks.push({ type: 'text', text });
      for (const call of m.tool_calls ?? []) {
        const input = parseJson(call.function.arguments);
        blocks.push({
          type: 'tool_use',
          id: call.id,
          name: call.function.name,
          input: isObject(input) ? input : {},
        });
      }
      // Anthropic rejects an empty assistant turn; an empty one says nothing anyway.
      if (blocks.length > 0) push(out, 'assistant', blocks);
      return;
    }
    case 'tool': {
      const content = m.content;
      push(out, 'user', [
        {
          type: 'tool_result',
          tool_use_id: m.tool_call_id ?? '',
          content: typeof content === 'string' ? content : contentBlocks(content),
        },
      ]);
      return;
    }
  }
}

/** Appends a turn; consecutive turns of one role merge, so tool results share one user turn. */
function push(
  out: AnthropicMessageParam[],
  role: 'user' | 'assistant',
  blocks: AnthropicContentBlock[],
): void {
  const last = out[out.length - 1];
  if (last !== undefined && last.role === role && Array.isArray(last.content)) {
    last.content.push(...blocks);
  } else {
    out.push({ role, content: blocks });
  }
}

function contentBlocks(
  content: string | ChatContentPart[] | null | undefined,
): (AnthropicTextBlock | AnthropicImageBlock)[] {
  if (content === null || content === undefined) return [];
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  const blocks: (AnthropicTextBlock | AnthropicImageBlock)[] = [];
  for (const part of content) {
    if (part.type === 'text') blocks.push({ type: 'text', text: part.text });
    else if (part.type === 'image_url') {
      blocks.push({ type: 'image', source: imageUrlToSource(part.image_url.url) });
    }
  }
  return blocks;
}

function textOf(content: string | ChatContentPart[] | null | undefined): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  let text = '';
  for (const part of content) if (part.type === 'text') text += part.text;
  return text;
}

function toolChoice(client: ChatRequest): AnthropicToolChoice | null {
  const disableParallel = client.parallel_tool_calls === false;
  const extra = disableParallel ? { disable_parallel_tool_use: true } : {};
  const choice = client.tool_choice;
  if (choice === undefined) return disableParallel ? { type: 'auto', ...extra } : null;
  if (choice === 'none') return { type: 'none' };
  if (choice === 'auto') return { type: 'auto', ...extra };
  if (choice === 'required') return { type: 'any', ...extra };
  return { type: 'tool', name: choice.function.name, ...extra };
}
