// pino for the gateway bundle (see lazy-module.cjs): imapflow imports it for a default logger it
// creates only for a connection given no logger option, and the gateway passes `logger: false`.
const { lazyModule } = require('./lazy-module.cjs');

module.exports = lazyModule(() => require('pino'));
