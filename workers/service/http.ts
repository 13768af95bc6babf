import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { formatZodError } from '../../src/config/env.js';
import type { Logger } from '../../src/config/logger.js';
import { ConfigError } from '../../src/config/env.js';
import type { RequeueMetrics } from '../../src/scheduler/metrics.js';
import type { RequeueQueue } from '../../src/scheduler/queue.js';

/** The body of `POST /v1/jobs/:queue`. */
export const jobRequestSchema = z.strictObject({
  name: z.string().min(1).default('job'),
  data: z.unknown().refine((v) => v !== undefined, 'required'),
  idempotencyKey: z.string().min(1).optional(),
  policy: z.record(z.string(), z.unknown()).optional(),
  delayMs: z.number().int().min(0).optional(),
});

export interface IntakeOptions {
  /** Queues that accept jobs at `POST /v1/jobs/:queue`. */
  queues: Map<string, RequeueQueue>;
  /** Accepts `POST /v1/webhooks`: validates and enqueues one delivery. */
  webhooks?: { schema: z.ZodType; enqueue: (job: unknown) => Promise<{ id: string }> };
  /** Whether the service can do its job now (Redis answers, workers run). */
  ready: () => Promise<boolean>;
  metrics: RequeueMetrics;
  /** If set, POSTs need `Authorization: Bearer <token>`. */
  token?: string;
  maxBodyBytes: number;
  logger: Logger;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/**
 * The intake API: `POST /v1/jobs/:queue`, `POST /v1/webhooks`, `GET /healthz`,
 * `GET /readyz`, `GET /metrics`. Bodies are validated with zod; a bad one
 * gets a 400 that names the field.
 */
export function createIntakeServer(options: IntakeOptions): Server {
  return createServer((req, res) => {
    handle(req, res, options).catch((err: unknown) => {
      if (err instanceof HttpError) {
        send(res, err.status, { error: err.message, ...err.extra });
        return;
      }
      options.logger.error({ err, url: req.url }, 'intake request failed');
      send(res, 500, { error: 'internal error' });
    });
  });
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  options: IntakeOptions,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const path = url.pathname;
  if (req.method === 'GET' && path === '/healthz') return send(res, 200, { status: 'ok' });
  if (req.method === 'GET' && path === '/readyz') {
    const ready = await options.ready().catch(() => false);
    return send(res, ready ? 200 : 503, { status: ready ? 'ready' : 'not ready' });
  }
  if (req.method === 'GET' && path === '/metrics') {
    const { contentType, body } = await options.metrics.render();
    res.writeHead(200, { 'content-type': contentType });
    res.end(body);
    return;
  }
  const jobMatch = /^\/v1\/jobs\/([^/]+)$/.exec(path);
  if (path === '/v1/webhooks' || jobMatch) {
    if (req.method !== 'POST') throw new HttpError(405, 'method not allowed');
    authorize(req, options.token);
    const body = await readJson(req, options.maxBodyBytes);
    if (jobMatch) {
      const name = decodeURIComponent(jobMatch[1] ?? '');
      const queue = options.queues.get(name);
      if (!queue)
        throw new HttpError(404, `no queue "${name}" here`, { queues: [...options.queues.keys()] });
      const request = validate(jobRequestSchema, body);
      const job = await enqueue(() =>
        queue.add(request.name, request.data, {
          ...(request.idempotencyKey !== undefined
            ? { idempotencyKey: request.idempotencyKey }
            : {}),
          ...(request.policy !== undefined ? { policy: request.policy } : {}),
          ...(request.delayMs !== undefined ? { delayMs: request.delayMs } : {}),
        }),
      );
      return send(res, 202, { queue: name, id: job.id });
    }
    if (!options.webhooks) throw new HttpError(404, 'webhook delivery is not enabled');
    const delivery = validate(options.webhooks.schema, body);
    const job = await options.webhooks.enqueue(delivery);
    return send(res, 202, { id: job.id });
  }
  throw new HttpError(404, 'not found');
}

function authorize(req: IncomingMessage, token: string | undefined): void {
  if (token === undefined) return;
  const given = Buffer.from(req.headers.authorization ?? '');
  const expected = Buffer.from(`Bearer ${token}`);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new HttpError(401, 'missing or wrong bearer token');
  }
}

async function readJson(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/(.+\+)?json\b/i.test(type)) throw new HttpError(415, 'send application/json');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw new HttpError(413, `body larger than ${maxBytes} bytes`);
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw new HttpError(400, `body is not valid JSON: ${(err as Error).message}`);
  }
}

function validate<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  throw new HttpError(400, formatZodError(result.error, 'body'), {
    issues: result.error.issues.map((i) => ({
      path: i.path.map(String).join('.'),
      message: i.message,
    })),
  });
}

/** A producer-side validation error (payload schema, policy) is the client's fault: 400. */
async function enqueue<T>(add: () => Promise<T>): Promise<T> {
  try {
    return await add();
  } catch (err) {
    if (err instanceof ConfigError) throw new HttpError(400, err.message);
    throw err;
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}
