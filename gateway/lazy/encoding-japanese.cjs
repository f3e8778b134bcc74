// encoding-japanese for the gateway bundle (see lazy-module.cjs): imapflow and libmime import it,
// and initialising it builds its Japanese conversion tables (about 3.5 MiB). The gateway relays raw
// sources: it decodes text only in the envelopes a mailbox action reads to find its message, and a
// Japanese charset there is rare.
const { lazyModule } = require('./lazy-module.cjs');

module.exports = lazyModule(() => require('encoding-japanese'));
