/**
 * The signed-in API key. It lives in sessionStorage only (gone when the tab closes), never in a URL,
 * a cookie or a log. Whoever shows the sign-in page subscribes to sign-outs and their reason.
 */
const STORAGE_KEY = 'mailbox-edge.api-key';

type Listener = (reason: string | null) => void;
const listeners = new Set<Listener>();

export const currentKey = (): string | null => sessionStorage.getItem(STORAGE_KEY);

export function signIn(key: string): void {
  sessionStorage.setItem(STORAGE_KEY, key);
  for (const listener of listeners) listener(null);
}

/** Forget the key; `reason` is shown on the sign-in page (null: the person signed out). */
export function signOut(reason: string | null): void {
  sessionStorage.removeItem(STORAGE_KEY);
  for (const listener of listeners) listener(reason);
}

export function onSessionChange(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
