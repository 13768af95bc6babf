import { libraryLogger } from '../../src/config/logger.js';
import type { RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { redactUrl } from '../../src/util/redact.js';
import { brokerJobDataSchema, type BrokerJobData } from '../consumer/broker-message.js';
import {
  createBrokerRetryWorker,
  type BrokerRetryWorkerOptions,
} from '../consumer/retry-worker.js';
import { republishHeaders } from '../consumer/republish.js';
import { defaultAmqpRetryQueue } from './consumer-config.js';
import { loadAmqplib } from './load.js';
import { stringProperties } from './read-message.js';

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
  /**
   * Publish each due retry (attempt 2, 3, …, and every run of a DLQ replay)
   * back to the broker instead of running the handler here: to `exchange`
   * (`''`: the default exchange, straight to a queue) with `routingKey`
   * (default: the source queue), on a confirm channel; the retry job
   * completes once the broker confirmed the publish, and the consumer runs
   * the message as a fresh delivery (`x-requeue-attempt` says which
   * attempt). At least once: a crash between the confirm and the job's
   * completion publishes the same attempt again. `url`: the broker.
   * @defaultValue `AMQP_URL`, else `amqp://127.0.0.1:5672`
   */
  republish?: { url?: string; exchange: string; routingKey?: string };
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
  const { queue, retryQueue, deadLetterExchange, republish, ...rest } = options;
  const worker = createBrokerRetryWorker<B>(
    retryQueue ?? defaultAmqpRetryQueue(queue),
    rest,
    republish &&
      ((job) =>
        publishConfirmed(
          {
            url: republish.url ?? process.env.AMQP_URL ?? 'amqp://127.0.0.1:5672',
            exchange: republish.exchange,
            routingKey: republish.routingKey ?? job.data.source,
          },
          job.data,
          republishHeaders(job).headers,
        )),
  );
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

function publishDead(
  target: { url: string; exchange: string; routingKey?: string },
  data: BrokerJobData,
  reason: string,
): Promise<void> {
  return publishConfirmed({ ...target, routingKey: target.routingKey ?? data.source }, data, {
    ...data.headers,
    'x-requeue-dead-reason': reason,
  });
}

/**
 * One connection per message (dead messages and republished retries): publish
 * the stored body with `headers` and the stored properties, wait for the
 * broker's confirm, close. Throws when the broker refuses or is unreachable.
 */
async function publishConfirmed(
  target: { url: string; exchange: string; routingKey: string },
  data: BrokerJobData,
  headers: Record<string, string>,
  mandatory = true,
): Promise<void> {
  const amqp = await loadAmqplib();
  const model = await amqp.connect(target.url, { timeout: 5000 });
  model.on('error', () => undefined);
  try {
    const channel = await model.createConfirmChannel();
    channel.on('error', () => undefined);
    // Mandatory (republish): a message no queue takes comes back (basic.return) before its confirm.
    let returned = false;
    channel.on('return', () => (returned = true));
    await new Promise<void>((resolve, reject) => {
      channel.publish(
        target.exchange,
        target.routingKey,
        Buffer.from(data.body, 'base64'),
        { persistent: true, mandatory, headers, ...storedProperties(data) },
        (err: unknown) => {
          if (err)
            reject(new Error(`the broker did not confirm the publish to '${target.exchange}'`));
          else if (returned)
            reject(
              new Error(
                `no queue took the publish to '${target.exchange}' with routing key '${target.routingKey}'`,
              ),
            );
          else resolve();
        },
      );
    });
  } finally {
    await model.close().catch(() => undefined);
  }
}

/** The AMQP properties a hand-off job kept, to publish again. */
function storedProperties(data: BrokerJobData): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  if (data.messageId !== undefined) out.messageId = data.messageId;
  for (const name of stringProperties) {
    const value = data.properties[name];
    if (typeof value === 'string') out[name] = value;
  }
  if (typeof data.properties.timestamp === 'number') out.timestamp = data.properties.timestamp;
  return out;
}
