// Image references in both protocols: OpenAI's image_url (an http URL or a data: URL) and
// Anthropic's image source (base64 with a media type, or a url).

import type { AnthropicImageSource } from '../types.ts';

const DATA_URL = /^data:([^;,]*)((?:;[^;,]*)*?)(;base64)?,/;

/** data:image/png;base64,AAA → base64 source; anything else → url source. */
export function imageUrlToSource(url: string): AnthropicImageSource {
  const m = DATA_URL.exec(url);
  if (m === null) return { type: 'url', url };
  const mediaType = m[1] !== undefined && m[1].length > 0 ? m[1] : 'image/png';
  const payload = url.slice(m[0].length);
  // A data URL without ;base64 is percent-encoded text; Anthropic only takes base64.
  const data =
    m[3] !== undefined ? payload : Buffer.from(decodeURIComponent(payload)).toString('base64');
  return { type: 'base64', media_type: mediaType, data };
}

export function sourceToImageUrl(source: AnthropicImageSource): string {
  return source.type === 'url' ? source.url : `data:${source.media_type};base64,${source.data}`;
}
