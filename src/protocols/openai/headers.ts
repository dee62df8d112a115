// Headers of a call to an OpenAI-compatible upstream.

export function openAiHeaders(apiKey: string): Record<string, string> {
  return { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
}
