/**
 * One side of `npm run bench:intake`, as a process of its own (built code):
 * `requeue` runs the requeue service (its Fastify intake, a handler queue
 * consuming in the same process); `bullmq` runs a minimal Fastify route that
 * calls BullMQ's `Queue.add` directly, with a BullMQ Worker consuming in the
 * same process. A concurrency of 0 runs no consumer (the intake alone).
 * Prints the base URL on stdout, answers `'cpu'` over IPC with its CPU time,
 * closes on SIGTERM.
 *
 *   node bench/intake/server.mjs <requeue|bullmq> <redisUrl> <queue> <concurrency>
 */
import Fastify from 'fastify';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { createLogger } from '../../dist/src/config/logger.js';
import { RequeueMetrics } from '../../dist/src/scheduler/metrics.js';
import { createQueue } from '../../dist/src/scheduler/queue.js';
import { createIntakeServer } from '../../dist/workers/service/http.js';
import { parseServiceConfig } from '../../dist/workers/service/config.js';
import { startService } from '../../dist/workers/service/service.js';

const [side, redisUrl, queueName, concurrencyText] = process.argv.slice(2);
const concurrency = Number(concurrencyText);
let close;

if (side === 'requeue' && concurrency === 0) {
  // The intake alone: the service's HTTP server on a requeue queue, nothing consuming.
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const queue = createQueue(queueName, { connection });
  const app = await createIntakeServer({
    queues: new Map([[queueName, queue]]),
    ready: async () => true,
    metrics: new RequeueMetrics(),
    maxBodyBytes: 1_048_576,
    logger: createLogger({ level: 'silent' }),
  });
  process.stdout.write(`${await app.listen({ port: 0, host: '127.0.0.1' })}\n`);
  close = async () => {
    await app.close();
    await queue.close();
    connection.disconnect();
  };
} else if (side === 'requeue') {
  const config = parseServiceConfig({
    port: 0,
    redisUrl,
    webhooks: { enabled: false },
    queues: [{ name: queueName, handler: 'bench/intake/noop-handler.mjs', concurrency }],
  });
  const service = await startService(config, createLogger({ level: 'silent' }));
  process.stdout.write(`${service.url}\n`);
  close = () => service.stop();
} else if (side === 'bullmq') {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue(queueName, { connection });
  const worker =
    concurrency > 0
      ? new Worker(queueName, async () => 'ok', { connection, concurrency })
      : undefined;
  const app = Fastify();
  app.post('/v1/jobs/:queue', async (request, reply) => {
    const body = request.body;
    const job = await queue.add(body.name ?? 'job', body.data);
    return reply.code(202).send({ queue: request.params.queue, id: job.id });
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  process.stdout.write(`${url}\n`);
  close = async () => {
    await app.close();
    await worker?.close();
    await queue.close();
    connection.disconnect();
  };
} else {
  process.stderr.write(`unknown side ${side}\n`);
  process.exit(2);
}

// The parent asks for this process's CPU time around a measured run (IPC).
process.on('message', (message) => {
  if (message === 'cpu') process.send?.(process.cpuUsage());
});

process.once('SIGTERM', () => {
  close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
