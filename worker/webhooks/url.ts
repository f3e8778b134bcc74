/**
 * Which URLs a webhook endpoint may call. Only http(s), no credentials in the URL, and (unless the
 * operator allows it for local development) nothing that names a private, loopback, link-local or
 * otherwise non-public host. Host names are judged by name only: Workers cannot resolve DNS before a
 * fetch, and a Worker's outbound fetches cannot reach a private network anyway.
 */
import { isPrivateHost } from '../../common/hosts.ts';

const MAX_URL_LENGTH = 2048;

/** Why `raw` cannot be a webhook URL, or null when it can. */
export function webhookUrlProblem(raw: string, allowPrivate: boolean): string | null {
  if (raw.length > MAX_URL_LENGTH) return `must be at most ${MAX_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute http or https URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must use http or https';
  if (url.username || url.password) return 'must not contain a user name or password; use headers for credentials';
  if (!allowPrivate && isPrivateHost(url.hostname)) {
    return 'must point at a public host, not a private, loopback or link-local address';
  }
  return null;
}
