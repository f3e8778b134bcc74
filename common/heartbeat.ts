/**
 * Keepalive of the control WebSocket, both ends. The gateway sends PING every PING_INTERVAL_MS;
 * the GatewayObject answers PONG without waking (the hibernation API's auto-response) and notes
 * the time. Each end takes the socket for dead after DEAD_AFTER_MS without a sign of the other: a
 * silently dropped connection (no close frame, a half-open TCP) is noticed within that time plus one
 * check, and the gateway opens a new socket at once.
 */
export const PING = 'ping';
export const PONG = 'pong';
export const PING_INTERVAL_MS = 3_000;
/** Three missed pings and a little more. */
export const DEAD_AFTER_MS = 10_000;
