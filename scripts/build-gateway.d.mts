/** Bundles `entry` (default: gateway/main.ts) into `outfile` as the gateway runs it (see build-gateway.mjs). */
export function buildGateway(outfile: string, entry?: string): Promise<void>;
