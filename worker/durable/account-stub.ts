/**
 * The typed stub of an account's object. `Env` declares the namespace without its class, so that
 * env.ts (imported by everything) does not import the object (which imports nearly everything); the
 * class type is attached here, once. Nothing the object imports may import this file.
 */
import type { Env } from '../env.ts';
import type { AccountObject } from './account-object.ts';

export function accountObject(env: Env, accountId: string): DurableObjectStub<AccountObject> {
  const namespace = env.ACCOUNTS as unknown as DurableObjectNamespace<AccountObject>;
  return namespace.get(namespace.idFromName(accountId));
}
