import { describe, expect, it } from 'vitest';
import type { BrokerJobData } from '../../workers/consumer/broker-message.js';
import { readRepublished, republishHeaders } from '../../workers/consumer/republish.js';

const data: BrokerJobData = {
  broker: 'amqp',
  source: 'orders',
  id: 'id:o1',
  body: '',
  headers: { tenant: 'a', 'x-requeue-attempt': '9' },
  properties: {},
  brokerAttempt: {
    consumer: 'c',
    deliveries: 1,
    failedAt: 0,
    error: { class: 'Error', message: 'x' },
  },
};

describe('republish headers', () => {
  it('a due retry carries its attempt, the first id and the replays; reading them back gives a key of its own', () => {
    const { headers } = republishHeaders({ data, attempt: 2, replays: 0 });
    expect(headers).toEqual({
      tenant: 'a',
      'x-requeue-attempt': '2',
      'x-requeue-retry-of': 'id:o1',
      'x-requeue-replays': '0',
    });
    const read = readRepublished(headers);
    expect(read).toEqual({ attempt: 2, retryOf: 'id:o1', id: 'id:id:o1#0.2' });
    expect(read!.id).not.toBe(data.id);
  });

  it('a chain counts on from its prior attempts; a DLQ replay starts again at 1', () => {
    const chained = {
      ...data,
      id: 'id:id:o1#0.2',
      retryOf: 'id:o1',
      brokerAttempt: { ...data.brokerAttempt, priorAttempts: 1 },
    };
    expect(republishHeaders({ data: chained, attempt: 2, replays: 0 })).toMatchObject({
      attempt: 3,
      retryOf: 'id:o1',
    });
    expect(republishHeaders({ data: chained, attempt: 1, replays: 1 })).toMatchObject({
      attempt: 1,
      replays: 1,
    });
  });

  it('malformed or missing headers are not a republished retry (hostile input stays a plain message)', () => {
    expect(readRepublished({})).toBeUndefined();
    expect(readRepublished({ 'x-requeue-attempt': '2' })).toBeUndefined();
    expect(readRepublished({ 'x-requeue-retry-of': 'id:o1' })).toBeUndefined();
    expect(
      readRepublished({ 'x-requeue-retry-of': 'id:o1', 'x-requeue-attempt': '-1' }),
    ).toBeUndefined();
    expect(
      readRepublished({ 'x-requeue-retry-of': 'id:o1', 'x-requeue-attempt': '0' }),
    ).toBeUndefined();
    expect(
      readRepublished({ 'x-requeue-retry-of': 'id:o1', 'x-requeue-attempt': '1e9' }),
    ).toBeUndefined();
    expect(
      readRepublished({ 'x-requeue-retry-of': 'x'.repeat(600), 'x-requeue-attempt': '2' }),
    ).toBeUndefined();
  });
});
