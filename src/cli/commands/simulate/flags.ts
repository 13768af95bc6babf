import type { Command } from 'commander';
import { z } from 'zod';
import { ConfigError } from '../../../errors/config-error.js';
import { CliUsageError, parseJsonFlag } from '../../cli-error.js';
import { flagOf } from '../plan.js';

/**
 * The flags of `requeue simulate`: each scenario's are one zod object of
 * string → value fields built here, whose help and default are the field's
 * metadata. Commander's options, each flag's help and the refusal of a flag
 * another scenario owns are all derived from those schemas; parsing a
 * scenario's flags is `schema.safeParse(flags)`, whose first issue becomes
 * one line naming the flag.
 */

/** What a flag field says about itself: its help, its value's name, its default. */
export interface FlagMeta {
  help: string;
  arg: string;
  fallback?: number | string | undefined;
}

const metas = new WeakMap<z.ZodType, FlagMeta>();

function withMeta<T extends z.ZodType>(schema: T, meta: FlagMeta): T {
  metas.set(schema, meta);
  return schema;
}

/** Bounds of a number flag: `min`/`max` inclusive, `above` exclusive. */
export interface NumberRule {
  integer?: boolean;
  min?: number;
  above?: number;
  max?: number;
}

/** Why `raw` is not a number within `rule`, in the words every number flag uses; undefined if it is. */
function numberProblem(raw: string, n: number, rule: NumberRule): string | undefined {
  if (raw.trim() === '' || !Number.isFinite(n)) return `expected a number, got "${raw}"`;
  if (rule.integer && !Number.isInteger(n)) return `expected an integer, got "${raw}"`;
  if (rule.min !== undefined && n < rule.min) return `must be ≥ ${rule.min}, got ${raw}`;
  if (rule.above !== undefined && !(n > rule.above)) return `must be > ${rule.above}, got ${raw}`;
  if (rule.max !== undefined && n > rule.max) return `must be ≤ ${rule.max}, got ${raw}`;
  return undefined;
}

/** A number flag with its default. */
export function numberFlag(help: string, fallback: number, rule: NumberRule = {}) {
  return withMeta(numberSchema(fallback, rule), {
    help,
    arg: rule.integer ? '<n>' : '<x>',
    fallback,
  });
}

/**
 * A number flag left undefined when not given, for fields another schema
 * validates (the backoff policy's); `shown` is the default its help shows.
 */
export function optionalNumberFlag(help: string, shown: number | undefined) {
  return withMeta(numberSchema(undefined, {}), { help, arg: '<x>', fallback: shown });
}

function numberSchema<F extends number | undefined>(fallback: F, rule: NumberRule) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): number | F => {
      if (raw === undefined) return fallback;
      const n = Number(raw);
      const problem = numberProblem(raw, n, rule);
      if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
      return n;
    });
}

/** One of `choices`, `fallback` when left out. */
export function choiceFlag<T extends string>(help: string, choices: readonly T[], fallback: T) {
  const schema = z
    .string()
    .optional()
    .transform((raw, ctx): T => {
      if (raw === undefined) return fallback;
      if (!(choices as readonly string[]).includes(raw))
        ctx.addIssue({
          code: 'custom',
          message: `expected one of ${choices.join(', ')}, got "${raw}"`,
        });
      return raw as T;
    });
  return withMeta(schema, { help: `${help} (${choices.join(' or ')})`, arg: '<name>', fallback });
}

/** A comma-separated list of `choices` (each once, in the order given), all of them when left out. */
export function listFlag<T extends string>(help: string, choices: readonly T[]) {
  const schema = z
    .string()
    .optional()
    .transform((raw, ctx): T[] => {
      if (raw === undefined) return [...choices];
      const chosen: T[] = [];
      for (const name of raw.split(',').map((n) => n.trim())) {
        if (!(choices as readonly string[]).includes(name)) {
          ctx.addIssue({
            code: 'custom',
            message: `unknown value "${name}" (one of ${choices.join(', ')})`,
          });
          return chosen;
        }
        if (!chosen.includes(name as T)) chosen.push(name as T);
      }
      return chosen;
    });
  return withMeta(schema, {
    help: `${help}, comma-separated, of ${choices.join(', ')}`,
    arg: '<list>',
    fallback: choices.join(','),
  });
}

/** A JSON flag, parsed by `parse` (a workers' options parser); undefined when left out. */
export function jsonFlag<T>(flag: string, help: string, parse: (input: unknown) => T) {
  const schema = z
    .string()
    .optional()
    .transform((raw): T | undefined => {
      if (raw === undefined) return undefined;
      try {
        return parse(parseJsonFlag(flag, raw));
      } catch (err) {
        if (err instanceof ConfigError) throw new CliUsageError(`${flag}: ${err.message}`);
        throw err;
      }
    });
  return withMeta(schema, { help, arg: '<json>' });
}

/** A yes/no switch. */
export function switchFlag(help: string) {
  return withMeta(z.boolean().optional().default(false), { help, arg: '' });
}

/** A scenario's flags: every field one of the flag kinds above. */
export type ScenarioSchema = z.ZodObject<Record<string, z.ZodType>>;

/** Parses a scenario's flags; the first problem is one line naming its flag. */
export function parseScenarioFlags<S extends ScenarioSchema>(
  schema: S,
  flags: Record<string, unknown>,
): z.output<S> {
  const picked: Record<string, unknown> = {};
  for (const field of Object.keys(schema.shape)) picked[field] = flags[field];
  const result = schema.safeParse(picked);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new CliUsageError(`${flagOf(String(issue.path[0]))}: ${issue.message}`);
}

/**
 * Registers every scenario's flags on `command`, once per flag: the help
 * names the scenarios that take it and their defaults.
 */
export function registerScenarioFlags(
  command: Command,
  schemas: Readonly<Record<string, ScenarioSchema>>,
): void {
  const byField = new Map<string, { meta: FlagMeta; scenarios: string[]; defaults: string[] }>();
  for (const [scenario, schema] of Object.entries(schemas)) {
    for (const [field, fieldSchema] of Object.entries(schema.shape)) {
      const meta = metas.get(fieldSchema);
      if (!meta) throw new Error(`simulate: ${scenario}.${field} has no flag metadata`);
      const entry = byField.get(field) ?? { meta, scenarios: [], defaults: [] };
      entry.scenarios.push(scenario);
      if (meta.fallback !== undefined) entry.defaults.push(`${meta.fallback} for ${scenario}`);
      byField.set(field, entry);
    }
  }
  const all = Object.keys(schemas).length;
  for (const [field, { meta, scenarios, defaults }] of byField) {
    const only = scenarios.length < all ? `${scenarios.join(', ')}: ` : '';
    const fallbacks = new Set(defaults.map((d) => d.replace(/ for .*$/, '')));
    const fallback =
      defaults.length === 0
        ? ''
        : fallbacks.size === 1
          ? ` (default ${[...fallbacks][0]})`
          : ` (default ${defaults.join(', ')})`;
    const name = meta.arg === '<x>' && field.endsWith('Ms') ? '<ms>' : meta.arg;
    const arg = name === '' ? '' : ` ${name}`;
    command.option(`${flagOf(field)}${arg}`, `${only}${meta.help}${fallback}`);
  }
}

/** The scenarios whose schema has `field`. */
export function scenariosWith(
  schemas: Readonly<Record<string, ScenarioSchema>>,
  field: string,
): string[] {
  return Object.entries(schemas)
    .filter(([, schema]) => field in schema.shape)
    .map(([name]) => name);
}
