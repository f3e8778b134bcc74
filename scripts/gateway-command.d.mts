/** The gateway's command line from package.json's "gateway" script (see gateway-command.mjs). */
export function gatewayCommand(root: string): { env: Record<string, string>; args: string[] };
