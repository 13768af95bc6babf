import { X509Certificate } from 'node:crypto';
import { z } from 'zod';

/** The longest CA bundle an endpoint may carry, in characters. */
const maxCaChars = 64 * 1024;

/**
 * An endpoint's own CA, in PEM: its certificate is checked against it as
 * well as Node's usual roots (`ca` of `https.request`), for a receiver
 * under test with a private CA. Opt-in per endpoint; nothing else about the
 * check is relaxed (expiry and the name still count).
 */
export const caSchema = z
  .string()
  .max(maxCaChars, `must be at most ${maxCaChars} characters of PEM`)
  .superRefine((pem, ctx) => {
    if (!/^\s*-----BEGIN CERTIFICATE-----/.test(pem)) {
      ctx.addIssue({
        code: 'custom',
        message: 'must be a PEM certificate (-----BEGIN CERTIFICATE-----)',
      });
      return;
    }
    try {
      new X509Certificate(pem);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'is not a certificate Node can read' });
    }
  });
