// A messages request served by an OpenAI-compatible channel: the Anthropic body rewritten as a
// chat completions body (system message, content parts, images, tools, tool results as tool
// messages, stop sequences), always streaming usage so the gateway can bill.

import type {
  AnthropicContentBlock,
  AnthropicMessageParam,
  AnthropicToolChoice,
  ChatContentPart,
  ChatFunctionTool,
  ChatMessage,
  ChatToolCall,
  ChatToolChoice,
  JsonObject,
  MessagesRequest,
} from '../types.ts';
import { sourceToImageUrl } from './images.ts';

export interface TranslatedMessagesRequest {
  body: JsonObject;
  stream: boolean;
}

/**
 * `reasoningParams` from config (e.g. `{reasoning_effort:'high'}` or
 * `{thinking:{type:'enabled'}}`) are merged at the top level; the client's Anthropic `thinking`
 * is not carried over (its budget has no OpenAI equivalent). Dropped: top_k, thinking blocks of
 * earlier turns (their signatures mean nothing to another vendor), server tools.
 */
export function messagesRequestToOpenAi(
  client: MessagesRequest,
  upstreamModel: string,
  reasoningParams: Record<string, unknown> | null,
): TranslatedMessagesRequest {
  const messages: ChatMessage[] = [];
  const system = client.system;
  if (typeof system === 'string' && system.length > 0) {
    messages.push({ role: 'system', content: system });
  } else if (Array.isArray(system) && system.length > 0) {
    messages.push({ role: 'system', content: system.map((b) => b.text).join('\n\n') });
  }
  for (const m of client.messages) addMessage(m, messages);

  const body: JsonObject = { model: upstreamModel, messages, max_tokens: client.max_tokens };
  const stream = client.stream === true;
  if (stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  if (typeof client.temperature === 'number') body.temperature = client.temperature;
  if (typeof client.top_p === 'number') body.top_p = client.top_p;
  if (Array.isArray(client.stop_sequences) && client.stop_sequences.length > 0) {
    body.stop = client.stop_sequences;
  }
  if (typeof client.metadata?.user_id === 'string') body.user = client.metadata.user_id;
  const tools: ChatFunctionTool[] = [];
  for (const t of client.tools ?? []) {
    // Server tools (web_search_…, bash_…) run at Anthropic; only custom tools translate.
    if (t.type !== undefined && t.type !== 'custom') continue;
    tools.push({
      type: 'function',
      function: {
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: t.input_schema,
      },
    });
  }
  if (tools.length > 0) {
    body.tools = tools;
    const choice = client.tool_choice;
    if (choice !== undefined) {
      body.tool_choice = toolChoice(choice);
      if ('disable_parallel_tool_use' in choice && choice.disable_parallel_tool_use === true) {
        body.parallel_tool_calls = false;
      }
    }
  }
  if (reasoningParams !== null) Object.assign(body, reasoningParams);
  return { body, stream };
}

function addMessage(m: AnthropicMessageParam, out: ChatMessage[]): void {
  if (typeof m.content === 'string') {
    out.push({ role: m.role, content: m.content });
    return;
  }
  if (m.role === 'assistant') {
    let text = '';
    const toolCalls: ChatToolCall[] = [];
    for (const block of m.content) {
      if (block.type === 'text') text += block.text;
      else if (block.type === 'tool_use') {
        toolCalls.push({
          id: block.id,
          type: 'function',
          function: { name: block.name, arguments: JSON.stringify(block.input) },
        });
      }
    }
    const message: ChatMessage = {
      role: 'assistant',
      content: text.length > 0 || toolCalls.length === 0 ? text : null,
    };
    if (toolCalls.length > 0) message.tool_calls = toolCalls;
    out.push(message);
    return;
  }
  // A user turn: tool results become `tool` messages, which must directly follow the assistant
  // turn that called them, so they go first; the rest of the turn follows as one user message.
  const parts: ChatContentPart[] = [];
  for (const block of m.content) {
    if (block.type === 'tool_result') {
      out.push({ role: 'tool', tool_call_id: block.tool_use_id, content: toolResultText(block) });
    } else if (block.type === 'text') {
      parts.push({ type: 'text', text: block.text });
    } else if (block.type === 'image') {
      parts.push({ type: 'image_url', image_url: { url: sourceToImageUrl(block.source) } });
    }
  }
  if (parts.length === 0) return;
  const only = parts[0];
  out.push({
    role: 'user',
    content: parts.length === 1 && only !== undefined && only.type === 'text' ? only.text : parts,
  });
}

/** Tool messages carry text only on most OpenAI-compatible upstreams: images are dropped. */
function toolResultText(block: AnthropicContentBlock & { type: 'tool_result' }): string {
  const content = block.content;
  if (content === undefined) return '';
  if (typeof content === 'string') return content;
  let text = '';
  for (const part of content) if (part.type === 'text') text += part.text;
  return text;
}

function toolChoice(choice: AnthropicToolChoice): ChatToolChoice {
  switch (choice.type) {
    case 'none':
      return 'none';
    case 'any':
      return 'required';
    case 'tool':
      return { type: 'function', function: { name: choice.name } };
    default:
      return 'auto';
  }
}
