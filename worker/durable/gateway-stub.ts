/** The typed stub of a gateway's object (see account-stub.ts for why `Env` leaves the class out). */
import type { Env } from '../env.ts';
import type { GatewayObject } from './gateway-object.ts';

export function gatewayObject(env: Env, gatewayId: string): DurableObjectStub<GatewayObject> {
  const namespace = env.GATEWAYS as unknown as DurableObjectNamespace<GatewayObject>;
  return namespace.get(namespace.idFromName(gatewayId));
}
