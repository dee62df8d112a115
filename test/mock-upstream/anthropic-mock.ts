// The Anthropic side of the mock upstream: the demo core's answers (src/demo/anthropic-replies.ts)
// under the names the mock has always exported.

export {
  anthropicError,
  anthropicToolName,
  isAnthropicThinking,
  messagesReply,
} from '../../src/demo/anthropic-replies.ts';
