import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, maskUrl } from '../../src/config/logger.js';
import { censor, redactError, redactText, redactUrl, redactValue } from '../../src/util/redact.js';

/** A logger whose lines land in `lines`. */
function capture(): { lines: string[]; logger: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { lines, logger: createLogger({ level: 'trace', destination }) };
}

/** What ioredis emits when Redis refuses a password: the AUTH command and its arguments. */
function wrongPassError(password: string): Error {
  return Object.assign(new Error('WRONGPASS invalid username-password pair or user is disabled.'), {
    command: { name: 'auth', args: [password] },
  });
}

describe('the redaction module', () => {
  it.each([
    ['https://ada:s3cret-pw@hooks.example.com/h', 'https://ada:***@hooks.example.com/h'],
    ['https://tok_abcdef@hooks.example.com/h', 'https://***@hooks.example.com/h'],
    ['https://x.io/h?token=t0k3n&a=1', 'https://x.io/h?token=***&a=1'],
    [
      'https://x.io/h?api_key=k&sig=s&password=p',
      'https://x.io/h?api_key=***&sig=***&password=***',
    ],
    ['https://x.io/h?X-Amz-Signature=abc', 'https://x.io/h?X-Amz-Signature=***'],
    ['redis://:pw@127.0.0.1:6379/0', 'redis://:***@127.0.0.1:6379/0'],
    ['https://x.io/plain?page=2', 'https://x.io/plain?page=2'],
    ['not a url', 'not a url'],
  ])('redacts the URL %s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });

  it('redacts URLs and bearer credentials inside free text, and known secrets', () => {
    expect(redactText('POST https://u:pw@x.io/h?token=abc failed.')).toBe(
      'POST https://u:***@x.io/h?token=*** failed.',
    );
    expect(redactText('sent Authorization: Bearer abc.def.ghi')).toBe(
      `sent Authorization: Bearer ${censor}`,
    );
    expect(redactText('token was intake-token-123', ['intake-token-123'])).toBe(
      `token was ${censor}`,
    );
  });

  it('blanks secret keys and the configured headers, keeps counts and idempotency keys', () => {
    const shown = redactValue(
      {
        endpoint: { id: 'ep', url: 'https://u:pw@x.io/?key=k', secret: 'whsec_abc' },
        headers: { Cookie: 'sid=1', 'X-Api-Key': 'k', 'X-Partner': 'p', Accept: 'json' },
        tokens: 430,
        idempotencyKey: 'ep/evt',
      },
      { headers: ['authorization', 'cookie', 'x-api-key', 'x-partner'] },
    );
    expect(shown).toEqual({
      endpoint: { id: 'ep', url: 'https://u:***@x.io/?key=***', secret: censor },
      headers: { Cookie: censor, 'X-Api-Key': censor, 'X-Partner': censor, Accept: 'json' },
      tokens: 430,
      idempotencyKey: 'ep/evt',
    });
  });

  it('leaves the stored value as it was (it is delivered and replayed as is)', () => {
    const stored = { endpoint: { url: 'https://u:pw@x.io/', secret: 's' } };
    redactValue(stored);
    expect(stored).toEqual({ endpoint: { url: 'https://u:pw@x.io/', secret: 's' } });
  });

  it('survives cycles and very deep values', () => {
    const a: Record<string, unknown> = { name: 'a' };
    a.self = a;
    expect(redactValue(a)).toEqual({ name: 'a', self: '[…]' });
    let deep: unknown = 'leaf';
    for (let i = 0; i < 10_000; i++) deep = [deep];
    expect(() => redactValue(deep)).not.toThrow();
  });

  it('blanks the arguments of a refused AUTH in a Redis client error', () => {
    const shown = JSON.stringify(redactError(wrongPassError('hunter2-redis')));
    expect(shown).not.toContain('hunter2-redis');
    expect(shown).toContain('WRONGPASS');
  });

  it('maskUrl goes through the same module', () => {
    expect(maskUrl('redis://user:pw@h:1')).toBe('redis://user:***@h:1');
    expect(maskUrl('::nope')).toBe('[unparseable url]');
  });
});

describe('regressions', () => {
  it('the Redis password inside an ioredis AUTH error reached the log', () => {
    const { lines, logger } = capture();
    logger.error({ err: wrongPassError('redis-pass-43-times') }, 'redis error');
    logger.error({ error: wrongPassError('redis-pass-43-times') }, 'redis error');
    logger.warn({ queue: 'q', err: wrongPassError('redis-pass-43-times') }, 'worker error');
    expect(lines).toHaveLength(3);
    expect(lines.join('')).not.toContain('redis-pass-43-times');
    expect(lines.join('')).toContain('WRONGPASS');
  });

  it('URL credentials, cookies and API keys in a logged job reached the log', () => {
    const { lines, logger } = capture();
    logger.info(
      {
        job: {
          endpoint: { url: 'https://u:url-pass@x.io/h?token=qs-token' },
          headers: { cookie: 'sid=cookie-value', 'x-api-key': 'api-key-value' },
        },
        url: 'https://u:top-pass@x.io/',
      },
      'delivering',
    );
    const log = lines.join('');
    for (const leaked of ['url-pass', 'qs-token', 'cookie-value', 'api-key-value', 'top-pass'])
      expect(log).not.toContain(leaked);
    expect(log).toContain('x.io');
  });
});
