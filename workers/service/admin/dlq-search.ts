import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { deadJobView, type AdminPluginOptions } from './context.js';
import { queueParams } from './schemas.js';

/** Dead records a search reads at most, newest first (a search is a scan: bounded). */
const searchScan = 5_000;
const searchChunk = 500;

const searchQuery = z.strictObject({
  q: z.string().trim().min(1).max(200),
  limit: z.coerce.number().int().min(1).max(200).default(20),
  offset: z.coerce.number().int().min(0).max(searchScan).default(0),
});

/**
 * `GET /queues/:queue/dlq-search`: dead jobs whose error messages, history or
 * payload contain a text, paged, over the newest {@link searchScan}. Matched
 * on the redacted view, so a search never finds what the view hides. Reads only.
 */
export const dlqSearchRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (api, { ctx }) => {
  api.get(
    '/queues/:queue/dlq-search',
    {
      schema: {
        summary: `Dead jobs whose error messages or payload contain a text (the newest ${searchScan} searched)`,
        params: queueParams,
        querystring: searchQuery,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const { limit, offset } = request.query;
      const needle = request.query.q.toLowerCase();
      const matches: unknown[] = [];
      let scanned = 0;
      let complete = false;
      while (scanned < searchScan) {
        const records = await q.dlq.list({}, { offset: scanned, limit: searchChunk });
        scanned += records.length;
        // Matched on the redacted view: a search never reveals what the view hides.
        for (const view of records.map((r) => ctx.redact(deadJobView(r)))) {
          if (searchable(view).includes(needle)) matches.push(view);
        }
        if (records.length < searchChunk) {
          complete = true;
          break;
        }
      }
      return {
        queue: q.name,
        q: request.query.q,
        total: matches.length,
        scanned,
        complete,
        offset,
        limit,
        items: matches.slice(offset, offset + limit),
      };
    },
  );
};

/** The text a search looks in: the error messages, the reason and the payload. */
function searchable(view: unknown): string {
  const v = view as { message?: unknown; data?: unknown; history?: unknown };
  return JSON.stringify([v.message, v.data, v.history]).toLowerCase();
}
