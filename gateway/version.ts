/** The gateway's version: the package's, reported in heartbeats, /healthz and /metrics. */
import pkg from '../package.json' with { type: 'json' };

export const GATEWAY_VERSION: string = pkg.version;
