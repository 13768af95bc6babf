import { createHash, timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyReply } from 'fastify';
import {
  hasZodFastifySchemaValidationErrors,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ConfigError } from '../../src/config/env.js';
import type { Logger } from '../../src/config/logger.js';
import { jsonDeeperThan } from '../../src/policy/json-depth.js';
import { limits } from '../../src/policy/limits.js';
import type { RequeueMetrics } from '../../src/scheduler/metrics.js';
import type { RequeueQueue } from '../../src/scheduler/queue.js';
import { redactText } from '../../src/util/redact.js';
import { loopbackOnly, siteGuard, type SiteRules } from './admin/site.js';

/** The body of `POST /v1/jobs/:queue`. */
export const jobRequestSchema = z.strictObject({
  name: z.string().min(1).max(limits.jobName).default('job'),
  data: z.unknown().refine((v) => v !== undefined, 'required'),
  idempotencyKey: z.string().min(1).max(limits.idempotencyKey).optional(),
  policy: z.record(z.string(), z.unknown()).optional(),
  delayMs: z.number().int().min(0).max(limits.delayMs).optional(),
});

export interface IntakeOptions {
  /** Queues that accept jobs at `POST /v1/jobs/:queue`. */
  queues: Map<string, RequeueQueue>;
  /** Accepts `POST /v1/webhooks`: validates and enqueues one delivery. */
  webhooks?: { schema: z.ZodType; enqueue: (job: unknown) => Promise<{ id: string }> };
  /** Accepts `POST /v1/messages`: one message fanned out to the endpoints subscribed to its type. */
  messages?: { schema: z.ZodType; send: (message: unknown) => Promise<object> };
  /** Whether the service can do its job now (Redis answers, workers run). */
  ready: () => Promise<boolean>;
  metrics: RequeueMetrics;
  /** If set, POSTs need `Authorization: Bearer <token>` (the scheme in any case). */
  token?: string;
  /** Largest request body; a larger one gets a 413. */
  maxBodyBytes: number;
  /** Deepest nesting of a JSON body; a deeper one gets a 400. @defaultValue `64` */
  maxBodyDepth?: number;
  /**
   * Whom the server answers at all (`Host`, cross-site requests), on every
   * route. @defaultValue {@link loopbackOnly}
   */
  site?: SiteRules;
  logger: Logger;
}

/** JSON media types: `application/json`, `application/*+json`, any parameters. */
const jsonMediaType = /^application\/(?:[\w.-]+\+)?json\s*(?:;.*)?$/i;

// Moved to src/policy so the CLI's JSON flags share it; kept exported from here.
export { jsonDeeperThan };

/** An error whose status and message go to the client as they are. */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** `Bearer <token>`, the scheme in any case (RFC 9110 §11.1), compared in constant time. */
export function bearerMatches(header: string | undefined, expected: Buffer): boolean {
  const match = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
  if (!match) return false;
  const given = createHash('sha256')
    .update(match[1] ?? '')
    .digest();
  return timingSafeEqual(given, expected);
}

/**
 * A zod issue list, as a Fastify validation error carries it, in the API's
 * shape; each field named from where it came (`body`, `querystring`, `params`).
 */
function describeValidation(
  validation: { instancePath: string; message?: string; keyword: string; params: unknown }[],
  context = 'body',
): { error: string; issues: { path: string; message: string }[] } {
  const issues = validation.map((v) => {
    const path = v.instancePath.split('/').filter(Boolean).join('.');
    const keys = (v.params as { keys?: string[] }).keys;
    const message =
      v.keyword === 'unrecognized_keys' && keys
        ? `unknown key${keys.length > 1 ? 's' : ''} ${keys.map((k) => `"${k}"`).join(', ')}`
        : (v.message ?? 'invalid');
    return { path, message };
  });
  return {
    error: issues
      .map((i) => `${[context, i.path].filter(Boolean).join('.')}: ${i.message}`)
      .join('; '),
    issues,
  };
}

/**
 * The intake API on Fastify: `POST /v1/jobs/:queue`, `POST /v1/webhooks`,
 * `GET /healthz`, `GET /readyz`, `GET /metrics`. Bodies are validated by
 * their zod schemas (fastify-type-provider-zod); a bad one gets a 400 that
 * names the field. A client's mistake — a malformed path, a body too large,
 * too deep or not JSON, a wrong content type, a wrong token — gets a 4xx
 * that says what is wrong, never a 500.
 */
export async function createIntakeServer(options: IntakeOptions) {
  const maxDepth = options.maxBodyDepth ?? limits.bodyDepth;
  const log = options.logger.child({ component: 'intake' });
  const app = Fastify({
    // No logger of Fastify's own: a child logger per request would cost more than the
    // request. Errors are logged below, through the service's logger.
    logger: false,
    bodyLimit: options.maxBodyBytes,
    // Queue names are up to 200 characters, percent-encoded up to three times that.
    routerOptions: { maxParamLength: limits.queueName * 3 },
    requestTimeout: 30_000,
    return503OnClosing: true,
    // The router's own refusals (a malformed percent-encoding, a path too long) in the API's shape.
    frameworkErrors: (error, _request, reply) => {
      const raw = reply as unknown as FastifyReply;
      void raw
        .code(error.statusCode && error.statusCode < 500 ? error.statusCode : 400)
        .send({ error: `bad request: ${error.message}` });
    },
  }).withTypeProvider<ZodTypeProvider>();
  // First, on the root: every route (and the 404 handler) is behind it, whoever adds it later.
  app.addHook('onRequest', siteGuard(options.site ?? loopbackOnly));
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  // JSON only: Fastify's own text/plain parser would hand a string to the body schemas.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(jsonMediaType, { parseAs: 'string' }, (_request, body, done) => {
    const text = body as string;
    if (jsonDeeperThan(text, maxDepth)) {
      done(new HttpError(400, `body nests deeper than ${maxDepth} levels`), undefined);
      return;
    }
    try {
      done(null, text === '' ? undefined : JSON.parse(text));
    } catch (err) {
      done(new HttpError(400, `body is not valid JSON: ${(err as Error).message}`), undefined);
    }
  });

  app.setErrorHandler((error: FastifyError | HttpError, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(error)) {
      return reply
        .code(400)
        .send(describeValidation(error.validation, error.validationContext ?? 'body'));
    }
    if (error instanceof HttpError) {
      return reply.code(error.statusCode).send({ error: error.message, ...error.extra });
    }
    if (error instanceof ConfigError) return reply.code(400).send({ error: error.message });
    const status = error.statusCode ?? 500;
    if (status < 500)
      return reply.code(status).send({ error: clientMessage(error, options.maxBodyBytes) });
    log.error({ err: error, url: redactText(request.url) }, 'intake request failed');
    return reply.code(500).send({ error: 'internal error' });
  });
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ error: 'not found' }));

  const expected =
    options.token === undefined ? undefined : createHash('sha256').update(options.token).digest();
  const authorize = async (
    request: { headers: { authorization?: string } },
    reply: FastifyReply,
  ) => {
    if (expected === undefined || bearerMatches(request.headers.authorization, expected)) return;
    await reply
      .code(401)
      .header('www-authenticate', 'Bearer')
      .send({ error: 'missing or wrong bearer token' });
  };
  const notAllowed = async (_request: unknown, reply: FastifyReply) =>
    reply.code(405).header('allow', 'POST').send({ error: 'method not allowed' });

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const ready = await options.ready().catch(() => false);
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready' });
  });
  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await options.metrics.render();
    return reply.type(contentType).send(body);
  });

  const otherMethods = ['GET', 'PUT', 'PATCH', 'DELETE'] as const;
  app.route({ method: [...otherMethods], url: '/v1/jobs/:queue', handler: notAllowed });
  app.route({ method: [...otherMethods], url: '/v1/webhooks', handler: notAllowed });
  app.route({ method: [...otherMethods], url: '/v1/messages', handler: notAllowed });

  app.post(
    '/v1/jobs/:queue',
    {
      // Before the body is read: a caller without the token never gets it parsed.
      ...(expected !== undefined ? { onRequest: authorize } : {}),
      schema: { params: z.object({ queue: z.string() }), body: jobRequestSchema },
    },
    async (request, reply) => {
      const name = request.params.queue;
      const queue = options.queues.get(name);
      if (!queue)
        throw new HttpError(404, `no queue "${name}" here`, { queues: [...options.queues.keys()] });
      const body = request.body;
      const job = await queue.add(body.name, body.data, {
        ...(body.idempotencyKey !== undefined ? { idempotencyKey: body.idempotencyKey } : {}),
        ...(body.policy !== undefined ? { policy: body.policy } : {}),
        ...(body.delayMs !== undefined ? { delayMs: body.delayMs } : {}),
      });
      return reply
        .code(202)
        .send({ queue: name, id: job.id, ...(job.key !== undefined && { key: job.key }) });
    },
  );

  const webhooks = options.webhooks;
  app.post(
    '/v1/webhooks',
    {
      ...(expected !== undefined ? { onRequest: authorize } : {}),
      ...(webhooks ? { schema: { body: webhooks.schema } } : {}),
    },
    async (request, reply) => {
      if (!webhooks) throw new HttpError(404, 'webhook delivery is not enabled');
      const job = await webhooks.enqueue(request.body);
      return reply.code(202).send({ id: job.id });
    },
  );

  const messages = options.messages;
  app.post(
    '/v1/messages',
    {
      ...(expected !== undefined ? { onRequest: authorize } : {}),
      ...(messages ? { schema: { body: messages.schema } } : {}),
    },
    async (request, reply) => {
      if (!messages) throw new HttpError(404, 'webhook delivery is not enabled');
      return reply.code(202).send(await messages.send(request.body));
    },
  );

  return app;
}

/** A framework error's message for the client: what was wrong, without Fastify's codes. */
function clientMessage(error: FastifyError, maxBodyBytes: number): string {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return `body larger than ${maxBodyBytes} bytes`;
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return `send application/json (${error.message})`;
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return 'body is empty: send a JSON object';
    default:
      return error.message;
  }
}

/** The intake server, as {@link createIntakeServer} makes it. */
export type IntakeServer = Awaited<ReturnType<typeof createIntakeServer>>;
