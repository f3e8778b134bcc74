/** Bundles `entry` (default: gateway/main.ts) into `outfile` as the gateway runs it (see build-gateway.mjs). */
export function buildGateway(outfile: string, entry?: string): Promise<void>;
/** Packages the bundle loads from node_modules at run time. */
export const RUNTIME_PACKAGES: string[];
