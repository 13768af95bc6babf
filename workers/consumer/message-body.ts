import { Buffer, isUtf8 } from 'node:buffer';
import { z } from 'zod';

/**
 * A message body as a handler sees it: the JSON value when the bytes are
 * JSON, else the text when they are UTF-8, else `undefined` (binary: read
 * `raw`). Never throws.
 */
export function decodeBody(raw: Uint8Array): unknown {
  // isUtf8 is one native pass; a fatal TextDecoder costs more per message.
  if (!isUtf8(raw)) return undefined;
  const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** The most headers kept from one message, and the longest name and value. */
const headerLimits = { count: 64, nameLength: 256, valueLength: 4096 } as const;

/** Stored headers: names to strings (the hand-off job stores them as JSON). */
export const messageHeadersSchema = z.record(z.string(), z.string());

/** A message's headers as stored and shown to handlers. */
export type MessageHeaders = Record<string, string>;

/**
 * Headers made safe to store and to hand to a handler: at most 64, names and
 * values cut to 256 and 4096 characters, every value a string (Buffers as
 * UTF-8, objects as JSON), `__proto__`-like names dropped. Never throws.
 */
export function sanitizeHeaders(headers: unknown): MessageHeaders {
  const out: MessageHeaders = Object.create(null) as MessageHeaders;
  if (headers === null || typeof headers !== 'object') return { ...out };
  let count = 0;
  for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
    if (count >= headerLimits.count) break;
    if (name === '__proto__' || name === 'constructor' || name === 'prototype') continue;
    if (value === undefined || value === null) continue;
    out[name.slice(0, headerLimits.nameLength)] = headerText(value).slice(
      0,
      headerLimits.valueLength,
    );
    count += 1;
  }
  return { ...out };
}

function headerText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value.join(', ');
  if (typeof value === 'object') {
    try {
      return JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    } catch {
      return '[unserialisable]';
    }
  }
  return String(value);
}
