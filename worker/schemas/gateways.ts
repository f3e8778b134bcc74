/** The fleet of gateways as GET /api/v1/gateways shows it. */
import { z } from 'zod';
import { Timestamp } from './common.ts';

export const Gateway = z
  .strictObject({
    object: z.literal('Gateway'),
    id: z
      .string()
      .meta({ description: 'GATEWAY_ID of the process (by default host name, process id and a random tail).' }),
    accounts_held: z.int().meta({ description: 'Accounts whose lease it holds now.' }),
    capacity: z.int().meta({ description: 'The most accounts it takes (GATEWAY_CAPACITY).' }),
    connected: z
      .boolean()
      .meta({ description: 'Whether its control socket is open (sends and mailbox actions need it).' }),
    connected_at: Timestamp.meta({ description: 'When its control socket last connected.' }),
    last_heartbeat_at: Timestamp.meta({ description: 'Its last heartbeat: its leases last the lease time from then.' }),
    version: z.string().nullable().meta({ description: 'The version it reports; null before its first heartbeat.' }),
  })
  .meta({ id: 'Gateway' });
export type Gateway = z.output<typeof Gateway>;

export const Gateways = z
  .strictObject({
    object: z.literal('Gateways'),
    data: z.array(Gateway).meta({ description: 'Every live gateway (heard from within a lease time), by id.' }),
  })
  .meta({ id: 'Gateways' });
export type Gateways = z.output<typeof Gateways>;
