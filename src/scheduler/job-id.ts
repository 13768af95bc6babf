/**
 * Job ids made from user input (idempotency keys) and how user input is
 * turned back into ids: the one module that owns the key → id namespace.
 *
 * BullMQ keeps a queue's state at `<prefix>:<queue>:<suffix>` and a job's hash
 * at `<prefix>:<queue>:<id>`, so an id equal to a suffix (`wait`, `meta`,
 * `id`…) would be written over BullMQ's own key. A key's id therefore starts
 * with {@link keyIdPrefix}: `%` begins no BullMQ key suffix (they are words;
 * `test/unit/job-id.test.ts` checks every one of the installed version), no
 * producer id ({@link newJobId}'s alphabet has no `%`), and no id of the
 * earlier encoding (which wrote `%` only as `%25`, `%3A` or a leading `%3<digit>`).
 * The key follows with `%` and `:` percent-encoded, so an id never holds `:`
 * (BullMQ refuses it; its per-job keys are `<id>:lock`, `<id>:logs`…).
 */

/** The first characters of every id made from a key: `%7E` is `~` percent-encoded. */
export const keyIdPrefix = '%7E';

/** Maps an idempotency key to its job id (injective; see the module's comment). */
export function jobIdForKey(key: string): string {
  if (key.length === 0) throw new RangeError('idempotencyKey must not be empty');
  return keyIdPrefix + key.replace(/%/g, '%25').replace(/:/g, '%3A');
}

/**
 * The key a job id was made from, or `undefined` for an id not made from a
 * key (a producer id, or an id of the earlier encoding): what users are shown.
 */
export function keyForJobId(id: string): string | undefined {
  if (!id.startsWith(keyIdPrefix) || id.length === keyIdPrefix.length) return undefined;
  const body = id.slice(keyIdPrefix.length);
  // Only ids this module makes: `%` appears as `%25` or `%3A`, never `:`.
  if (body.includes(':') || /%(?!25|3A)/.test(body)) return undefined;
  return body.replace(/%3A/g, ':').replace(/%25/g, '%');
}

/**
 * The id requeue gave a key before the id namespace (≤ 0.x): `%` and `:`
 * percent-encoded, an integer disguised. Read only, to find jobs stored
 * before the upgrade; never used to write.
 */
export function legacyJobIdForKey(key: string): string {
  let id = key.replace(/%/g, '%25').replace(/:/g, '%3A');
  if (/^\d+$/.test(id)) id = `%3${id[0]}${id.slice(1)}`;
  return id;
}

/**
 * Whether `id` has the shape of an id requeue generates ({@link newJobId}:
 * 18 characters with a capital or a digit among them; or an earlier UUID).
 * BullMQ's key names are lower-case words, so none has this shape (checked
 * against the installed version by `test/unit/job-id.test.ts`).
 */
export function isProducerId(id: string): boolean {
  return (
    (/^[A-Z_a-z][-0-9A-Z_a-z]{17}$/.test(id) && /[0-9A-Z]/.test(id)) ||
    /^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$/.test(id)
  );
}

/**
 * The ids a user's `input` (a key, or an id as requeue printed it) may name,
 * as `dlq show`, `--id` and the admin API take it: its key's id first, then
 * the input itself as an id (never one with `:`, which no job id holds, so
 * never a key below a job or a BullMQ key like `repeat:…`), then its key's
 * id of the earlier encoding. A reader must take an id only where it finds a
 * job there (see `readLiveJob`): the input may name one of BullMQ's keys.
 */
export function lookupIds(input: string): string[] {
  if (input.length === 0) return [];
  const ids = [jobIdForKey(input)];
  if (!input.includes(':')) ids.push(input);
  ids.push(legacyJobIdForKey(input));
  return [...new Set(ids)];
}

/** Whether a dead job comes back under its own id: a key's id or a producer's. */
export function keepsItsId(id: string): boolean {
  return keyForJobId(id) !== undefined || isProducerId(id);
}

/**
 * The id a dead job comes back under when replayed: its own when it is a
 * key's or a producer's ({@link keepsItsId}); else (an id of the earlier
 * encoding, or one BullMQ was given directly, which may name one of its keys)
 * its key's id when it has a key, so lookups by the key still find it, and
 * `fresh` when it has none.
 */
export function replayIdFor(id: string, key: string | undefined, fresh: string): string {
  if (keepsItsId(id)) return id;
  return key !== undefined && key.length > 0 ? jobIdForKey(key) : fresh;
}
