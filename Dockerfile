# The gateway as a container image: the esbuild bundle and the few packages it loads on first use,
# run as an unprivileged user. Build: `docker build -t mailbox-gateway .` (or `buildah bud`). Run:
#   docker run -e WORKER_URL=https://… -e GATEWAY_SECRET=… -p 9464:9464 mailbox-gateway
# See docs/operations.md. NODE_IMAGE is any image with Node 24 (and npm for the build stage).
ARG NODE_IMAGE=node:24-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# Production dependencies and esbuild (at the version package.json pins), nothing else of the dev tools.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm install --no-save --ignore-scripts --no-audit --no-fund \
      "esbuild@$(node -p "require('./package.json').devDependencies.esbuild")"
COPY common common
COPY gateway gateway
COPY scripts scripts
RUN node scripts/gateway-image.mjs /out

FROM ${NODE_IMAGE}
WORKDIR /app
COPY --from=build /out /app
# The settings of `npm run gateway` (package.json): glibc gives freed buffers back to the system,
# and (in CMD: NODE_OPTIONS refuses --optimize-for-size) V8 keeps a small young generation and grows
# the heap less. Health and metrics on 9464 (all
# interfaces: the container's port is what is published), logs as JSON lines.
ENV NODE_ENV=production \
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=8192:glibc.malloc.trim_threshold=131072 \
    GATEWAY_HTTP_PORT=9464 \
    GATEWAY_HTTP_HOST=0.0.0.0 \
    GATEWAY_LOG_FORMAT=json
USER node
EXPOSE 9464
# SIGTERM: the gateway closes its connections and hands its accounts to the other gateways at once.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+process.env.GATEWAY_HTTP_PORT+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "--max-semi-space-size=1", "--optimize-for-size", "dist/gateway/main.mjs"]
