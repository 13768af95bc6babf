import { libraryLogger } from '../../src/config/logger.js';
import type { RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { redactUrl } from '../../src/util/redact.js';
import { brokerJobDataSchema, type BrokerJobData } from '../consumer/broker-message.js';
import {
  createBrokerRetryWorker,
  type BrokerRetryWorkerOptions,
} from '../consumer/retry-worker.js';
import { defaultAmqpRetryQueue } from './consumer-config.js';
import { loadAmqplib } from './load.js';

/** Options of {@link createAmqpRetryWorker}. */
export interface AmqpRetryWorkerOptions<B = unknown> extends BrokerRetryWorkerOptions<B> {
  /** The AMQP queue whose messages this worker retries. */
  queue: string;
  /** The retry queue. @defaultValue `<queue>.retry`, as the consumer's */
  retryQueue?: string;
  /**
   * Also publish each dead message (body, headers, `x-requeue-dead-reason`)
   * to this exchange, with publisher confirms, after requeue's DLQ has it.
   */
  deadLetterExchange?: { url: string; exchange: string; routingKey?: string };
}

/**
 * A requeue worker on an AMQP queue's retry queue: the first run of each job
 * replays the AMQP attempt's error (requeue records it as attempt 1), later
 * runs call the handler. A dead message's DLQ record keeps the body, the
 * headers and the properties; with `deadLetterExchange` it is also
 * published there once the record is stored (best effort: a failed publish
 * is logged, the DLQ record stays).
 */
export function createAmqpRetryWorker<B = unknown>(
  options: AmqpRetryWorkerOptions<B>,
): RequeueWorker<BrokerJobData, void> {
  const { queue, retryQueue, deadLetterExchange, ...rest } = options;
  const worker = createBrokerRetryWorker<B>(retryQueue ?? defaultAmqpRetryQueue(queue), rest);
  if (deadLetterExchange) forwardDeadLetters(worker, deadLetterExchange, rest.logger);
  return worker;
}

function forwardDeadLetters(
  worker: RequeueWorker<BrokerJobData, void>,
  target: { url: string; exchange: string; routingKey?: string },
  loggerOption: BrokerRetryWorkerOptions['logger'],
): void {
  const logger = libraryLogger(loggerOption).child({ deadLetterExchange: target.exchange });
  worker.on('job:dead-lettered', ({ record }) => {
    const parsed = brokerJobDataSchema.safeParse(record.data);
    if (!parsed.success) return;
    void publishDead(target, parsed.data, record.reason).catch((err: unknown) =>
      logger.error(
        { err: redactUrl(String((err as Error)?.message ?? err)), jobId: record.id },
        'could not publish the dead message to the dead-letter exchange; it stays in the DLQ',
      ),
    );
  });
}

/** One connection per dead message (they are rare): publish, wait for the broker's confirm, close. */
async function publishDead(
  target: { url: string; exchange: string; routingKey?: string },
  data: BrokerJobData,
  reason: string,
): Promise<void> {
  const amqp = await loadAmqplib();
  const model = await amqp.connect(target.url, { timeout: 5000 });
  model.on('error', () => undefined);
  try {
    const channel = await model.createConfirmChannel();
    channel.publish(
      target.exchange,
      target.routingKey ?? data.source,
      Buffer.from(data.body, 'base64'),
      {
        persistent: true,
        headers: { ...data.headers, 'x-requeue-dead-reason': reason },
        ...(data.messageId !== undefined && { messageId: data.messageId }),
      },
    );
    await channel.waitForConfirms();
  } finally {
    await model.close().catch(() => undefined);
  }
}
