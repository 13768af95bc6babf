/**
 * One HTTP exchange of a delivery: the POST, its deadline and abort, and the
 * start of the answer's body read within its own short deadline.
 */
import {
  request as httpRequest,
  type ClientRequest,
  type IncomingHttpHeaders,
  type RequestOptions,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import { PermanentError } from '../../src/errors/permanent-error.js';
import type { Clock } from '../../src/util/system.js';
import { WebhookDeliveryError } from './delivery-error.js';

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface SendInput {
  url: URL;
  target: string;
  options: RequestOptions;
  body: string;
  timeoutMs: number;
  maxBodyBytes: number;
  /** How long the body may take once the status has arrived. */
  bodyTimeoutMs: number;
  signal: AbortSignal | undefined;
  startedAt: number;
  clock: Clock;
}

/** Sends the request; resolves with any HTTP answer, rejects when none came. */
export function send(input: SendInput): Promise<RawResponse> {
  const { url, target, timeoutMs, maxBodyBytes, signal } = input;
  const elapsed = (): number => input.clock.now() - input.startedAt;
  return new Promise<RawResponse>((resolve, reject) => {
    let req: ClientRequest | undefined;
    let settled = false;
    const settle = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      outcome();
    };
    const fail = (err: unknown): void =>
      settle(() => {
        req?.destroy();
        reject(err);
      });
    const timer = setTimeout(() => {
      fail(
        new WebhookDeliveryError(`POST ${target} timed out after ${timeoutMs} ms`, {
          code: 'ETIMEDOUT',
          latencyMs: elapsed(),
        }),
      );
    }, timeoutMs);
    timer.unref();
    const onAbort = (): void => {
      fail(
        new WebhookDeliveryError(`POST ${target} aborted: the worker is shutting down`, {
          code: 'ECONNABORTED',
          latencyMs: elapsed(),
          cause: signal?.reason,
        }),
      );
    };
    if (signal?.aborted) {
      onAbort();
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });

    try {
      req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(input.options);
    } catch (err) {
      // An option Node refuses (a header value, say) will be refused on every attempt.
      fail(
        new PermanentError(`cannot build the request to ${target}: ${(err as Error).message}`, {
          cause: err,
        }),
      );
      return;
    }
    req.on('error', fail);
    req.on('response', (res) => {
      // The status line and headers decide the attempt: from here on nothing
      // turns it into a failure. The body is read for the history only, up to
      // its byte limit and within its own short deadline.
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      const chunks: Buffer[] = [];
      let size = 0;
      const done = (): void => {
        clearTimeout(bodyTimer);
        settle(() =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).subarray(0, maxBodyBytes),
          }),
        );
        res.destroy();
      };
      const bodyTimer = setTimeout(done, input.bodyTimeoutMs);
      bodyTimer.unref();
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        // Enough for the history; the rest is not worth the wait or the memory.
        if (size >= maxBodyBytes) done();
      });
      res.on('end', done);
      res.on('error', done);
      res.on('close', done);
    });
    req.end(input.body);
  });
}
